"""The model sweep, `python -m torchneuron.sweep` (its usage: cli.py): every Hugging Face
`transformers` architecture, tiny and random, on CPU and `neuron`. models.py builds the tiny
models (shrink.py's strategies), inputs.py makes their inputs, submodel.py captures a sub-model's
inputs from its parent, reference.py runs the CPU reference down the shrink ladder, run.py runs
one model type and compares its columns (pretrained.py: the bfloat16 from_pretrained load on
neuron), report.py sums the rows up and cli.py is the command line; the models run in
conformance's workers."""

from .cli import CI_MODELS, main, parse_args, select
from . import submodel
from .inputs import AUDIO_SAMPLES, BATCH, SEQ, input_candidates, required_params
from .models import architectures, build_model
from .reference import prepare
from .pretrained import BF16_ATOL, BF16_RTOL, compare_bf16, run_pretrained
from .shrink import STRATEGIES, check_config, shrink_overrides, tiny_config
from .report import markdown, reference_classes, top_fallbacks, top_reasons, totals
from .run import (ATOL, COLUMNS, RANK, REFERENCE_STATUSES, RTOL, SweepRunner, _backward, _compile_backward_run, _compile_run,
                  _dynamo_cpu_agrees, _if_dynamo_cpu_raises, _neuron_run, _record, _weigh_mismatches_against_float64,
                  compare_tensors, float_outputs, run_model)

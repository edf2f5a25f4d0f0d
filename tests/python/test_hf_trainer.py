"""transformers.Trainer on neuron with TrainingArguments as a user writes them: a tiny causal LM
and a tiny classifier fine-tuned for a few steps (bf16 off and on), losses close to the same run
on CPU; and `accelerate launch` with 2 processes running DDP through our backend."""
import math
import os
import sys
import textwrap

import pytest
import torch

# make test installs both (the .stamp-frameworks step): a broken install fails here, never skips.
import accelerate  # noqa: E402,F401
import transformers  # noqa: E402

from conftest import run_in_new_group  # noqa: E402

from transformers import (GPT2Config, GPT2LMHeadModel, BertConfig, BertForSequenceClassification,  # noqa: E402
                          Trainer, TrainingArguments)


class TokenData(torch.utils.data.Dataset):
    """Fixed random token sequences (labels: the tokens, or a class per sequence)."""

    def __init__(self, classify, n=32, length=24, vocab=64, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, vocab, (n, length), generator=g)
        self.classes = (self.ids.sum(1) % 3) if classify else None

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        item = {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i])}
        item["labels"] = self.classes[i] if self.classes is not None else self.ids[i]
        return item


def tiny_model(classify):
    torch.manual_seed(0)
    if classify:
        return BertForSequenceClassification(BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                                        num_attention_heads=2, intermediate_size=64, num_labels=3,
                                                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    # No dropout: the devices draw different random numbers, and the runs must be comparable.
    return GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=2, n_positions=32, resid_pdrop=0.0,
                                      embd_pdrop=0.0, attn_pdrop=0.0))


def fine_tune(tmp_path, classify, use_cpu, bf16):
    args = TrainingArguments(output_dir=str(tmp_path / ("cpu" if use_cpu else "neuron")), per_device_train_batch_size=8,
                             max_steps=6, learning_rate=3e-3, logging_steps=1, report_to="none", save_strategy="no",
                             use_cpu=use_cpu, bf16=bf16, seed=0, data_seed=0, dataloader_num_workers=0)
    trainer = Trainer(model=tiny_model(classify), args=args, train_dataset=TokenData(classify))
    trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    return trainer, losses


@pytest.mark.parametrize("classify", [False, True], ids=["causal_lm", "classifier"])
@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_trainer_fine_tunes_on_neuron_like_on_cpu(tmp_path, classify, bf16):
    trainer, losses = fine_tune(tmp_path, classify, use_cpu=False, bf16=bf16)
    assert trainer.args.device.type == "neuron"
    assert next(trainer.model.parameters()).device.type == "neuron"
    _, cpu_losses = fine_tune(tmp_path, classify, use_cpu=True, bf16=bf16)
    assert len(losses) == len(cpu_losses) == 6 and all(math.isfinite(x) for x in losses)
    tol = 0.05 if bf16 else 2e-3
    for mine, theirs in zip(losses, cpu_losses):
        assert mine == pytest.approx(theirs, rel=tol, abs=tol)
    if not classify:
        assert losses[-1] < losses[0]


def test_accelerate_launch_runs_ddp_on_neuron(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(textwrap.dedent("""
        import torch, torchneuron
        from accelerate import Accelerator
        acc = Accelerator()
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model, opt = acc.prepare(model, opt)
        g = torch.Generator().manual_seed(acc.process_index)
        x = torch.randn(4, 8, generator=g).to(acc.device)
        loss = model(x).square().mean()
        acc.backward(loss)
        grad = next(model.parameters()).grad.detach().cpu()
        gathered = acc.gather(grad.to(acc.device)[None]).cpu()
        if acc.is_main_process:
            same = torch.allclose(gathered[0], gathered[1])
            print("RESULT", acc.device.type, acc.num_processes, type(model).__name__,
                  torch.distributed.get_backend(), same)
    """))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHNEURON_")}
    env.update(TORCHNEURON_NUM_DEVICES="2", OMP_NUM_THREADS="1")
    done = run_in_new_group([sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2",
                             "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", str(script)],
                            300, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT"))
    # DDP averaged the two ranks' different gradients into the same one on both.
    assert line.split()[1:] == ["neuron", "2", "DistributedDataParallel", "neuron", "True"]

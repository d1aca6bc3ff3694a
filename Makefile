PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed

.PHONY: demo test docs bench lint clean notebooks claims-data

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt torch==2.13.0
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,dask]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/fedbound check --all

# one pytest worker per core (pytest-xdist), each test file's tests shared out as workers free up
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist worksteal

# the user guide and API reference, warnings as errors (docs/conf.py)
docs: $(DOCS_STAMP)
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs docs/_build/html
	@echo "docs/_build/html/index.html"

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[docs]'
	touch $(DOCS_STAMP)

# execute every notebook in place (stored with its outputs) and write notebooks/html/<stem>.html
notebooks: $(STAMP)
	$(BIN)/python notebooks/execute.py

# the stored quick reproduction of every paper's claims that notebook 07 shows (about 4 min on
# 2 cores; then `make notebooks`): exit 0 or 1 (a claim contradicted) is a reproduction, 4 (a
# run failed) or any other status is not, and the stored file is left as it was
CLAIMS_DATA := notebooks/data/claims_quick.json
claims-data: $(STAMP)
	$(BIN)/fedbound reproduce mllsgd hfl tdcd afl --quick --jobs 2 --json --curves > $(CLAIMS_DATA).tmp \
	  || [ $$? -eq 1 ] || { rm -f $(CLAIMS_DATA).tmp; exit 1; }
	mv $(CLAIMS_DATA).tmp $(CLAIMS_DATA)

bench: $(STAMP)
	rm -f benchmarks/results.json
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done
	$(BIN)/python benchmarks/results.py

lint: $(STAMP)
	$(BIN)/ruff check bounds sim verify tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info docs/_build

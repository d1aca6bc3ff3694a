PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed
# Where torch comes from (docs/install.md): a wheel index given as TORCH_INDEX, which pip uses
# for torch alone, e.g. https://download.pytorch.org/whl/cpu (the CPU build) or
# https://download.pytorch.org/whl/cu126 (a CUDA build); empty, pip's own index (PyPI unless
# pip is configured otherwise: on Linux x86-64 that is the CUDA build). The index an
# environment was made with is recorded in $(VENV)/.torch-index: a later make without
# TORCH_INDEX keeps it, and a different TORCH_INDEX installs torch again from there.
TORCH_RECORDED := $(shell cat $(VENV)/.torch-index 2>/dev/null)
TORCH_INDEX ?= $(TORCH_RECORDED)
# what the first line of an install says where TORCH_INDEX is empty
TORCH_DEFAULT := pip's index (PyPI's on Linux x86-64 is the CUDA build, about 5.8 GB with its \
  packages; TORCH_INDEX=https://download.pytorch.org/whl/cpu takes the CPU build)
# more arguments for every pip install (--proxy URL, --find-links DIR, --no-index, ...)
PIP_ARGS ?=
PIP := $(BIN)/python -m pip install $(PIP_ARGS)
# a long step: in a log (output not a terminal) a line every 30 s says it still runs
LONG := sh .ci/heartbeat

.PHONY: demo test docs bench lint clean notebooks claims-data
ifneq ($(TORCH_INDEX),$(TORCH_RECORDED))
.PHONY: $(STAMP)
endif

$(STAMP): pyproject.toml constraints.txt
	@echo "== $(VENV): torch 2.13.0 from $(or $(TORCH_INDEX),$(TORCH_DEFAULT)), then fedbound (docs/install.md)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(LONG) "pip" $(PIP) --quiet --upgrade pip
	if [ -f $(STAMP) ] && [ '$(TORCH_INDEX)' != '$(TORCH_RECORDED)' ]; then \
	  $(BIN)/python -m pip uninstall --yes --quiet torch; fi
	$(LONG) "installing torch" $(PIP) --progress-bar off -c constraints.txt \
	  $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) torch==2.13.0
	$(LONG) "installing fedbound" $(PIP) --quiet -c constraints.txt -e '.[dev,dask]'
	echo '$(TORCH_INDEX)' > $(VENV)/.torch-index
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
	$(LONG) "installing the docs' packages" $(PIP) --quiet -c constraints.txt -e '.[docs]'
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

# The book's commands. `make book` builds the site; `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV ?= .venv
PY := $(VENV)/bin/python
JOBS ?=
NB ?=
SEED ?=
QUICK ?=

RUN_FLAGS := $(if $(QUICK),--quick) $(if $(SEED),--seed $(SEED)) $(if $(JOBS),--jobs $(JOBS))

.PHONY: book test notebook lint unit repo-check sync html clean venv data lab

$(VENV)/.installed: requirements.txt requirements-data.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -r requirements-data.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

venv: $(VENV)/.installed

## make book: execute every notebook (default parameters, cached), build _build/html, print the table
book: venv
	$(PY) book/build.py book $(if $(SEED),--seed $(SEED)) $(if $(JOBS),--jobs $(JOBS))

## make notebook NB=<slug> [QUICK=1] [SEED=n]: one notebook into _build/executed (quick: _build/quick/executed);
## HELPERS_DATA=dir make notebook ... reads the checkpoints under dir (see make data)
notebook: venv
	@test -n "$(NB)" || { echo "usage: make notebook NB=<slug> [QUICK=1] [SEED=n]"; exit 2; }
	$(PY) book/build.py run $(NB) $(RUN_FLAGS) --force

## make data NB=<slug> [SEEDS="7 8 9"] [DATA=dir]: rebuild a chapter's checkpoints and data files (every
## data/<slug>/make_*.py), at other seeds (--seeds) and into another data root (--out; a run reads it with
## HELPERS_DATA=dir)
SEEDS ?=
DATA ?=
data: venv
	@test -n "$(NB)" || { echo "usage: make data NB=<slug> [SEEDS=\"7 8 9\"] [DATA=dir]"; exit 2; }
	@ls data/$(NB)/make_*.py >/dev/null 2>&1 || { echo "no script data/$(NB)/make_*.py"; exit 2; }
	for f in data/$(NB)/make_*.py; do \
	  case "$$f" in */make_wsd.py) test -n "$(WSD)" || { echo "skipped $$f: a registered multi-hour recipe (its docstring says how to run it; WSD=1 runs it here)"; continue; };; esac; \
	  $(PY) "$$f" $(if $(SEEDS),--seeds $(SEEDS)) $(if $(DATA),--out "$(DATA)") || exit 1; done

## make test: lint, unit tests, notebooks in quick mode, the quick site and its checks (what CI runs)
test: venv lint repo-check unit
	$(PY) book/build.py book --quick $(if $(JOBS),--jobs $(JOBS))
	$(PY) -m pytest -q tests/test_site.py

lint: venv
	$(VENV)/bin/ruff check helpers tests book notebooks

repo-check: venv
	$(PY) book/build.py check-repo

unit: venv
	$(PY) -m pytest -q -x -n 2 --ignore=tests/test_site.py

## make sync: regenerate each notebook's .ipynb from its reviewed .py (outputs stay stripped)
sync: venv
	for f in notebooks/*.py; do $(VENV)/bin/jupytext --to ipynb --update "$$f" 2>/dev/null || $(VENV)/bin/jupytext --to ipynb "$$f"; done

## make lab [LAB_ARGS=...]: JupyterLab on notebooks/ with the venv's kernel (helpers importable), on localhost
LAB_ARGS ?=
lab: venv
	cd notebooks && $(abspath $(VENV))/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

clean:
	rm -rf _build

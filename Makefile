# The two set-up commands of the README: `make demo` and `make test`.
# Each creates the project's own virtualenv (.venv) on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The real coding CLIs for the realcli test tier: one pinned version each, read from
# tests/realcli/*_VERSION (AGENTRT_CLAUDE_VERSION / AGENTRT_CODEX_VERSION /
# AGENTRT_GEMINI_VERSION / AGENTRT_QWEN_VERSION / AGENTRT_OPENCODE_VERSION /
# AGENTRT_PI_VERSION override them),
# installed from the npm registry into project-local folders that are not committed.
CLAUDE_VERSION := $(or $(AGENTRT_CLAUDE_VERSION),$(shell cat tests/realcli/CLAUDE_VERSION))
CLAUDE_DIR := .cache/claude-$(CLAUDE_VERSION)
AGENTRT_CODEX_VERSION ?= $(shell cat tests/realcli/CODEX_VERSION)
export AGENTRT_CODEX_VERSION
CODEX_DIR := .cache/npm/codex-$(AGENTRT_CODEX_VERSION)
AGENTRT_GEMINI_VERSION ?= $(shell cat tests/realcli/GEMINI_VERSION)
export AGENTRT_GEMINI_VERSION
GEMINI_DIR := .cache/npm/gemini-$(AGENTRT_GEMINI_VERSION)
AGENTRT_QWEN_VERSION ?= $(shell cat tests/realcli/QWEN_VERSION)
export AGENTRT_QWEN_VERSION
QWEN_DIR := .cache/npm/qwen-$(AGENTRT_QWEN_VERSION)
AGENTRT_OPENCODE_VERSION ?= $(shell cat tests/realcli/OPENCODE_VERSION)
export AGENTRT_OPENCODE_VERSION
OPENCODE_DIR := .cache/npm/opencode-$(AGENTRT_OPENCODE_VERSION)
AGENTRT_PI_VERSION ?= $(shell cat tests/realcli/PI_VERSION)
export AGENTRT_PI_VERSION
PI_DIR := .cache/npm/pi-$(AGENTRT_PI_VERSION)

.PHONY: demo test docs lint typecheck pytest clean clis claude-cli codex-cli gemini-cli \
	qwen-cli opencode-cli pi-cli postgres-server browser

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,cli,postgres]'
	touch $(STAMP)

# The demo runs the pinned claude binary when npm could install it, else a bundled fake CLI.
demo: $(STAMP) claude-cli
	$(BIN)/agentrt demo

test: $(STAMP) clis lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# The documentation site, every warning an error (docs/conf.py says why Sphinx).
docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -b html docs docs/_build/html

# The suite runs on two workers per core: a serial run keeps about half a core busy (it
# waits on real processes, fake CLIs' pauses, bounds that fire in real time, PostgreSQL),
# so two per core fill the cores without queueing for them. Tests that must not share the
# machine's time with their own kind carry an xdist_group mark: --dist loadgroup runs each
# such group on one worker. PYTEST_WORKERS=0 runs it serially.
PYTEST_WORKERS ?= $(shell echo $$(( 2 * $$(nproc) )))

# The suite starts `python -m agentrt` hundreds of times; compiling the packages once first
# (agentrt and the backends it loads) spares each start the compile where the environment
# says not to write bytecode.
#
# Its temporary files (every test's directory, and TMPDIR for the programs it starts) go to
# a fresh folder in memory, in /dev/shm where that has 4 GB free (else in TMPDIR), removed
# after the run. The SQLite files in them are written with synchronous=FULL, and an fsync
# to a disk (3 ms or more) at each write left the cores idle while a test waited for it;
# what the tests check of a store is the same on either file system. The folder is open
# to other users' look-ups: the test PostgreSQL server runs as its own user.
TEST_TMP ?= $(shell [ "$$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $$4}')" -gt 4000000 ] \
	2>/dev/null && echo /dev/shm)
pytest: $(STAMP) clis postgres-server browser
	$(BIN)/python -m compileall -q agentrt backends
	tmp="$$(mktemp -d --tmpdir$(if $(TEST_TMP),=$(TEST_TMP)) agentrt-tests.XXXXXX)" && \
		trap 'rm -rf "$$tmp"' EXIT && chmod 711 "$$tmp" && \
		TMPDIR="$$tmp" $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --basetemp "$$tmp/t"

# The PostgreSQL tier starts a throwaway server from the installed binaries
# (tests/pg_server.py finds them). Where none are installed and we are root with apt, the
# Debian package is installed; otherwise that tier is skipped, saying so.
postgres-server:
	@if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null \
		|| [ -n "$$AGENTRT_PG_BIN" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql \
		|| echo "could not install PostgreSQL: its test tier will be skipped"; \
	else echo "no PostgreSQL server binaries: its test tier will be skipped"; fi

# The console's browser tier drives headless Chromium through chromedriver, both from
# Debian's packages (tests/browser.py); installed like PostgreSQL, else that tier is skipped.
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			chromium chromium-driver \
		|| echo "could not install chromium: the console's browser tier will be skipped"; \
	else echo "no chromium and chromedriver: the console's browser tier will be skipped"; fi

clis: claude-cli codex-cli gemini-cli qwen-cli opencode-cli pi-cli

claude-cli:
	tools/install-npm-cli @anthropic-ai/claude-code $(CLAUDE_VERSION) $(CLAUDE_DIR) claude

codex-cli:
	tools/install-npm-cli @openai/codex $(AGENTRT_CODEX_VERSION) $(CODEX_DIR) codex

gemini-cli:
	tools/install-npm-cli @google/gemini-cli $(AGENTRT_GEMINI_VERSION) $(GEMINI_DIR) gemini

qwen-cli:
	tools/install-npm-cli @qwen-code/qwen-code $(AGENTRT_QWEN_VERSION) $(QWEN_DIR) qwen

opencode-cli:
	tools/install-npm-cli opencode-ai $(AGENTRT_OPENCODE_VERSION) $(OPENCODE_DIR) opencode

pi-cli:
	tools/install-npm-cli @mariozechner/pi-coding-agent $(AGENTRT_PI_VERSION) $(PI_DIR) pi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache docs/_build

# The two set-up commands of the README: `make demo` and `make test`.
# Each creates the project's own virtualenv (.venv) on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest clean codex-cli

# The codex CLI the real-binary tests drive: the version pinned in tests/realcli/CODEX_VERSION
# (or $AGENTRT_CODEX_VERSION), from the npm registry, in a project-local folder (gitignored).
AGENTRT_CODEX_VERSION ?= $(shell cat tests/realcli/CODEX_VERSION)
export AGENTRT_CODEX_VERSION
CODEX_DIR := .cache/npm/codex-$(AGENTRT_CODEX_VERSION)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m agentrt demo

test: $(STAMP) codex-cli lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check agentrt backends tests examples bench
	$(BIN)/ruff format --check agentrt backends tests examples bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q

codex-cli:
	@if [ -x $(CODEX_DIR)/node_modules/.bin/codex ]; then :; \
	elif ! command -v npm >/dev/null 2>&1; then \
	  echo "npm not found: not installing codex $(AGENTRT_CODEX_VERSION); its realcli tests will skip"; \
	else \
	  echo "installing @openai/codex@$(AGENTRT_CODEX_VERSION) into $(CODEX_DIR)"; \
	  rm -rf $(CODEX_DIR).partial && \
	  npm install --prefix $(CODEX_DIR).partial --no-save --no-audit --no-fund --ignore-scripts \
	    --loglevel=error @openai/codex@$(AGENTRT_CODEX_VERSION) && \
	  mv $(CODEX_DIR).partial $(CODEX_DIR); \
	fi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

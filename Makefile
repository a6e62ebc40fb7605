# The two set-up commands of the README: `make demo` and `make test`.
# Each creates the project's own virtualenv (.venv) on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The real Claude CLI for the realcli test tier: one pinned version, read from
# tests/realcli/CLAUDE_VERSION (AGENTRT_CLAUDE_VERSION overrides it), installed from the npm
# registry into a project-local folder that is not committed.
CLAUDE_VERSION := $(or $(AGENTRT_CLAUDE_VERSION),$(shell cat tests/realcli/CLAUDE_VERSION))
CLAUDE_DIR := .cache/claude-$(CLAUDE_VERSION)
CLAUDE_BIN := $(CLAUDE_DIR)/node_modules/.bin/claude

.PHONY: demo test lint typecheck pytest clean claude-cli

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m agentrt demo

test: $(STAMP) claude-cli lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP) claude-cli
	$(BIN)/pytest -q

# Idempotent: an existing install is kept. Without npm the tier is skipped (pytest says so).
# The package declares node >= 22 but ships a native binary that runs on older node; its
# postinstall copies that binary into place, and --version proves it did.
claude-cli:
	@if [ -x "$(CLAUDE_BIN)" ]; then \
		exit 0; \
	elif ! command -v npm >/dev/null 2>&1; then \
		echo "npm not found: not installing claude $(CLAUDE_VERSION); tests/realcli will be skipped"; \
	else \
		echo "Installing @anthropic-ai/claude-code@$(CLAUDE_VERSION) into $(CLAUDE_DIR)"; \
		rm -rf "$(CLAUDE_DIR).partial" && \
		npm install --prefix "$(CLAUDE_DIR).partial" --no-save --no-audit --no-fund \
			--engine-strict=false --loglevel=error \
			"@anthropic-ai/claude-code@$(CLAUDE_VERSION)" && \
		version=$$("$(CLAUDE_DIR).partial/node_modules/.bin/claude" --version) && \
		case "$$version" in \
			"$(CLAUDE_VERSION) "*) ;; \
			*) echo "installed claude says '$$version', expected $(CLAUDE_VERSION)"; exit 1;; \
		esac && \
		mv "$(CLAUDE_DIR).partial" "$(CLAUDE_DIR)"; \
	fi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# Set-up and checks. Every target installs what it needs first (uv, the locked environment).
SHELL := /bin/bash
PYTHON ?= python3
UV_VERSION := 0.13.9
UV := $(PYTHON) -m uv
VENV := .venv
RUN := $(UV) run --frozen

.PHONY: install lint typecheck layers test test-fast bench demo demo-lanes serve clean

$(VENV)/.installed: uv.lock pyproject.toml packages/agentica/pyproject.toml packages/agentica-team/pyproject.toml
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"
	$(UV) sync --frozen --all-packages --all-extras
	@touch $@

install: $(VENV)/.installed

lint: install  # ruff check includes the complexity gate (C901, max 12: pyproject.toml)
	$(RUN) ruff check .
	$(RUN) ruff format --check packages tests benchmarks examples demos

typecheck: install
	$(RUN) mypy

layers: install
	$(RUN) lint-imports

test: lint typecheck layers
	$(RUN) pytest -q

test-fast: install
	$(RUN) pytest -q -x -m "not slow"

bench: install  # the framework core, then the team service (benchmarks/team.py)
	$(RUN) python benchmarks/run.py $(ARGS)
	$(RUN) python benchmarks/team.py

demo: install
	$(RUN) agentica demo

demo-lanes: install  # the team service's lanes scenario on the embedded model (a few minutes)
	$(RUN) python demos/team_lanes.py

serve: install  # the team service; ARGS="--port 9000 --database-url postgresql://..."
	$(RUN) agentica serve $(ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis

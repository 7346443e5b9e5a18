# Set-up and checks. Every target installs what it needs first (uv, the locked environment).
SHELL := /bin/bash
PYTHON ?= python3
UV_VERSION := 0.13.9
UV := $(PYTHON) -m uv
VENV := .venv
RUN := $(UV) run --frozen

.PHONY: install lint typecheck layers web web-test test test-fast bench demo demo-lanes demo-research serve clean

$(VENV)/.installed: uv.lock pyproject.toml packages/agentica/pyproject.toml packages/agentica-team/pyproject.toml
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"
	$(UV) sync --frozen --all-packages --all-extras
	@touch $@

install: $(VENV)/.installed

# The web UI (web/): npm ci from the lock file; the API types are generated from the service's
# OpenAPI schema (a renamed field breaks the build); `vite build` writes into the package, where
# `agentica serve` serves it. Each step reruns only when its inputs changed.
WEB_BUILT := packages/agentica-team/src/agentica_team/web_dist/index.html
WEB_SOURCES := $(shell find web/src web/index.html web/vite.config.ts web/tsconfig.json -type f -not -name '*.test.*' -not -name 'openapi.json' -not -name 'schema.d.ts' 2>/dev/null)
TEAM_SOURCES := $(shell find packages/agentica-team/src/agentica_team -name '*.py' 2>/dev/null)

web/node_modules/.installed: web/package-lock.json
	@command -v npm >/dev/null || { echo "the web UI needs Node.js 20.19+ and npm"; exit 1; }
	cd web && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

web/src/api/schema.d.ts: $(TEAM_SOURCES) web/scripts/openapi.py web/node_modules/.installed $(VENV)/.installed
	$(RUN) python web/scripts/openapi.py > web/src/api/openapi.json.new
	mv web/src/api/openapi.json.new web/src/api/openapi.json
	cd web && npm run --silent gen

$(WEB_BUILT): web/src/api/schema.d.ts $(WEB_SOURCES) web/node_modules/.installed
	cd web && npm run --silent build

web: $(WEB_BUILT)

# Real MCP servers (npm, versions pinned in the lock file) for the MCP client's tests.
MCP_PEERS := tests/mcp_peers/node_modules/.installed
$(MCP_PEERS): tests/mcp_peers/package-lock.json
	@command -v npm >/dev/null || { echo "the MCP tests need Node.js and npm"; exit 1; }
	cd tests/mcp_peers && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

web-test: web  # type-check and the component tests (Vitest)
	cd web && npm run --silent typecheck && npm test --silent

lint: install  # ruff check includes the complexity gate (C901, max 12: pyproject.toml)
	$(RUN) ruff check .
	$(RUN) ruff format --check packages tests benchmarks examples demos

typecheck: install
	$(RUN) mypy

layers: install
	$(RUN) lint-imports

test: lint typecheck layers web-test $(MCP_PEERS)
	$(RUN) pytest -q

test-fast: install $(MCP_PEERS)
	$(RUN) pytest -q -x -m "not slow"

bench: install web $(MCP_PEERS)  # the framework core, MCP, the team service, knowledge, evals, several agents
	$(RUN) python benchmarks/run.py $(ARGS)
	$(RUN) python benchmarks/mcp_calls.py
	$(RUN) python benchmarks/team.py
	$(RUN) python benchmarks/knowledge.py
	$(RUN) python benchmarks/eval_speedup.py
	$(RUN) python benchmarks/multi_agent.py
	$(RUN) python benchmarks/workflows.py

demo: install
	$(RUN) agentica demo

demo-research: install  # deep research over the team service's docs on the embedded model
	$(RUN) agentica research "How does the team service keep the provider key away from students?" --knowledge docs/team.md --db .bench-out/research.db --out .bench-out/research.md

demo-lanes: install  # the team service's lanes scenario on the embedded model (a few minutes)
	$(RUN) python demos/team_lanes.py

serve: install web  # the team service; ARGS="--port 9000 --database-url postgresql://..."
	$(RUN) agentica serve $(ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis web/node_modules $(dir $(WEB_BUILT))

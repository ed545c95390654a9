#!/usr/bin/env bash
# Lint: ruff (style), mypy (types) and import-linter (the layer contract in .importlinter).
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check operator tests testenv hack
.venv/bin/ruff format --check operator tests testenv hack
.venv/bin/mypy operator tests testenv
PYTHONPATH=operator:. .venv/bin/lint-imports

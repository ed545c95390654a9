#!/usr/bin/env bash
# Lint: ruff (style), mypy (types), import-linter (the layer contract in .importlinter) and actionlint (the
# GitHub Actions workflows; built on first use by hack/build-actionlint.sh, cached after).
# mypy's and import-linter's caches live outside the clone, so a fresh clone lints in seconds (both
# check each module's content hash before they trust a cached result).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${LPO_CACHE_DIR:-$HOME/.cache/liqo-peering-operator}/lint
mkdir -p "$cache"
.venv/bin/ruff check operator tests testenv hack bench
.venv/bin/ruff format --check operator tests testenv hack bench
.venv/bin/mypy --cache-dir "$cache/mypy" operator tests testenv bench
PYTHONPATH=operator:. .venv/bin/lint-imports --cache-dir "$cache/import-linter"
hack/build-actionlint.sh >/dev/null
# shellcheck and pyflakes integrations off: the result must not depend on what else is installed.
"$(hack/tool-path.sh actionlint)" -shellcheck= -pyflakes= .github/workflows/*.yml

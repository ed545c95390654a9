#!/usr/bin/env bash
# Creates .venv with the operator and its dev tools; a no-op when pyproject.toml has not changed.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [[ -f $stamp ]]; then exit 0; fi
# A creation cut short (no pip) is not reused: start over.
if [[ -d .venv && ! -x .venv/bin/pip ]]; then rm -rf .venv; fi
python3.11 -m venv .venv 2>/dev/null || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e '.[dev]'
rm -f .venv/.installed-*
touch "$stamp"

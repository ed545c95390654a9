#!/usr/bin/env bash
# Creates .venv with the operator, its dev tools and the docs site's (MkDocs); a no-op when pyproject.toml has not changed.
# uv installs them (from its cache under ~/.cache/uv, in seconds on a warm machine; pip took about a
# minute for every fresh clone), into a plain venv that keeps pip for anyone who wants it.
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)-uv$UV_VERSION
if [[ -f $stamp ]]; then exit 0; fi
# A creation cut short (no pip) is not reused: start over.
if [[ -d .venv && ! -x .venv/bin/pip ]]; then rm -rf .venv; fi
python3.11 -m venv .venv 2>/dev/null || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check "uv==$UV_VERSION"
.venv/bin/uv pip install -q --python .venv/bin/python -e '.[dev,docs]'
rm -f .venv/.installed-*
touch "$stamp"

#!/usr/bin/env bash
# Creates .venv with the operator, its dev tools and the docs site's (MkDocs), at the versions uv.lock
# pins; a no-op when neither pyproject.toml nor uv.lock has changed. uv installs them (from its cache
# under ~/.cache/uv, in seconds on a warm machine; pip took about a minute for every fresh clone), into a
# plain venv that keeps pip for anyone who wants it.
#
# `hack/venv.sh lock` (make lock) re-locks first: run it after editing the dependencies in pyproject.toml
# and commit uv.lock with them. Without it this script fails on a stale lock (CI runs it first).
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.9
relock=false
if [[ ${1:-} == lock ]]; then relock=true; fi
stamp() { echo ".venv/.installed-$(cat pyproject.toml uv.lock 2>/dev/null | sha256sum | cut -c1-16)-uv$UV_VERSION"; }
if [[ -f $(stamp) && $relock == false ]]; then exit 0; fi
# A creation cut short (no pip) is not reused: start over.
if [[ -d .venv && ! -x .venv/bin/pip ]]; then rm -rf .venv; fi
if [[ ! -d .venv ]]; then python3.11 -m venv .venv 2>/dev/null || python3 -m venv .venv; fi
.venv/bin/pip install -q --disable-pip-version-check "uv==$UV_VERSION"
if $relock; then
    .venv/bin/uv lock --quiet
elif ! .venv/bin/uv lock --check --quiet; then
    echo "error: uv.lock does not match pyproject.toml; run \`make lock\` and commit uv.lock" >&2
    exit 1
fi
# Exactly the locked versions, the operator itself editable. --inexact: pip and uv stay in the venv.
UV_PROJECT_ENVIRONMENT=.venv .venv/bin/uv sync --frozen --inexact --extra dev --extra docs --python .venv/bin/python --quiet
rm -f .venv/.installed-*
touch "$(stamp)"

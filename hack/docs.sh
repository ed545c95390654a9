#!/usr/bin/env bash
# The documentation site (MkDocs, mkdocs.yml).
#   hack/docs.sh build   the generated tables checked (hack/gen-docs.py --check), then the site built with
#                        --strict into .local/site: a broken link or anchor, or a page missing from the nav,
#                        fails (mkdocs.yml's validation)
#   hack/docs.sh serve   serves it on http://127.0.0.1:8000, rebuilt on every change
# tests/site renders the built site in headless Chromium (hack/install-chromium.sh installs it).
set -euo pipefail
# mkdocs-material prints a notice about MkDocs 2 on every build; the build log is for the site.
export NO_MKDOCS_2_WARNING=1
cd "$(dirname "$0")/.."
case ${1:-build} in
    build)
        .venv/bin/python hack/gen-docs.py --check
        .venv/bin/mkdocs build --strict --clean --site-dir .local/site
        ;;
    serve)
        exec .venv/bin/mkdocs serve --strict --dev-addr 127.0.0.1:8000
        ;;
    *)
        echo "usage: $0 [build|serve]" >&2
        exit 2
        ;;
esac

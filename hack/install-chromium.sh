#!/usr/bin/env bash
# Installs headless Chromium and a font from Debian's packages, for tests/site (the documentation site
# rendered and screenshotted). A no-op (two dpkg queries) when both are installed.
set -euo pipefail
exec "$(dirname "$0")/apt-install.sh" chromium fonts-dejavu-core

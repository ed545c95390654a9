#!/usr/bin/env bash
# Installs headless Chromium and a font from Debian's packages, for tests/site (the documentation site
# rendered and screenshotted). A no-op (two dpkg queries) when both are installed.
set -euo pipefail

packages=(chromium fonts-dejavu-core)
missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
    exit 0
fi
sudo=()
if [[ $(id -u) != 0 ]]; then sudo=(sudo); fi
echo "installing ${missing[*]} (apt)"
start=$SECONDS
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "installed ${missing[*]} in $((SECONDS - start))s"

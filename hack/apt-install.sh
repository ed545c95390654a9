#!/usr/bin/env bash
# Installs Debian packages that are missing (apt, no recommends: everything here runs as root, nothing
# rootless); a no-op (one dpkg query per package) when all are installed. Usage: hack/apt-install.sh PKG...
set -euo pipefail

missing=()
for p in "$@"; do
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

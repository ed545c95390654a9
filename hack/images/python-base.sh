#!/usr/bin/env bash
# The local stand-in for the Dockerfile's base image (ARG PYTHON_IMAGE, a registry image that cannot be
# pulled here), assembled from Debian bookworm's packages with mmdebstrap: python3.11, pip, setuptools and
# wheel installed by pip into /usr/local as in the official image (so the Dockerfile can uninstall them),
# `python` on PATH, CA certificates, no docs, no man pages, no apt lists.
#   hack/images/python-base.sh OUT.tar     (an uncompressed tar of the root filesystem)
# hack/build-images.sh keys the cached image by this file's hash: edit it and the base is rebuilt.
set -euo pipefail

if [[ ${1:-} == customize ]]; then
    # mmdebstrap's customize hook: $2 is the new root. Commands inside it run with a clean environment,
    # so that the caller's pip settings (find-links, certificates) stay outside the image.
    root=$2
    in_root() { chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
    # pip manages /usr/local as in the official image: no "externally managed" marker.
    rm -f "$root/usr/lib/python3.11/EXTERNALLY-MANAGED"
    wheels=/usr/share/python-wheels
    pip_wheel=$(cd "$root$wheels" && echo pip-*.whl)
    in_root python3 "$wheels/$pip_wheel/pip" install --quiet --root-user-action=ignore --no-index \
        --find-links "$wheels" pip setuptools wheel
    in_root dpkg --purge python3-pip-whl python3-setuptools-whl python3-wheel-whl >/dev/null
    ln -s /usr/bin/python3 "$root/usr/local/bin/python"
    exit 0
fi

out=$1
mmdebstrap --quiet --variant=minbase \
    --include=python3,python3.11,ca-certificates,netbase,tzdata,python3-pip-whl,python3-setuptools-whl,python3-wheel-whl \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook="'$(realpath "$0")' customize \"\$1\"" \
    bookworm "$out" \
    "deb http://deb.debian.org/debian bookworm main" \
    "deb http://deb.debian.org/debian bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main"

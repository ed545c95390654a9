#!/usr/bin/env bash
# The local bases of Liqo's images (hack/build-liqo-images.sh), in place of Liqo's alpine one
# (build/liqo/Dockerfile), made from Debian bookworm's packages with mmdebstrap:
#   static   the static Go binaries' base: Debian's CA bundle, /etc/passwd and /etc/group (root, uid/gid
#            1000, which the chart's Pods run as, and nobody), /tmp, /workspace. No shell, no libc.
#   net      the gateway's containers (gateway, wireguard, geneve): what Liqo's Dockerfile adds for them
#            (iproute2 nftables bash wireguard-tools tcpdump conntrack-tools curl iputils), from Debian's
#            packages, with their dependencies, plus what `static` has.
#   openssl  the metric agent's init container (Liqo's build/cert-creator: alpine + openssl): Debian's
#            openssl and its dependencies, plus what `static` has.
# All are mmdebstrap's `extract` variant: the packages unpacked, with their dependencies, no maintainer
# scripts run and no package manager (no apt, dpkg, perl): nothing in these images installs anything.
#   hack/images/liqo-base.sh KIND OUT.tar     (an uncompressed tar of the root filesystem)
# hack/build-liqo-images.sh keys the cached bases by this file's hash: edit it and they are rebuilt.
set -euo pipefail

if [[ ${1:-} == customize ]]; then
    # $2 is the unpacked root: what every base has besides its packages.
    root=$2
    mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root/workspace"
    chmod 0755 "$root/etc" "$root/etc/ssl" "$root/etc/ssl/certs" "$root/workspace"
    chmod 1777 "$root/tmp"
    # What update-ca-certificates (ca-certificates' postinst, not run here) makes: Mozilla's roots, one file.
    cat "$root"/usr/share/ca-certificates/mozilla/*.crt >"$root/etc/ssl/certs/ca-certificates.crt"
    chmod 0644 "$root/etc/ssl/certs/ca-certificates.crt"
    printf 'root:x:0:0:root:/root:/sbin/nologin\nliqo:x:1000:1000:liqo:/workspace:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' \
        >"$root/etc/passwd"
    printf 'root:x:0:\nliqo:x:1000:\nnogroup:x:65534:\n' >"$root/etc/group"
    chmod 0644 "$root/etc/passwd" "$root/etc/group"
    rm -rf "$root"/var/lib/apt "$root"/var/cache/apt "$root"/var/lib/dpkg "$root"/var/log/*
    exit 0
fi

kind=$1
out=$2
self=$(realpath "$0")
mirror=(
    "deb http://deb.debian.org/debian bookworm main"
    "deb http://deb.debian.org/debian bookworm-updates main"
    "deb http://deb.debian.org/debian-security bookworm-security main"
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The packages (and their dependencies) unpacked into $tmp/root, completed by `customize` (mmdebstrap runs
# no hooks for the extract variant).
extract() {
    # merged /usr, as in every bookworm root (/bin -> usr/bin...), which the extract variant skips otherwise.
    mmdebstrap --quiet --variant=extract --format=directory --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --include="ca-certificates,$1" bookworm "$tmp/root" "${mirror[@]}"
    "$self" customize "$tmp/root"
}
pack() {
    tar --create --file "$out" --directory "$1" --owner=0 --group=0 --numeric-owner --sort=name .
}

case $kind in
    net)
        extract iproute2,nftables,bash,wireguard-tools,tcpdump,conntrack,curl,iputils-ping
        pack "$tmp/root"
        ;;
    openssl)
        extract openssl
        pack "$tmp/root"
        ;;
    static)
        # Of the unpacked root, only what `customize` made is kept.
        extract ca-certificates
        mkdir "$tmp/static"
        (cd "$tmp/root" && cp -a --parents etc/ssl/certs/ca-certificates.crt etc/passwd etc/group tmp workspace \
            "$tmp/static/")
        pack "$tmp/static"
        ;;
    *)
        echo "usage: $0 static|net|openssl OUT.tar" >&2
        exit 2
        ;;
esac

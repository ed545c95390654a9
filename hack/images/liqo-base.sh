#!/usr/bin/env bash
# The local bases of Liqo's images (hack/build-liqo-images.sh), in place of Liqo's alpine one
# (build/liqo/Dockerfile), assembled from Debian bookworm's packages with mmdebstrap:
#   static   the static Go binaries' base: Debian's CA bundle, /etc/passwd and /etc/group (root,
#            nobody, and uid/gid 1000, which the chart's Pods run as), /tmp, /workspace. Nothing else:
#            no shell, no libc.
#   net      the gateway's containers (gateway, wireguard, geneve): what Liqo's Dockerfile adds for
#            them (iproute2 nftables bash wireguard-tools tcpdump conntrack-tools curl iputils),
#            from Debian's packages.
#   openssl  the metric agent's init container (Liqo's build/cert-creator: alpine + openssl).
#   hack/images/liqo-base.sh KIND OUT.tar     (an uncompressed tar of the root filesystem)
# hack/build-liqo-images.sh keys the cached bases by this file's hash: edit it and they are rebuilt.
set -euo pipefail

kind=$1
out=$2
mirror=(
    "deb http://deb.debian.org/debian bookworm main"
    "deb http://deb.debian.org/debian bookworm-updates main"
    "deb http://deb.debian.org/debian-security bookworm-security main"
)
slim=(
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
    --dpkgopt='path-exclude=/usr/share/locale/*'
)

# /workspace: the working directory of Liqo's images. apt's lists and caches are left out of the images.
common_hook='mkdir -p "$1/workspace"; rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*'

case $kind in
    net)
        mmdebstrap --quiet --variant=minbase --format=tar "${slim[@]}" \
            --include=ca-certificates,iproute2,nftables,bash,wireguard-tools,tcpdump,conntrack,curl,iputils-ping \
            --customize-hook="$common_hook" bookworm "$out" "${mirror[@]}"
        ;;
    openssl)
        mmdebstrap --quiet --variant=minbase --format=tar "${slim[@]}" --include=openssl \
            --customize-hook="$common_hook" bookworm "$out" "${mirror[@]}"
        ;;
    static)
        # Debian's ca-certificates builds the bundle in a throwaway root; only the bundle is kept.
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
        mmdebstrap --quiet --variant=minbase "${slim[@]}" --include=ca-certificates \
            --customize-hook="cp \"\$1/etc/ssl/certs/ca-certificates.crt\" '$tmp/ca-certificates.crt'" \
            bookworm /dev/null "${mirror[@]}"
        root=$tmp/root
        mkdir -p "$root/etc/ssl/certs" "$root/tmp" "$root/workspace"
        chmod 1777 "$root/tmp"
        install -m 0644 "$tmp/ca-certificates.crt" "$root/etc/ssl/certs/ca-certificates.crt"
        printf 'root:x:0:0:root:/root:/sbin/nologin\nliqo:x:1000:1000:liqo:/workspace:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' \
            >"$root/etc/passwd"
        printf 'root:x:0:\nliqo:x:1000:\nnogroup:x:65534:\n' >"$root/etc/group"
        chmod 0644 "$root/etc/passwd" "$root/etc/group"
        tar --create --file "$out" --directory "$root" --owner=0 --group=0 --numeric-owner --mtime=@0 \
            --sort=name .
        ;;
    *)
        echo "usage: $0 static|net|openssl OUT.tar" >&2
        exit 2
        ;;
esac

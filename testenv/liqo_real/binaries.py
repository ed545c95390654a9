"""Where hack/build-liqo.sh caches Liqo's binaries (tools/liqo-<version>/<binary>, LIQO_VERSION's by default)."""

from __future__ import annotations

import os
from pathlib import Path

from testenv.localk8s.tools import cache_dir, read_versions

# What hack/build-liqo.sh builds from github.com/liqotech/liqo/cmd/<name>.
LIQO_BINARIES = ("liqo-controller-manager", "crd-replicator", "ipam", "virtual-kubelet", "webhook", "liqoctl")


class LiqoBinaryMissingError(FileNotFoundError):
    """A Liqo binary is not in the cache (yet)."""


def liqo_version() -> str:
    return read_versions()["LIQO_VERSION"].lstrip("v")


def liqo_binary(name: str, version: str | None = None) -> Path:
    """Cached path of a Liqo binary; raises LiqoBinaryMissingError (with the fix) when not built."""
    if name not in LIQO_BINARIES:
        raise ValueError(f"unknown Liqo binary {name!r}; known: {', '.join(LIQO_BINARIES)}")
    version = version or liqo_version()
    path = cache_dir() / f"liqo-{version}" / name
    if not os.access(path, os.X_OK):
        raise LiqoBinaryMissingError(f"{path} is missing; run LIQO_VERSION={version} hack/build-liqo.sh first")
    return path


def missing_binaries(names: tuple[str, ...] = LIQO_BINARIES) -> list[str]:
    out = []
    for name in names:
        try:
            liqo_binary(name)
        except LiqoBinaryMissingError:
            out.append(name)
    return out

"""Where hack/build-tools.sh caches the binaries, derived from hack/versions.env."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
VERSIONS_FILE = REPO_ROOT / "hack" / "versions.env"

# binary name -> (cache directory prefix, versions.env key); must match hack/tool-path.sh.
TOOLS: dict[str, tuple[str, str]] = {
    "kube-apiserver": ("kubernetes", "KUBERNETES_VERSION"),
    "kube-controller-manager": ("kubernetes", "KUBERNETES_VERSION"),
    "kube-scheduler": ("kubernetes", "KUBERNETES_VERSION"),
    "kubelet": ("kubernetes", "KUBERNETES_VERSION"),
    "kube-proxy": ("kubernetes", "KUBERNETES_VERSION"),
    "kubectl": ("kubernetes", "KUBERNETES_VERSION"),
    "etcd": ("etcd", "ETCD_VERSION"),
    "helm": ("helm", "HELM_VERSION"),
    "coredns": ("coredns", "COREDNS_VERSION"),
    "promtool": ("promtool", "PROMTOOL_VERSION"),
    "prometheus": ("prometheus", "PROMETHEUS_VERSION"),
    "registry": ("registry", "REGISTRY_VERSION"),
    "oras": ("oras", "ORAS_VERSION"),
    "aws-iam-authenticator": ("aws-iam-authenticator", "AWS_IAM_AUTHENTICATOR_VERSION"),
    "cosign": ("cosign", "COSIGN_VERSION"),
    # The GitOps e2e tests' controllers (hack/build-gitops.sh).
    "source-controller": ("source-controller", "FLUX_SOURCE_CONTROLLER_VERSION"),
    "kustomize-controller": ("kustomize-controller", "FLUX_KUSTOMIZE_CONTROLLER_VERSION"),
    "helm-controller": ("helm-controller", "FLUX_HELM_CONTROLLER_VERSION"),
    "argocd": ("argocd", "ARGOCD_VERSION"),
    "argocd-lua-health": ("argocd", "ARGOCD_VERSION"),
    "kustomize": ("kustomize", "KUSTOMIZE_VERSION"),
    # What enforces NetworkPolicies on the nodes (hack/build-netpol.sh, testenv/netpol.py).
    "kube-router": ("kube-router", "KUBE_ROUTER_VERSION"),
}
GITOPS_TOOLS = frozenset(
    {"source-controller", "kustomize-controller", "helm-controller", "argocd", "argocd-lua-health", "kustomize"}
)

_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


class ToolMissingError(FileNotFoundError):
    """A tool binary is not in the cache (yet)."""


_DEFAULT = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*):-([^}]*)\}$")


def parse_versions(text: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Parse the KEY=VALUE lines of a shell env file (comments, blanks and quotes allowed).

    `KEY=${KEY:-default}` takes KEY from `environ` (os.environ by default) when set there and not empty, as
    the shell does (LIQO_VERSION=1.1.2 make demo)."""
    environ = os.environ if environ is None else environ
    versions: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            raise ValueError(f"cannot parse versions line: {raw!r}")
        value = m.group(2).split(" #", 1)[0].strip().strip("'\"")
        default = _DEFAULT.match(value)
        if default:
            value = environ.get(default.group(1)) or default.group(2)
        versions[m.group(1)] = value
    return versions


def read_versions(path: Path = VERSIONS_FILE, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    return parse_versions(path.read_text(), environ)


def cache_root() -> Path:
    """${LPO_CACHE_DIR:-~/.cache/liqo-peering-operator}: tools/ and images/ live under it."""
    env = os.environ.get("LPO_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "liqo-peering-operator"


def cache_dir() -> Path:
    return cache_root() / "tools"


def kubernetes_versions(kubernetes_version: str | None = None) -> dict[str, str]:
    """hack/versions.env, with the Kubernetes components' version replaced by `kubernetes_version` (one of
    KUBERNETES_VERSION and KUBERNETES_FLOOR_VERSION: hack/build-tools.sh builds no other)."""
    versions = read_versions()
    if kubernetes_version is None:
        return versions
    built = {versions["KUBERNETES_VERSION"], versions["KUBERNETES_FLOOR_VERSION"]}
    if kubernetes_version not in built:
        raise ValueError(f"Kubernetes {kubernetes_version} is not built; hack/versions.env pins {sorted(built)}")
    return {**versions, "KUBERNETES_VERSION": kubernetes_version}


def tool_path(name: str, versions: dict[str, str] | None = None) -> Path:
    """Path of a cached binary; raises ToolMissingError (with the fix) if it was not built."""
    if name not in TOOLS:
        raise ValueError(f"unknown tool {name!r}; known: {', '.join(sorted(TOOLS))}")
    prefix, key = TOOLS[name]
    versions = versions if versions is not None else read_versions()
    path = cache_dir() / f"{prefix}-{versions[key]}" / name
    if not os.access(path, os.X_OK):
        build = (
            "hack/build-gitops.sh"
            if name in GITOPS_TOOLS
            else "hack/build-netpol.sh"
            if name == "kube-router"
            else "'make tools' (hack/build-tools.sh)"
        )
        raise ToolMissingError(f"{path} is missing; run {build} first")
    return path

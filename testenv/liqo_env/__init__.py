"""Liqo's non-workload objects on a local cluster, rendered from Liqo's own Helm chart.

`install_liqo()` renders the chart of the Liqo version chosen (LIQO_VERSION: the environment's, else
hack/versions.env's), read from the
Go module cache) with `helm template` and applies what a peering reads without running any Liqo pod:

- the CRDs (waited until Established);
- the cluster-ID ConfigMap (`liqo-clusterid-configmap`, key CLUSTER_ID), ServiceAccounts, ClusterRoles,
  Roles and their bindings (inert without pods, but `liqo-remote-controlplane` is what a tenant is bound
  to);
- the gateway templates `WgGatewayServerTemplate/wireguard-server` and
  `WgGatewayClientTemplate/wireguard-client`;
- the `ipam.liqo.io` Networks (pod, service, external, internal CIDR), with `status.cidr` = `spec.cidr` set
  through the status subresource, as Liqo's IPAM does when it does not remap;
- Secret `<ns>/authentication-keys` with an Ed25519 key pair (`privateKey`: PKCS#8 PEM, `publicKey`: PKIX
  PEM), as Liqo's controller manager creates it at start-up.

Skipped on purpose: Deployments, DaemonSets, Jobs, CronJobs, Services, webhook configurations, APIServices
(the metric agent's would break discovery), StorageClass, RuntimeClass, OpenShift SCCs,
FirewallConfigurations. `uninstall_liqo()` removes it all again (the "Liqo missing" fault).

"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from testenv import kube as k
from testenv.kube import Kube, Obj

if TYPE_CHECKING:
    from testenv.localk8s import LocalCluster

REPO_ROOT = Path(__file__).resolve().parents[2]
MANAGER = "liqo-env"
AUTH_KEYS_SECRET = "authentication-keys"  # pkg/consts/authentication.go AuthKeysSecretName

# Kinds taken from the rendered chart; anything else (workloads, webhooks, ...) is dropped.
KEEP_KINDS = {
    "ConfigMap",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "WgGatewayServerTemplate",
    "WgGatewayClientTemplate",
    "Network",
    "VkOptionsTemplate",
}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "Namespace"}


@dataclass(frozen=True)
class LiqoInstall:
    """What install_liqo() set up on one cluster."""

    cluster_id: str
    namespace: str
    pod_cidr: str
    external_cidr: str
    service_cidr: str


def liqo_version() -> str:
    """LIQO_VERSION, the environment's else hack/versions.env's (without a leading v)."""
    from testenv.localk8s.tools import read_versions

    return read_versions()["LIQO_VERSION"].lstrip("v")


def liqo_matrix() -> list[str]:
    """LIQO_MATRIX from hack/versions.env: the other Liqo versions `make test` runs a smoke set on."""
    from testenv.localk8s.tools import read_versions

    return [v.lstrip("v") for v in read_versions()["LIQO_MATRIX"].split()]


def upgraded_from(matrix: list[str], target: str) -> list[str]:
    """The versions of `matrix` that the matrix tests upgrade to `target` under a live peering: those one minor
    below it (Liqo is upgraded one minor version at a time)."""
    major, minor = (int(x) for x in target.split(".")[:2])
    return [v for v in matrix if tuple(int(x) for x in v.split(".")[:2]) == (major, minor - 1)]


def module_dir(version: str | None = None) -> Path:
    """Liqo's Go module in the module cache, downloaded through the Go module proxy when absent."""
    mod = f"github.com/liqotech/liqo@v{version or liqo_version()}"
    cache = subprocess.run(["go", "env", "GOMODCACHE"], check=True, capture_output=True, text=True).stdout.strip()
    path = Path(cache) / mod
    if not (path / "deployments" / "liqo").is_dir():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["go", "mod", "init", "liqoenv"], cwd=tmp, check=True, capture_output=True)
            out = subprocess.run(
                ["go", "mod", "download", "-json", mod], cwd=tmp, check=True, capture_output=True, text=True
            ).stdout
            path = Path(json.loads(out)["Dir"])
    return path


def chart_dir(version: str | None = None) -> Path:
    """Liqo's Helm chart (deployments/liqo) of a version (LIQO_VERSION by default)."""
    return module_dir(version) / "deployments" / "liqo"


def helm_binary() -> Path:
    """helm from the tools cache (localk8s.tool_path), or $HELM / PATH for local experiments."""
    if os.environ.get("HELM"):
        return Path(os.environ["HELM"])
    try:
        from testenv.localk8s import tool_path
    except ImportError:  # without the harness: helm from PATH
        return Path("helm")
    return Path(tool_path("helm"))  # ToolMissingError says to run `make tools`


def render_chart(
    cluster_id: str, pod_cidr: str, external_cidr: str, service_cidr: str, namespace: str = "liqo"
) -> list[Obj]:
    """`helm template` Liqo's chart; returns every rendered object, CRDs included."""
    values = [
        f"tag=v{liqo_version()}",
        f"discovery.config.clusterID={cluster_id}",
        f"ipam.podCIDR={pod_cidr}",
        f"ipam.serviceCIDR={service_cidr}",
        f"ipam.externalCIDR={external_cidr}",
        "telemetry.enabled=false",
    ]
    cmd = [
        str(helm_binary()),
        "template",
        "liqo",
        str(chart_dir()),
        "--namespace",
        namespace,
        "--include-crds",
    ]
    for v in values:
        cmd += ["--set", v]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if isinstance(d, dict) and d.get("kind")]


def res_for(obj: Obj, plurals: dict[tuple[str, str], str]) -> k.Res:
    """Where to apply a rendered object: Liqo kinds' plurals come from the chart's CRDs."""
    group, _, version = obj["apiVersion"].rpartition("/")
    kind = obj["kind"]
    plural = plurals.get((group, kind)) or kind.lower() + "s"
    return k.Res(group, version, plural, namespaced=kind not in CLUSTER_SCOPED)


def apply_rendered(
    kc: Kube, obj: Obj, plurals: dict[tuple[str, str], str], namespace: str, manager: str
) -> tuple[k.Res, str | None]:
    """Server-side apply one rendered chart object, namespaced ones into `namespace`; where it went."""
    res = res_for(obj, plurals)
    ns = namespace if res.namespaced else None
    if ns:
        obj.setdefault("metadata", {})["namespace"] = ns
    kc.apply(res, obj, manager, namespace=ns)
    return res, ns


def _wait(what: str, cond: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.3)


def install_liqo(
    cluster: LocalCluster | Kube,
    cluster_id: str,
    pod_cidr: str,
    external_cidr: str,
    namespace: str = "liqo",
    service_cidr: str | None = None,
    rendered: list[Obj] | None = None,
) -> LiqoInstall:
    """Install Liqo's CRDs and non-workload objects; idempotent (server-side apply).

    `rendered`: render_chart's output for these same values, for callers installing many clusters (helm
    takes seconds per rendering); it is modified."""
    kc = cluster if isinstance(cluster, Kube) else Kube(cluster.api_client())
    service_cidr = service_cidr or getattr(cluster, "service_cidr", None) or "10.96.0.0/16"
    docs = (
        rendered if rendered is not None else render_chart(cluster_id, pod_cidr, external_cidr, service_cidr, namespace)
    )

    plurals = apply_crds(kc, docs, namespace)
    for obj in docs:
        if obj["kind"] not in KEEP_KINDS:
            continue
        res, ns = apply_rendered(kc, obj, plurals, namespace, MANAGER)
        if obj["kind"] == "Network":
            # No IPAM pod: the CIDR is used as is (what Liqo's IPAM does for a not-remapped network).
            status = {"cidr": obj["spec"]["cidr"]}
            kc.patch(res, obj["metadata"]["name"], {"status": status}, namespace=ns, sub="status")

    ensure_authentication_keys(kc, namespace)
    return LiqoInstall(cluster_id, namespace, pod_cidr, external_cidr, service_cidr)


def apply_crds(kc: Kube, docs: list[Obj], namespace: str) -> dict[tuple[str, str], str]:
    """Create Liqo's namespace and apply the rendered chart's CRDs, waiting until each is Established.

    Returns (group, kind) -> plural for the Liqo kinds, read from the CRDs themselves (see res_for).
    """
    kc.apply(k.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, MANAGER)
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    for crd in crds:
        kc.apply(k.CRD, crd, MANAGER)
    for crd in crds:
        name = crd["metadata"]["name"]
        _wait(f"CRD {name} Established", lambda name=name: _crd_established(kc, name))
    return {(c["spec"]["group"], c["spec"]["names"]["kind"]): c["spec"]["names"]["plural"] for c in crds}


def _crd_established(kc: Kube, name: str) -> bool:
    crd = kc.get(k.CRD, name)
    conds = (crd or {}).get("status", {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conds)


def ensure_authentication_keys(kc: Kube, namespace: str = "liqo") -> None:
    """Secret authentication-keys, an Ed25519 pair in PEM (keys.go GenerateEd25519Keys); kept if present."""
    if kc.get(k.SECRET, AUTH_KEYS_SECRET, namespace):
        return
    priv = ed25519.Ed25519PrivateKey.generate()
    priv_pem = priv.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pub_pem = priv.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": AUTH_KEYS_SECRET, "namespace": namespace},
        "data": {"privateKey": k.b64(priv_pem), "publicKey": k.b64(pub_pem)},
    }
    try:
        kc.create(k.SECRET, body, namespace)
    except k.KubeError as e:
        if e.status != 409:  # created meanwhile: keep the existing pair
            raise


def uninstall_liqo(cluster: LocalCluster | Kube, namespace: str = "liqo", timeout: float = 90) -> None:
    """Remove what install_liqo() created: Liqo's CRDs (and so every Liqo object), RBAC, the namespace."""
    kc = cluster if isinstance(cluster, Kube) else Kube(cluster.api_client())
    crds = [c["metadata"]["name"] for c in kc.list(k.CRD) if c["spec"]["group"].endswith(".liqo.io")]
    # Finalizers on Liqo objects would block the CRD deletion; no Liqo controller is left to clear them.
    for name in crds:
        crd = kc.get(k.CRD, name)
        if not crd:
            continue
        group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
        version = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
        res = k.Res(group, version, plural, namespaced=crd["spec"]["scope"] == "Namespaced")
        for obj in kc.list(res):
            if obj["metadata"].get("finalizers"):
                md = obj["metadata"]
                kc.patch(res, md["name"], {"metadata": {"finalizers": None}}, namespace=md.get("namespace"))
        kc.delete(k.CRD, name)
    for kind_res in (k.CLUSTERROLE, k.Res("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False)):
        for obj in kc.list(kind_res, selector="app.kubernetes.io/part-of=liqo"):
            kc.delete(kind_res, obj["metadata"]["name"])
    kc.delete(k.NAMESPACE, namespace)
    _wait("Liqo CRDs gone", lambda: not any(kc.get(k.CRD, n) for n in crds), timeout)
    # A reinstall cannot write into a namespace that is still terminating.
    _wait(f"namespace {namespace} gone", lambda: kc.get(k.NAMESPACE, namespace) is None, timeout)


def read_cluster_id(kc: Kube, namespace: str = "liqo") -> str | None:
    """The cluster ID from the ConfigMap labelled app.kubernetes.io/name=clusterid-configmap."""
    cms = kc.list(k.CONFIGMAP, namespace, "app.kubernetes.io/name=clusterid-configmap")
    return cms[0].get("data", {}).get("CLUSTER_ID") if cms else None

"""Prometheus (built from its Go module with Kubernetes service discovery, hack/build-tools.sh) run against
a local cluster, configured from the chart's ServiceMonitor and PrometheusRule as the Prometheus Operator
would configure it.

`scrape_configs` translates a ServiceMonitor into a scrape config as the Prometheus Operator generates it:
`kubernetes_sd_configs` with role endpoints (the operator's default, still in its v0.93; role
endpointslice only when the Prometheus or the ServiceMonitor asks for it through serviceDiscoveryRole) in
the ServiceMonitor's namespaces, and its relabelling: keep the endpoints whose Service carries every label of
`spec.selector.matchLabels` and whose port has the endpoint's name; job from the Service's name; namespace,
service, pod, container and endpoint target labels. So the operator's Pod is found through the
ServiceMonitor's selectors, never named. `rule_file` takes a PrometheusRule's groups as they are.

Prometheus reads the API server with a kubeconfig of its own, as a user that `grant_discovery` gives what
the Prometheus Operator's documentation gives Prometheus's ServiceAccount: get, list and watch on
Services, Endpoints and Pods, here in the watched namespaces only.

`Prometheus` runs the binary in a node's network namespace (testenv.localk8s), where it reaches Pod
addresses (the node's bridge) and the API server on the host's LAN address, as the node's kubelet does, and
the host reaches it at the node's address.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from testenv import kube as k
from testenv.kube import Kube
from testenv.localk8s import tool_path
from testenv.localk8s.network import in_netns
from testenv.wait import answers_ok, wait_for

PORT = 9090  # Prometheus's own; nothing else listens on it in a node's namespace
DISCOVERY_ROLE = "endpoints"
# What kubernetes_sd's role endpoints reads: of the rights the Prometheus Operator's RBAC documentation
# gives Prometheus, those it uses here.
DISCOVERY_RULES = [
    {"apiGroups": [""], "resources": ["services", "endpoints", "pods"], "verbs": ["get", "list", "watch"]}
]


def _label(name: str) -> str:
    """A Kubernetes label name as a discovery meta label's suffix (what Prometheus does to it)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def namespaces(service_monitor: dict[str, Any]) -> list[str]:
    """Where the ServiceMonitor selects Services: its namespaceSelector's names, else its own namespace."""
    names: list[str] = (service_monitor["spec"].get("namespaceSelector") or {}).get("matchNames") or []
    return names or [service_monitor["metadata"]["namespace"]]


def scrape_configs(service_monitor: dict[str, Any], kubeconfig: Path) -> list[dict[str, Any]]:
    """One scrape config per endpoint of the ServiceMonitor, as the Prometheus Operator generates it (role
    endpoints), its targets discovered in the ServiceMonitor's namespaces through the API server of
    `kubeconfig`. matchExpressions are not translated: the chart's ServiceMonitor has none, so one there
    fails here rather than scraping more than it selects."""
    meta, spec = service_monitor["metadata"], service_monitor["spec"]
    selector = spec["selector"]
    if set(selector) - {"matchLabels"}:
        raise ValueError(f"only matchLabels selectors are translated: {selector}")
    selecting = [
        {
            "action": "keep",
            "source_labels": [
                f"__meta_kubernetes_service_label_{_label(key)}",
                f"__meta_kubernetes_service_labelpresent_{_label(key)}",
            ],
            "regex": f"({re.escape(value)});true",
        }
        for key, value in sorted(selector["matchLabels"].items())
    ]
    configs = []
    for index, endpoint in enumerate(spec["endpoints"]):
        relabel = [
            *selecting,
            {"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"], "regex": endpoint["port"]},
            *(
                {
                    "source_labels": [
                        "__meta_kubernetes_endpoint_address_target_kind",
                        "__meta_kubernetes_endpoint_address_target_name",
                    ],
                    "separator": ";",
                    "regex": f"{kind};(.*)",
                    "replacement": "${1}",
                    "target_label": kind.lower(),
                }
                for kind in ("Node", "Pod")
            ),
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"},
            {"target_label": "endpoint", "replacement": endpoint["port"]},
        ]
        config: dict[str, Any] = {
            "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/{index}",
            "honor_labels": bool(endpoint.get("honorLabels", False)),
            "metrics_path": endpoint.get("path", "/metrics"),
            "kubernetes_sd_configs": [
                {
                    "role": DISCOVERY_ROLE,
                    "kubeconfig_file": str(kubeconfig),
                    "namespaces": {"names": namespaces(service_monitor)},
                }
            ],
            "relabel_configs": relabel,
        }
        for key, field in (("scrape_interval", "interval"), ("scrape_timeout", "scrapeTimeout")):
            if endpoint.get(field):
                config[key] = endpoint[field]
        configs.append(config)
    return configs


def grant_discovery(kube: Kube, user: str, watched: Iterable[str]) -> None:
    """Let `user` discover targets in the `watched` namespaces: a ClusterRole of DISCOVERY_RULES, bound in
    each of them."""
    kube.apply(k.CLUSTERROLE, _discovery_role(user), "testenv")
    for namespace in watched:
        kube.apply(k.ROLEBINDING, _discovery_binding(user, namespace), "testenv", namespace)


def revoke_discovery(kube: Kube, user: str, watched: Iterable[str]) -> None:
    for namespace in watched:
        kube.delete(k.ROLEBINDING, _discovery_role_name(user), namespace)
    kube.delete(k.CLUSTERROLE, _discovery_role_name(user))


def _discovery_role_name(user: str) -> str:
    return f"{user}-discovery"


def _discovery_role(user: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": _discovery_role_name(user)},
        "rules": DISCOVERY_RULES,
    }


def _discovery_binding(user: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": _discovery_role_name(user), "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": _discovery_role_name(user)},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }


def rule_file(prometheus_rule: dict[str, Any]) -> dict[str, Any]:
    """A PrometheusRule's groups as a Prometheus rule file."""
    return {"groups": prometheus_rule["spec"]["groups"]}


def config(scrapes: list[dict[str, Any]], rule_files: list[str], interval: str) -> dict[str, Any]:
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": rule_files,
        "scrape_configs": scrapes,
    }


class Prometheus:
    """The prometheus binary inside the network namespace `netns` (None: the host's), listening on
    `host`:`port`, its config, rules and data in `workdir`."""

    def __init__(self, netns: Path | None, host: str, workdir: Path, port: int = PORT) -> None:
        self.netns = netns
        self.url = f"http://{host}:{port}"
        self.host = host
        self.port = port
        self.workdir = workdir
        self.log_path = workdir / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, scrapes: list[dict[str, Any]], rules: list[dict[str, Any]], interval: str) -> Prometheus:
        rule_paths = []
        for index, rules_file in enumerate(rules):
            path = self.workdir / f"rules-{index}.yaml"
            path.write_text(yaml.safe_dump(rules_file, sort_keys=False))
            rule_paths.append(str(path))
        (self.workdir / "prometheus.yaml").write_text(yaml.safe_dump(config(scrapes, rule_paths, interval)))
        argv = [
            str(tool_path("prometheus")),
            f"--config.file={self.workdir / 'prometheus.yaml'}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address={self.host}:{self.port}",
            "--log.level=info",
        ]
        with self.log_path.open("wb") as log:
            # nsenter execs prometheus: the Popen's pid is Prometheus's own.
            self.proc = subprocess.Popen(
                argv if self.netns is None else in_netns(self.netns, argv), stdout=log, stderr=subprocess.STDOUT
            )
        wait_for("Prometheus to be ready (/-/ready)", self._ready, timeout=60)
        return self

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited {self.proc.returncode}:\n{self.log()}")
        return answers_ok(f"{self.url}/-/ready")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>: its `data`, or AssertionError with Prometheus's error."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as exc:
            body = json.load(exc)
        if body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=expr)["result"]
        return result

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api(
            "query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=f"{step:g}"
        )["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return alerts

    def active_targets(self) -> list[dict[str, Any]]:
        targets: list[dict[str, Any]] = self.api("targets", state="active")["activeTargets"]
        return targets

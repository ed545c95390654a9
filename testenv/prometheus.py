"""Prometheus (the binary of Debian's prometheus package, hack/build-tools.sh) run against a local cluster,
configured from the chart's ServiceMonitor and PrometheusRule as the Prometheus Operator would configure it.

`scrape_configs` translates a ServiceMonitor into a scrape config with the relabelling the Prometheus
Operator generates for it (role endpoints): keep the endpoints whose Service carries every label of
`spec.selector.matchLabels` and whose port has the endpoint's name; job from the Service's name;
namespace, service, pod, container and endpoint target labels. So the operator's Pod is found through the
ServiceMonitor's selectors, never named. `rule_file` takes a PrometheusRule's groups as they are.

Debian builds Prometheus without its Kubernetes service discovery (`kubernetes_sd_configs` is not a field
of its scrape config), so `EndpointsDiscovery` stands in for it: an HTTP service discovery endpoint
(`http_sd_configs`) that lists the Endpoints, Services and Pods of the ServiceMonitor's namespaces from the
API server at each refresh and gives every address and port the `__meta_kubernetes_*` labels that
`kubernetes_sd_configs` with role endpoints gives it (`endpoints_targets`). The selection itself is
Prometheus's, by the relabelling above.

`Prometheus` runs the binary in a node's network namespace (testenv.localk8s), where it reaches Pod
addresses (the node's bridge) and the discovery endpoint on the host's LAN address, and the host reaches
it at the node's address.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from testenv import kube as k
from testenv.kube import Kube, Obj
from testenv.localk8s import tool_path
from testenv.localk8s.network import in_netns
from testenv.wait import wait_for

PORT = 9090  # Prometheus's own; nothing else listens on it in a node's namespace
ENDPOINTS = k.Res("", "v1", "endpoints")  # what kubernetes_sd's role endpoints reads
REFRESH = "1s"  # how often Prometheus asks the discovery endpoint


def _label(name: str) -> str:
    """A Kubernetes label name as a discovery meta label's suffix (what Prometheus does to it)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def scrape_configs(service_monitor: dict[str, Any], discovery: str) -> list[dict[str, Any]]:
    """One scrape config per endpoint of the ServiceMonitor, as the Prometheus Operator generates it (role
    endpoints), its targets from the endpoints discovery at URL `discovery` (EndpointsDiscovery) in the
    ServiceMonitor's namespaces. matchExpressions are not translated: the chart's ServiceMonitor has none,
    so one there fails here rather than scraping more than it selects."""
    meta, spec = service_monitor["metadata"], service_monitor["spec"]
    selector = spec["selector"]
    if set(selector) - {"matchLabels"}:
        raise ValueError(f"only matchLabels selectors are translated: {selector}")
    namespaces = (spec.get("namespaceSelector") or {}).get("matchNames") or [meta["namespace"]]
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
            "http_sd_configs": [
                {
                    "url": f"{discovery}?{urllib.parse.urlencode({'namespaces': ','.join(namespaces)})}",
                    "refresh_interval": REFRESH,
                }
            ],
            "relabel_configs": relabel,
        }
        for key, field in (("scrape_interval", "interval"), ("scrape_timeout", "scrapeTimeout")):
            if endpoint.get(field):
                config[key] = endpoint[field]
        configs.append(config)
    return configs


def _labels(prefix: str, labels: dict[str, str] | None) -> dict[str, str]:
    """An object's labels as kubernetes_sd gives them: <prefix>_label_<name> and <prefix>_labelpresent_<name>."""
    out = {}
    for name, value in (labels or {}).items():
        out[f"{prefix}_label_{_label(name)}"] = value
        out[f"{prefix}_labelpresent_{_label(name)}"] = "true"
    return out


def endpoints_targets(endpoints: Obj, service: Obj | None, pods: dict[str, Obj]) -> list[dict[str, Any]]:
    """The target groups kubernetes_sd_configs (role endpoints) makes of one Endpoints object: one per address
    and port, ready or not, with the labels of the Endpoints, of its Service and of the Pod behind the address
    (`pods` by name), and the Pod's container whose port it is."""
    meta = endpoints["metadata"]
    common = {
        "__meta_kubernetes_namespace": meta["namespace"],
        "__meta_kubernetes_endpoints_name": meta["name"],
        **_labels("__meta_kubernetes_endpoints", meta.get("labels")),
    }
    if service is not None:
        common["__meta_kubernetes_service_name"] = service["metadata"]["name"]
        common.update(_labels("__meta_kubernetes_service", service["metadata"].get("labels")))
    groups = []
    for subset in endpoints.get("subsets") or []:
        for ready, addresses in (("true", subset.get("addresses")), ("false", subset.get("notReadyAddresses"))):
            for address in addresses or []:
                for port in subset.get("ports") or []:
                    labels = {
                        **common,
                        "__meta_kubernetes_endpoint_port_name": port.get("name", ""),
                        "__meta_kubernetes_endpoint_port_protocol": port.get("protocol", "TCP"),
                        "__meta_kubernetes_endpoint_ready": ready,
                    }
                    if address.get("nodeName"):
                        labels["__meta_kubernetes_endpoint_node_name"] = address["nodeName"]
                    target = address.get("targetRef") or {}
                    if target:
                        labels["__meta_kubernetes_endpoint_address_target_kind"] = target.get("kind", "")
                        labels["__meta_kubernetes_endpoint_address_target_name"] = target.get("name", "")
                    pod = pods.get(target.get("name", "")) if target.get("kind") == "Pod" else None
                    if pod is not None:
                        labels.update(_pod_labels(pod, port["port"]))
                    groups.append({"targets": [f"{address['ip']}:{port['port']}"], "labels": labels})
    return groups


def _pod_labels(pod: Obj, port: int) -> dict[str, str]:
    labels = {
        "__meta_kubernetes_pod_name": pod["metadata"]["name"],
        "__meta_kubernetes_pod_ip": (pod.get("status") or {}).get("podIP", ""),
        "__meta_kubernetes_pod_node_name": pod["spec"].get("nodeName", ""),
        **_labels("__meta_kubernetes_pod", pod["metadata"].get("labels")),
    }
    for container in pod["spec"]["containers"]:
        for container_port in container.get("ports") or []:
            if container_port["containerPort"] == port:
                labels["__meta_kubernetes_pod_container_name"] = container["name"]
                labels["__meta_kubernetes_pod_container_port_name"] = container_port.get("name", "")
                labels["__meta_kubernetes_pod_container_port_number"] = str(port)
    return labels


class EndpointsDiscovery:
    """The stand-in for kubernetes_sd_configs (role endpoints): an HTTP service discovery endpoint on
    `host`, answering `?namespaces=a,b` with endpoints_targets of every Endpoints there, read from the API
    server at each request."""

    def __init__(self, kube: Kube, host: str) -> None:
        discovery = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                namespaces = [n for n in ",".join(query.get("namespaces", [])).split(",") if n]
                body = json.dumps(discovery.groups(namespaces)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.kube = kube
        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}/endpoints"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def groups(self, namespaces: list[str]) -> list[dict[str, Any]]:
        groups = []
        for namespace in namespaces:
            services = {s["metadata"]["name"]: s for s in self.kube.list(k.SERVICE, namespace)}
            pods = {p["metadata"]["name"]: p for p in self.kube.list(k.POD, namespace)}
            for endpoints in self.kube.list(ENDPOINTS, namespace):
                groups += endpoints_targets(endpoints, services.get(endpoints["metadata"]["name"]), pods)
        return groups

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
            self.server.server_close()


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
    """The prometheus binary inside the network namespace `netns`, listening on `host`:PORT, its config,
    rules and data in `workdir`."""

    def __init__(self, netns: Path, host: str, workdir: Path) -> None:
        self.netns = netns
        self.url = f"http://{host}:{PORT}"
        self.host = host
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
            f"--web.listen-address={self.host}:{PORT}",
            "--log.level=info",
        ]
        with self.log_path.open("wb") as log:
            # nsenter execs prometheus: the Popen's pid is Prometheus's own.
            self.proc = subprocess.Popen(in_netns(self.netns, argv), stdout=log, stderr=subprocess.STDOUT)
        wait_for("Prometheus to be ready (/-/ready)", self._ready, timeout=60)
        return self

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited {self.proc.returncode}:\n{self.log()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

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

"""The harness's one raw REST client: a tiny dict-in/dict-out layer over the kubernetes client's ApiClient.

Why not the typed APIs: they return models (not dicts), default to JSON-patch for built-in kinds and need
discovery (DynamicClient) whose cache goes stale when the Liqo CRDs are removed and re-added by a test.
Plain paths and JSON keep the stand-in and the environment code short and predictable.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from kubernetes import client, config

Obj = dict[str, Any]

log = logging.getLogger("testenv.kube")

MERGE = "application/merge-patch+json"
APPLY = "application/apply-patch+yaml"


class KubeError(Exception):
    """A non-2xx answer from the API server."""

    def __init__(self, status: int, body: bytes | str, what: str) -> None:
        self.status = status
        self.body = body.decode(errors="replace") if isinstance(body, bytes) else body
        super().__init__(f"{what}: HTTP {status}: {self.body[:300]}")


@dataclass(frozen=True)
class Res:
    """Where a kind lives: group ('' for core), version, plural, namespaced."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name)}"
        if sub:
            base += f"/{sub}"
        return base


# Core kinds used here.
NAMESPACE = Res("", "v1", "namespaces", namespaced=False)
SECRET = Res("", "v1", "secrets")
CONFIGMAP = Res("", "v1", "configmaps")
NODE = Res("", "v1", "nodes", namespaced=False)
POD = Res("", "v1", "pods")
DEPLOYMENT = Res("apps", "v1", "deployments")
CSR = Res("certificates.k8s.io", "v1", "certificatesigningrequests", namespaced=False)
ROLEBINDING = Res("rbac.authorization.k8s.io", "v1", "rolebindings")
CLUSTERROLE = Res("rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False)
CLUSTERROLEBINDING = Res("rbac.authorization.k8s.io", "v1", "clusterrolebindings", namespaced=False)
SERVICE = Res("", "v1", "services")
ENDPOINTSLICE = Res("discovery.k8s.io", "v1", "endpointslices")
CRD = Res("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False)

# Liqo kinds (v1.2.0).
FOREIGNCLUSTER = Res("core.liqo.io", "v1beta1", "foreignclusters", namespaced=False)
CONFIGURATION = Res("networking.liqo.io", "v1beta1", "configurations")
GATEWAYSERVER = Res("networking.liqo.io", "v1beta1", "gatewayservers")
GATEWAYCLIENT = Res("networking.liqo.io", "v1beta1", "gatewayclients")
PUBLICKEY = Res("networking.liqo.io", "v1beta1", "publickeies")
CONNECTION = Res("networking.liqo.io", "v1beta1", "connections")
TENANT = Res("authentication.liqo.io", "v1beta1", "tenants")
IDENTITY = Res("authentication.liqo.io", "v1beta1", "identities")
RESOURCESLICE = Res("authentication.liqo.io", "v1beta1", "resourceslices")
RENEW = Res("authentication.liqo.io", "v1beta1", "renews")
VIRTUALNODE = Res("offloading.liqo.io", "v1beta1", "virtualnodes")
NETWORK = Res("ipam.liqo.io", "v1alpha1", "networks")


class Kube:
    """One cluster, reached through an ApiClient."""

    def __init__(self, api: client.ApiClient, user_agent: str | None = None) -> None:
        self.api = api
        if user_agent:
            # Tells this client's requests apart from the operator's in the audit log (testenv.audit).
            api.user_agent = user_agent

    @classmethod
    def from_kubeconfig(cls, path: str, user_agent: str | None = None) -> Kube:
        return cls(config.new_client_from_config(config_file=path), user_agent)

    @property
    def server(self) -> str:
        return str(self.api.configuration.host)

    @property
    def ca_pem(self) -> bytes:
        """The API server CA as PEM (the kubeconfig's CA data is written to a temp file by the client)."""
        ca_file = self.api.configuration.ssl_ca_cert
        if not ca_file:
            return b""
        with open(ca_file, "rb") as f:
            return f.read()

    def _call(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | tuple[float, float] = 30,
        stream: bool = False,
        text: bool = False,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers["Content-Type"] = "application/json"
        _, url, hdrs, sbody, _ = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        if content_type == APPLY and isinstance(body, dict):
            sbody = json.dumps(body)  # JSON is YAML: server-side apply accepts it as is
        resp = self.api.call_api(method, url, header_params=hdrs, body=sbody, _request_timeout=timeout)
        if stream:
            if not 200 <= resp.status < 300:
                raise KubeError(resp.status, resp.read(), f"{method} {path}")
            return resp.response
        data = resp.read()
        if not 200 <= resp.status < 300:
            raise KubeError(resp.status, data, f"{method} {path}")
        if text:
            return data.decode(errors="replace")
        return json.loads(data) if data else None

    def get_text(self, path: str, timeout: float = 30) -> str:
        """A plain-text endpoint such as /readyz; KubeError unless the answer is 2xx."""
        return self._call("GET", path, timeout=timeout, text=True)  # type: ignore[no-any-return]

    # --- verbs -------------------------------------------------------------------------------------------
    def get(self, res: Res, name: str, namespace: str | None = None) -> Obj | None:
        """The object, or None when it (or its kind) does not exist."""
        try:
            return self._call("GET", res.path(namespace, name))  # type: ignore[no-any-return]
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    def list(self, res: Res, namespace: str | None = None, selector: str | None = None) -> list[Obj]:
        """Items of a kind (all namespaces unless given); [] when the kind is not installed."""
        query = {"labelSelector": selector} if selector else None
        try:
            out = self._call("GET", res.path(namespace), query)
        except KubeError as e:
            if e.status == 404:
                return []
            raise
        items: list[Obj] = out.get("items") or []
        return items

    def create(self, res: Res, body: Obj, namespace: str | None = None, dry_run: bool = False) -> Obj:
        """``dry_run``: admitted (admission webhooks called) and answered, not stored."""
        query = {"dryRun": "All"} if dry_run else None
        return self._call("POST", res.path(namespace), query, body=body)  # type: ignore[no-any-return]

    def replace(self, res: Res, body: Obj, namespace: str | None = None, sub: str | None = None) -> Obj:
        name = body["metadata"]["name"]
        return self._call("PUT", res.path(namespace, name, sub), body=body)  # type: ignore[no-any-return]

    def patch(self, res: Res, name: str, body: Obj, namespace: str | None = None, sub: str | None = None) -> Obj:
        """JSON merge patch (lists are replaced whole)."""
        return self._call(  # type: ignore[no-any-return]
            "PATCH", res.path(namespace, name, sub), body=body, content_type=MERGE
        )

    def apply(self, res: Res, body: Obj, manager: str, namespace: str | None = None, sub: str | None = None) -> Obj:
        """Server-side apply, forcing ownership: idempotent create-or-update."""
        return self._call(  # type: ignore[no-any-return]
            "PATCH",
            res.path(namespace, body["metadata"]["name"], sub),
            query={"fieldManager": manager, "force": "true"},
            body=body,
            content_type=APPLY,
        )

    def delete(self, res: Res, name: str, namespace: str | None = None) -> bool:
        """Delete in the background; False when already gone."""
        try:
            self._call("DELETE", res.path(namespace, name), body={"propagationPolicy": "Background"})
            return True
        except KubeError as e:
            if e.status == 404:
                return False
            raise

    def watch(
        self,
        res: Res,
        selector: str | None = None,
        timeout: int = 30,
        resource_version: str | None = None,
        bookmarks: bool = False,
    ) -> Iterator[Obj]:
        """Raw watch events ({type, object}) for up to `timeout` seconds: from `resource_version`, or without
        one an ADDED event for each object that exists, then the changes. A resource_version too old to resume
        from ends in an ERROR event whose object is a Status with code 410."""
        query: dict[str, Any] = {
            "watch": "true",
            "timeoutSeconds": timeout,
            "allowWatchBookmarks": str(bookmarks).lower(),
        }
        if selector:
            query["labelSelector"] = selector
        if resource_version:
            query["resourceVersion"] = resource_version
        resp = self._call("GET", res.path(), query, timeout=(10, timeout + 10), stream=True)
        try:
            buf = b""
            for chunk in resp.stream(4096, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            resp.release_conn()


def follow(kube: Kube, res: Res, selector: str | None, changed: Callable[[], None], stopped: threading.Event) -> None:
    """Call ``changed()`` for each change of a kind (and for each object that exists when it starts) until
    ``stopped``: a watch that resumes where the last one ended, as an informer's does, so that only a change
    calls it (a watch started afresh sends every existing object again). Bookmarks keep the point to resume
    from recent; one too old to resume from (410), or a failed watch, starts afresh, which is a change too."""
    version: str | None = None
    while not stopped.is_set():
        try:
            for event in kube.watch(res, selector, timeout=300, resource_version=version, bookmarks=True):
                if stopped.is_set():
                    return
                if event.get("type") == "ERROR":
                    version = None
                    break
                version = ((event.get("object") or {}).get("metadata") or {}).get("resourceVersion") or version
                if event.get("type") != "BOOKMARK":
                    changed()
        except Exception as e:  # kind not installed, API server restarting, ...
            log.debug("watch %s: %s", res.plural, e)
            version = None  # a restarted API server (new etcd) may not know it
            stopped.wait(2)


def b64(data: bytes | str) -> str:
    import base64

    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def unb64(data: str | None) -> bytes:
    import base64

    return base64.b64decode(data or "")


def container_states(pods: list[Obj]) -> list[str]:
    """A line per Pod with its containers' states, for a failure message."""

    def states(pod: Obj) -> list[Any]:
        return [s.get("state") for s in (pod.get("status") or {}).get("containerStatuses") or []]

    return [f"pod {pod['metadata']['name']}: {states(pod)}" for pod in pods]

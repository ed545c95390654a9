"""clients/: the error boundary (every answer becomes a PeeringError that says whether retrying helps),
and the provider clients shared per kubeconfig and closed when no peering holds them."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import pytest

from liqo_peering.clients.cluster import ClusterClient, lingering, request_rights
from liqo_peering.clients.connect import to_api_client
from liqo_peering.clients.remotes import RemoteClients
from liqo_peering.errors import ApiError, ClusterForbidden, PeeringError, Unauthorized
from liqo_peering.kubeconfig import RemoteKubeconfig
from liqo_peering.liqo import resources as r

CLIENT = ClusterClient(cast(Any, None), "provider", "https://198.18.0.2:6443")


@pytest.mark.parametrize(
    ("status", "kind", "transient"),
    [
        (403, ClusterForbidden, True),
        (404, ApiError, False),
        (409, ApiError, True),
        (422, ApiError, False),
        (429, ApiError, True),
        (500, ApiError, True),
        (503, ApiError, True),
    ],
)
def test_every_error_answer_becomes_a_peering_error(status: int, kind: type, transient: bool) -> None:
    body = json.dumps({"kind": "Status", "message": "token: abcdef0123456789abcdef0123 refused"})
    error = CLIENT._translate("PATCH", "/apis/x/v1/things/a", status, "Reason", body)
    assert isinstance(error, PeeringError) and isinstance(error, kind)
    assert error.transient is transient
    assert "provider cluster at https://198.18.0.2:6443" in error.message
    assert "abcdef0123456789abcdef0123" not in error.message  # redacted


def test_a_404_for_a_missing_type_is_told_from_a_missing_object() -> None:
    missing_object = CLIENT._translate("GET", "/p", 404, "NotFound", json.dumps({"details": {"name": "a"}}))
    missing_type = CLIENT._translate("GET", "/p", 404, "NotFound", "404 page not found")
    assert isinstance(missing_object, ApiError) and not CLIENT._is_missing_type(missing_object)
    assert isinstance(missing_type, ApiError) and CLIENT._is_missing_type(missing_type)


class Closing:
    def __init__(self, name: str) -> None:
        self.name, self.closed = name, False

    def close(self) -> None:
        self.closed = True


def kubeconfig(server: str) -> RemoteKubeconfig:
    return RemoteKubeconfig(config={"server": server}, context_name="c", server=server)


def test_remote_clients_are_shared_per_kubeconfig_and_closed_when_unheld() -> None:
    made: list[Closing] = []

    def connect(kc: RemoteKubeconfig) -> ClusterClient:
        made.append(Closing(kc.server))
        return cast(ClusterClient, made[-1])

    remotes = RemoteClients(connect)
    a = remotes.get(("ns", "a"), kubeconfig("https://one"))
    assert remotes.get(("ns", "b"), kubeconfig("https://one")) is a and len(remotes) == 1  # shared
    rotated = remotes.get(("ns", "a"), kubeconfig("https://two"))  # a's Secret rotated
    assert rotated is not a and not made[0].closed  # b still holds the old one
    remotes.release(("ns", "b"))
    assert made[0].closed and len(remotes) == 1  # nobody holds it: closed, connections released
    remotes.release(("ns", "a"))
    assert made[1].closed and len(remotes) == 0


def test_a_slow_connection_holds_up_no_other_peering_and_a_race_keeps_one_client() -> None:
    """Connecting may run an access provider's plugin for seconds: other peerings get their clients meanwhile,
    and two passes connecting the same kubeconfig at once keep one client (the other is closed)."""
    release, slow_started = threading.Event(), threading.Event()
    made: list[Closing] = []

    def connect(kc: RemoteKubeconfig) -> ClusterClient:
        if kc.server == "https://slow":
            slow_started.set()
            release.wait(30)
        made.append(Closing(kc.server))
        return cast(ClusterClient, made[-1])

    remotes = RemoteClients(connect)
    with ThreadPoolExecutor(max_workers=2) as pool:
        slow = [pool.submit(remotes.get, ("ns", f"s{i}"), kubeconfig("https://slow")) for i in range(2)]
        assert slow_started.wait(30)
        fast = remotes.get(("ns", "fast"), kubeconfig("https://fast"))  # while the slow one connects
        assert cast(Closing, fast).name == "https://fast"
        release.set()
        first, second = (f.result(timeout=30) for f in slow)
    assert first is second and len(remotes) == 2
    assert [c.closed for c in made if c.name == "https://slow" and c is not first] == [True]


def test_every_client_closed_is_announced_first() -> None:
    """The watch hub hears of each closed client, to stop whatever informer still reads through it."""
    remotes = RemoteClients(lambda kc: cast(ClusterClient, Closing(kc.server)))
    told: list[tuple[str, bool]] = []
    remotes.on_close = lambda client: told.append((cast(Closing, client).name, cast(Closing, client).closed))
    remotes.get(("ns", "a"), kubeconfig("https://one"))
    remotes.get(("ns", "a"), kubeconfig("https://two"))  # rotated: the old one goes
    remotes.release(("ns", "a"))
    assert told == [("https://one", False), ("https://two", False)]


@pytest.mark.parametrize(
    ("method", "path", "verb", "what"),
    [
        (
            "PATCH",
            "/apis/networking.liqo.io/v1beta1/namespaces/t/gatewayservers/x",
            "patch",
            "gatewayservers.networking.liqo.io t/x",
        ),
        ("POST", "/apis/authentication.liqo.io/v1beta1/namespaces/t/tenants", "create",
         "tenants.authentication.liqo.io in namespace t"),
        ("GET", "/api/v1/namespaces", "list", "namespaces (cluster-wide)"),
        ("GET", "/api/v1/namespaces/t", "get", "namespaces t"),
        ("WATCH", "/apis/networking.liqo.io/v1beta1/namespaces/t/connections", "watch",
         "connections.networking.liqo.io in namespace t"),
        ("PUT", "/apis/core.liqo.io/v1beta1/foreignclusters/p/status", "update",
         "foreignclusters.core.liqo.io/status p"),
        ("DELETE", "/api/v1/namespaces/t/secrets/s", "delete", "secrets t/s"),
    ],
)  # fmt: skip
def test_a_403_names_the_verb_and_the_resource(method: str, path: str, verb: str, what: str) -> None:
    assert request_rights(method, path) == (verb, what)
    error = CLIENT._translate(method, path, 403, "Forbidden", "")
    assert isinstance(error, ClusterForbidden) and error.reason == "ProviderForbidden"
    assert f"does not let the kubeconfig's identity {verb} {what} (403 Forbidden)" in error.message
    assert "liqoctl generate peering-user" in error.message


def test_a_401_asks_for_valid_credentials_not_rights() -> None:
    error = CLIENT._translate("GET", "/api/v1/namespaces/t", 401, "Unauthorized", "")
    assert isinstance(error, Unauthorized) and error.reason == "ProviderUnauthorized"
    assert "does not accept the kubeconfig's credentials" in error.message


class RetryLater(BaseHTTPRequestHandler):
    """An API server just back: 429 with Retry-After while its watch caches initialise (KEP 4568)."""

    requests = 0

    def do_GET(self) -> None:
        RetryLater.requests += 1
        body = json.dumps(
            {"kind": "Status", "message": "storage is (re)initializing", "reason": "TooManyRequests", "code": 429}
        ).encode()
        self.send_response(429)
        self.send_header("Retry-After", "1")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


def test_an_api_server_asking_to_retry_later_answers_it_is_not_unreachable() -> None:
    """Its 429 reaches the caller at once as that answer (transient, its message kept), neither retried by
    urllib3 nor turned into "too many 429 error responses", which read as an unreachable provider."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), RetryLater)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    config = {
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    api = to_api_client(RemoteKubeconfig(config=config, server=url, context_name="c"))
    try:
        with pytest.raises(ApiError) as raised:
            ClusterClient(api, "provider", url).get(r.TENANT, "t", "ns")
    finally:
        api.close()
        server.shutdown()
        server.server_close()
    assert raised.value.status == 429 and raised.value.transient
    assert "answered 429" in raised.value.message and "storage is (re)initializing" in raised.value.message
    assert RetryLater.requests == 1


@pytest.mark.parametrize(
    ("answer", "left"),
    [
        # Deleted at once: the object as it was, or a Status.
        ({"kind": "Secret", "metadata": {"name": "s"}}, False),
        ({"kind": "Status", "status": "Success"}, False),
        (None, False),
        # Finalizers hold it: the API server answers it with its deletionTimestamp.
        ({"kind": "Tenant", "metadata": {"deletionTimestamp": "t", "finalizers": ["foregroundDeletion"]}}, True),
        ({"kind": "Namespace", "metadata": {"deletionTimestamp": "t"}, "spec": {"finalizers": ["kubernetes"]}}, True),
        # Its grace period set, nothing holding it (not a kind the operator deletes): gone for the caller.
        ({"kind": "Pod", "metadata": {"deletionTimestamp": "t"}}, False),
    ],
)
def test_a_deletes_answer_says_whether_the_object_lingers(answer: object, left: bool) -> None:
    assert (lingering(answer) is not None) == left

"""A provider's API server is whichever server the user's kubeconfig names: its answers are read within bounds.
An answer or a watch event over its bound, or an answer that is not a JSON object or nests too deep, is a typed
ClusterUnreachable naming why, never an exception of another kind and never read whole into memory.

The server here is a loopback HTTP server answering what a hostile provider would."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from liqo_peering.clients import cluster
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.connect import to_api_client
from liqo_peering.errors import ClusterUnreachable
from liqo_peering.kubeconfig import RemoteKubeconfig
from liqo_peering.liqo import resources as r

BOUND = 4096


class Hostile(BaseHTTPRequestHandler):
    """Answers by path: a body over the bound, a body nested too deep, an endless watch line."""

    def do_GET(self) -> None:
        if "watch=true" in self.path:
            body = b'{"type": "ADDED", "object": {"data": "' + b"x" * (4 * BOUND)
        elif "/tenants/big" in self.path:
            body = b'{"kind": "Tenant", "data": "' + b"x" * (4 * BOUND) + b'"}'
        elif "/tenants/deep" in self.path:
            body = b"[" * 2000 + b"]" * 2000  # within the size bound, deeper than json.loads goes
        else:
            body = b"no JSON here"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[ClusterClient]:
    monkeypatch.setattr(cluster, "MAX_ANSWER_BYTES", BOUND)
    monkeypatch.setattr(cluster, "MAX_EVENT_BYTES", BOUND)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
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
        yield ClusterClient(api, "provider", url)
    finally:
        api.close()
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("big", f"its answer is larger than {BOUND} bytes"),
        ("deep", "its answer is not a JSON object, or nests too deep"),
        ("text", "its answer is not a JSON object, or nests too deep"),
    ],
)
def test_an_answer_out_of_bounds_is_a_typed_error(client: ClusterClient, name: str, why: str) -> None:
    with pytest.raises(ClusterUnreachable) as raised:
        client.get(r.TENANT, name, "ns")
    assert why in raised.value.message


def test_a_watch_event_out_of_bounds_is_a_typed_error(client: ClusterClient) -> None:
    with pytest.raises(ClusterUnreachable) as raised:
        list(client.stream(r.TENANT, "ns", "1"))
    assert f"a watch event is larger than {BOUND} bytes" in raised.value.message

"""ClusterClient.interrupt: calls blocked on an API server that accepts connections and never answers fail
at once when it is found down, not at their read timeout; another client's calls go on untouched.

The "API server" is a tarpit on 127.0.0.1: it accepts, reads what it is sent, and never answers. The
calls go through the operator's own client stack (to_api_client: kubernetes' ApiClient and urllib3 with
the operator's retry settings), over plain HTTP and over TLS (a handshake the tarpit never completes)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from liqo_peering.clients import cluster as cluster_module
from liqo_peering.clients import informer as informer_module
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.connect import to_api_client
from liqo_peering.clients.informer import Informer, Scope
from liqo_peering.errors import ClusterUnreachable
from liqo_peering.kubeconfig import RemoteKubeconfig
from liqo_peering.liqo import resources as r

LONG = (30.0, 600.0)  # connect, read: a call not interrupted would outlast the test's waits by far
WAIT = 30.0  # how long a test waits for what an interrupt makes happen at once


class Tarpit:
    """Accepts connections, reads their first bytes (the request, or a TLS ClientHello), never answers."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.sent_to = threading.Semaphore(0)  # released once per connection that sent something
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # closed: the test is over
            while True:
                conn, _ = self.listener.accept()
                self.accepted.append(conn)
                conn.recv(1, socket.MSG_PEEK)  # blocks until the client sent something
                self.sent_to.release()

    @staticmethod
    def ended_by_client(conn: socket.socket) -> bool:
        """The client shut this connection down: past what it sent, its stream ends."""
        conn.setblocking(False)
        try:
            while conn.recv(65536):
                pass
            return True
        except BlockingIOError:  # open, nothing more to read
            return False
        finally:
            conn.setblocking(True)

    def close(self) -> None:
        self.listener.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def tarpits() -> Iterator[list[Tarpit]]:
    made = [Tarpit(), Tarpit()]
    yield made
    for tarpit in made:
        tarpit.close()


def _client(tarpit: Tarpit, tls: bool) -> ClusterClient:
    server = f"{'https' if tls else 'http'}://127.0.0.1:{tarpit.port}"
    cluster: dict[str, Any] = {"server": server}
    if tls:
        cluster["insecure-skip-tls-verify"] = True  # the handshake never gets as far as the certificate
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    api = to_api_client(RemoteKubeconfig(config=config, server=server, context_name="x"))
    return ClusterClient(api, "provider", server, request_timeout=LONG)


class Call:
    """One call (a GET of a Tenant) made in a thread; ``error`` is what it raised."""

    def __init__(self, client: ClusterClient) -> None:
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(client,), daemon=True)
        self.thread.start()

    def _run(self, client: ClusterClient) -> None:
        try:
            client.get(r.TENANT, "t", "ns")
        except BaseException as exc:  # whatever it is, the test looks at it
            self.error = exc

    def ended(self) -> bool:
        self.thread.join(WAIT)
        return not self.thread.is_alive()


def _blocked(client: ClusterClient, tarpit: Tarpit) -> Call:
    call = Call(client)
    assert tarpit.sent_to.acquire(timeout=WAIT), "the call never reached the tarpit"
    return call


@pytest.mark.parametrize("tls", [False, True], ids=["http-read", "tls-handshake"])
def test_an_interrupt_fails_the_blocked_call_at_once_and_only_that_clients(tarpits: list[Tarpit], tls: bool) -> None:
    hung, other = _client(tarpits[0], tls), _client(tarpits[1], tls)
    try:
        call, bystander = _blocked(hung, tarpits[0]), _blocked(other, tarpits[1])
        assert hung.interrupt() == 1
        assert call.ended(), "the interrupted call is still waiting"
        assert isinstance(call.error, ClusterUnreachable), repr(call.error)
        assert call.error.reason == "ProviderUnreachable"
        assert f"127.0.0.1:{tarpits[0].port}" in call.error.message
        # Not retried on a new connection (which would hang again): one connection, ended by the client.
        assert len(tarpits[0].accepted) == 1 and tarpits[0].ended_by_client(tarpits[0].accepted[0])
        # The other client's call still waits on its connection.
        assert bystander.thread.is_alive() and not tarpits[1].ended_by_client(tarpits[1].accepted[0])
        assert other.interrupt() == 1 and bystander.ended()
        assert isinstance(bystander.error, ClusterUnreachable), repr(bystander.error)
    finally:
        hung.close()
        other.close()


def test_the_probe_finding_the_server_down_fails_the_call_blocked_on_it_with_its_reason(
    tarpits: list[Tarpit], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole path: a call hangs, the health probe (its informer) times out twice, marks the client down
    and interrupts the call, which raises the probe's finding (the wording a timeout gives)."""
    monkeypatch.setattr(cluster_module, "PROBE_TIMEOUT", (0.2, 0.2))
    monkeypatch.setattr(informer_module, "PROBE_SECONDS", 0.05)
    client = _client(tarpits[0], tls=False)
    reported = threading.Event()
    probe = Informer(client, Scope(r.HEALTH), lambda items: reported.set(), lambda kind, obj: None)
    try:
        call = _blocked(client, tarpits[0])
        probe.start()
        assert call.ended(), "the call is still waiting though the probe found the server down"
        assert reported.wait(WAIT) and client.down is not None  # and it woke the peerings
        assert isinstance(call.error, ClusterUnreachable), repr(call.error)
        assert call.error.reason == "ProviderUnreachable"
        assert call.error.message == client.down.message and "ReadTimeoutError" in call.error.message
    finally:
        probe.stop()
        client.close()

"""A cluster's answers are read within bounds (clients/bounds.py): a huge, endless, trickling, deeply nested,
malformed or wrong-shaped answer, or a redirect, fails that request with a typed, transient BadAnswer.

The "API server" is a small HTTP server on 127.0.0.1 that answers what each case needs; the calls go
through the operator's own client stack (to_api_client: kubernetes' ApiClient and urllib3 with the
operator's settings), ClusterClient and Informer."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from liqo_peering.clients import bounds
from liqo_peering.clients import cluster as cluster_module
from liqo_peering.clients.answers import request_of
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.connect import to_api_client
from liqo_peering.clients.informer import Informer, Scope
from liqo_peering.errors import AnswerInvalid, AnswerTooLarge, AnswerTooSlow, ApiError, BadAnswer, PeeringError
from liqo_peering.kubeconfig import RemoteKubeconfig
from liqo_peering.liqo import resources as r
from testenv.wait import wait_for

Answer = Callable[[BaseHTTPRequestHandler], None]
TENANT = {
    "apiVersion": "authentication.liqo.io/v1beta1",
    "kind": "Tenant",
    "metadata": {"name": "t", "namespace": "ns"},
}


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, answer: Answer) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.answer = answer
        self.requests: list[str] = []
        self.closing = threading.Event()  # set at the end of the test: answers that hang give up

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def _any(self) -> None:
        self.server.requests.append(f"{self.command} {self.path}")
        self.rfile.read(int(self.headers.get("Content-Length") or 0))  # the request's body: the next is after it
        with contextlib.suppress(OSError):  # the client gave up reading: what it should do
            self.server.answer(self)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

    def log_message(self, *_: Any) -> None:
        pass


def send(h: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    h.send_response(status)
    for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
        h.send_header(key, value)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def chunked(h: BaseHTTPRequestHandler, chunks: Iterator[bytes]) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    for chunk in chunks:
        h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        h.wfile.flush()
    h.wfile.write(b"0\r\n\r\n")


def endless(chunk: bytes, closing: threading.Event) -> Iterator[bytes]:
    while not closing.is_set():
        yield chunk


@contextlib.contextmanager
def serving(answer: Answer) -> Iterator[Server]:
    server = Server(answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.closing.set()
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def client_of(server: Server, timeout: tuple[float, float] = (5.0, 5.0)) -> Iterator[ClusterClient]:
    config = {
        "clusters": [{"name": "c", "cluster": {"server": server.url}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    api = to_api_client(RemoteKubeconfig(config=config, server=server.url, context_name="c"))
    try:
        yield ClusterClient(api, "provider", server.url, request_timeout=timeout)
    finally:
        api.close()


def get_tenant(answer: Answer, timeout: tuple[float, float] = (5.0, 5.0)) -> BadAnswer:
    with serving(answer) as server, client_of(server, timeout) as client, pytest.raises(BadAnswer) as raised:
        client.get(r.TENANT, "t", "ns")
    return raised.value


def assert_reported(error: BadAnswer, kind: type[BadAnswer], reason: str, *said: str) -> None:
    assert isinstance(error, kind) and error.reason == reason
    assert error.transient and error.side == "provider"
    assert "the provider cluster at http://127.0.0.1:" in error.message
    assert "tenants.authentication.liqo.io" in error.message  # which request
    for text in said:
        assert text in error.message


# -- size ------------------------------------------------------------------------------------------------
def test_an_object_larger_than_its_cap_is_refused_unread() -> None:
    huge = json.dumps({**TENANT, "spec": {"x": "a" * (bounds.MAX_OBJECT_BYTES + 1)}}).encode()
    error = get_tenant(lambda h: send(h, 200, huge))
    assert_reported(error, AnswerTooLarge, "ProviderAnswerTooLarge", "the operator reads at most 4 MiB")


def test_a_never_ending_chunked_body_is_cut_at_the_cap() -> None:
    def answer(h: BaseHTTPRequestHandler) -> None:
        chunked(h, endless(b"[" + b" " * 65535, h.server.closing))  # type: ignore[attr-defined]

    assert_reported(get_tenant(answer), AnswerTooLarge, "ProviderAnswerTooLarge")


def test_a_list_may_be_larger_than_an_object_but_not_unbounded() -> None:
    big = {"items": [{"metadata": {"name": f"t{i}"}, "data": "a" * (1 << 20)} for i in range(6)], "metadata": {}}
    with serving(lambda h: send(h, 200, json.dumps(big).encode())) as server, client_of(server) as client:
        assert len(client.find(r.TENANT, "ns")) == 6  # 6 MiB: more than an object, a list may be

    def answer(h: BaseHTTPRequestHandler) -> None:
        chunked(h, endless(b" " * 65536, h.server.closing))  # type: ignore[attr-defined]

    with serving(answer) as server, client_of(server, (5.0, 60.0)) as client, pytest.raises(AnswerTooLarge) as raised:
        client.find(r.TENANT, "ns")
    assert "64 MiB" in raised.value.message


def test_an_answer_of_too_many_values_is_refused_before_it_is_parsed() -> None:
    """Small in bytes, huge once parsed: a list of a million numbers."""
    many = b'{"metadata": {"name": "t"}, "x": [' + b"1," * 1_000_000 + b"1]}"
    error = get_tenant(lambda h: send(h, 200, many))
    assert_reported(error, AnswerTooLarge, "ProviderAnswerTooLarge", "the operator reads at most 500000 values")


def test_a_huge_error_answer_is_read_in_part_and_reported_as_the_error_it_is() -> None:
    message = "no " * (4 << 20)
    body = json.dumps({"kind": "Status", "code": 500, "message": message}).encode()
    with (
        serving(lambda h: send(h, 500, body)) as server,
        client_of(server) as client,
        pytest.raises(ApiError) as raised,
    ):
        client.get(r.TENANT, "t", "ns")
    assert raised.value.status == 500 and raised.value.transient
    assert len(raised.value.message) < 2 * bounds.MAX_MESSAGE_CHARS


# -- shape -----------------------------------------------------------------------------------------------
def nested(depth: int) -> Any:
    """Objects nested ``depth`` deep: deeper than the client reads, within Python's recursion limit."""
    found: Any = {}
    for _ in range(depth):
        found = {"a": found}
    return found


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'{"metadata": {"name": "t"', "not JSON"),
        (b"\xff\xfe garbage", "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deep"),  # deeper than Python's recursion limit
        (json.dumps({"metadata": {"name": "t"}, "spec": nested(bounds.MAX_DEPTH + 5)}).encode(), "nested too deep"),
        (b"[1, 2]", "a JSON array where an object was expected"),
        (b'{"kind": "Tenant", "spec": {}}', "an object without metadata.name"),
        (b'"t"', "a JSON string"),
    ],
)
def test_a_malformed_deep_or_wrong_shaped_object_is_invalid(body: bytes, said: str) -> None:
    error = get_tenant(lambda h: send(h, 200, body))
    assert_reported(error, AnswerInvalid, "ProviderAnswerInvalid", said)


@pytest.mark.parametrize(
    "answer",
    [
        {"items": [1, "x"], "metadata": {}},
        {"items": [{"kind": "Tenant"}], "metadata": {}},
        {"items": {"a": {}}, "metadata": {}},
        [TENANT],
    ],
)
def test_a_wrong_shaped_list_is_invalid(answer: Any) -> None:
    with serving(lambda h: send(h, 200, json.dumps(answer).encode())) as server, client_of(server) as client:
        for read in (lambda: client.find(r.TENANT, "ns"), lambda: client.list_page(r.TENANT, "ns")):
            with pytest.raises(AnswerInvalid) as raised:
                read()
            assert raised.value.reason == "ProviderAnswerInvalid" and "list tenants" in raised.value.message


# -- time ------------------------------------------------------------------------------------------------
def trickle(h: BaseHTTPRequestHandler, data: bytes) -> None:
    """A byte at a time, each well within the read timeout: only a total deadline ends it."""
    for byte in data:
        h.wfile.write(bytes([byte]))
        h.wfile.flush()
        if h.server.closing.wait(0.1):  # type: ignore[attr-defined]
            return


def test_a_trickling_body_is_cut_at_the_requests_total_deadline() -> None:
    body = json.dumps(TENANT).encode()

    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        trickle(h, body)

    error = get_tenant(answer, timeout=(1.0, 1.0))
    assert_reported(error, AnswerTooSlow, "ProviderAnswerTooSlow", "the operator reads at most 2 s per request")


def test_trickling_headers_are_cut_at_the_requests_total_deadline() -> None:
    def answer(h: BaseHTTPRequestHandler) -> None:
        trickle(h, b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 1000 + b"\r\n\r\n")

    assert_reported(get_tenant(answer, timeout=(1.0, 1.0)), AnswerTooSlow, "ProviderAnswerTooSlow")


def test_a_prompt_answer_is_not_cut_and_its_connection_serves_the_next_request() -> None:
    with serving(lambda h: send(h, 200, json.dumps(TENANT).encode())) as server, client_of(server) as client:
        assert [(client.get(r.TENANT, "t", "ns") or {})["metadata"]["name"] for _ in range(3)] == ["t"] * 3


# -- redirects -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_and_never_followed(status: int) -> None:
    with serving(lambda h: send(h, 200, json.dumps(TENANT).encode())) as target:

        def answer(h: BaseHTTPRequestHandler) -> None:
            send(h, status, b"", {"Location": f"{target.url}{h.path}"})

        with serving(answer) as server, client_of(server) as client:
            for call in (
                lambda: client.get(r.TENANT, "t", "ns"),
                lambda: client.create(r.TENANT, TENANT, "ns"),
                lambda: next(client.stream(r.TENANT, "ns", "1", timeout_seconds=5)),
            ):
                with pytest.raises(AnswerInvalid) as raised:
                    call()
                assert f"a redirect ({status}) to {target.url}" in raised.value.message
                assert "never follows" in raised.value.message
            assert len(server.requests) == 3
        assert target.requests == []  # the redirect's target received nothing


# -- watch streams ---------------------------------------------------------------------------------------
def watch_answer(*lines: bytes, hold: bool = False) -> Answer:
    def answer(h: BaseHTTPRequestHandler) -> None:
        if h.path.endswith("/tenants/t"):
            send(h, 200, json.dumps(TENANT).encode())
            return
        if "watch=true" not in h.path:
            send(h, 200, json.dumps({"items": [TENANT], "metadata": {"resourceVersion": "5"}}).encode())
            return

        def chunks() -> Iterator[bytes]:
            yield from lines
            if hold:  # the stream stays open, silent, until the test ends
                h.server.closing.wait(60)  # type: ignore[attr-defined]

        chunked(h, chunks())

    return answer


def watch(server: Server, client: ClusterClient) -> list[dict[str, Any]]:
    return list(client.stream(r.TENANT, "ns", "5", timeout_seconds=5))


def test_a_watch_event_line_larger_than_an_object_is_refused() -> None:
    huge = b'{"type": "ADDED", "object": {"metadata": {"name": "t"}, "x": "' + b"a" * (5 << 20)
    with (
        serving(watch_answer(huge, hold=True)) as server,
        client_of(server) as client,
        pytest.raises(AnswerTooLarge) as raised,
    ):
        watch(server, client)
    assert raised.value.reason == "ProviderAnswerTooLarge" and "watch tenants" in raised.value.message


@pytest.mark.parametrize(
    "line",
    [b"<html>not json</html>\n", b'{"type": "ADDED"}\n', b'{"type": "ADDED", "object": {"spec": {}}}\n', b"[[[[\n"],
)
def test_a_watch_sending_garbage_is_dropped(line: bytes) -> None:
    with serving(watch_answer(line, hold=True)) as server, client_of(server) as client, pytest.raises(AnswerInvalid):
        watch(server, client)


def test_a_watch_event_never_finished_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_module, "EVENT_SECONDS", 1.0)
    with (
        serving(watch_answer(b'{"type": "ADDED", "obj', hold=True)) as server,
        client_of(server) as client,
        pytest.raises(AnswerTooSlow) as raised,
    ):
        watch(server, client)
    assert "a watch event left unfinished" in raised.value.message


def test_a_quiet_watch_between_events_is_not_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_module, "EVENT_SECONDS", 1.0)
    event = json.dumps({"type": "MODIFIED", "object": {**TENANT, "metadata": {"name": "t", "resourceVersion": "6"}}})
    with serving(watch_answer(event.encode() + b"\n")) as server, client_of(server) as client:
        assert [e["type"] for e in watch(server, client)] == ["MODIFIED"]


def test_an_informer_fed_garbage_lists_again_reports_it_and_recovers_when_the_stream_heals() -> None:
    state = {"answer": watch_answer(b"garbage\n")}
    event = json.dumps({"type": "MODIFIED", "object": {**TENANT, "metadata": {"name": "t", "resourceVersion": "6"}}})

    def answer(h: BaseHTTPRequestHandler) -> None:
        state["answer"](h)

    with serving(answer) as server, client_of(server) as client:
        informer = Informer(client, Scope(r.TENANT, "ns"), lambda _items: None, lambda _kind, _obj: None).start()
        try:

            def refused() -> PeeringError | None:
                try:
                    client.get(r.TENANT, "t", "ns")
                except PeeringError as exc:
                    return exc
                return None

            error = wait_for("a read to report the dropped stream", refused)
            assert isinstance(error, AnswerInvalid) and "watch tenants" in error.message
            assert informer.lists >= 1 and informer.alive
            state["answer"] = watch_answer(event.encode() + b"\n", hold=True)
            wait_for("the informer to heal", lambda: informer.synced and informer.failed is None)
            assert (client.get(r.TENANT, "t", "ns") or {})["metadata"]["name"] == "t"
        finally:
            informer.stop()


@pytest.mark.parametrize(
    ("kind", "provider", "consumer"),
    [
        (AnswerTooLarge, "ProviderAnswerTooLarge", "ConsumerAnswerTooLarge"),
        (AnswerTooSlow, "ProviderAnswerTooSlow", "ConsumerAnswerTooSlow"),
        (AnswerInvalid, "ProviderAnswerInvalid", "ConsumerAnswerInvalid"),
    ],
)
def test_a_bad_answer_is_named_by_its_side_and_retried(kind: type[BadAnswer], provider: str, consumer: str) -> None:
    request = request_of("https://198.18.0.2:6443", "GET", "/api/v1/namespaces/liqo/configmaps")
    for side, reason in (("provider", provider), ("consumer", consumer)):
        error = kind(side, request, "what came", "1 MiB")
        assert error.reason == reason and error.transient and isinstance(error, PeeringError)
        assert error.message.startswith(f"the {side} cluster at https://198.18.0.2:6443 ")
        assert "list configmaps in namespace liqo: what came (the operator reads at most 1 MiB)" in error.message

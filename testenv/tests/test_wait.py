"""testenv.wait's probes against a real HTTP server on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from testenv.localk8s.ports import free_port
from testenv.wait import answers_ok


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/ready" else 503)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_answers_ok_only_on_200(server: str) -> None:
    assert answers_ok(f"{server}/ready")
    assert not answers_ok(f"{server}/not-ready")


def test_answers_ok_is_false_where_nothing_listens() -> None:
    assert not answers_ok(f"http://127.0.0.1:{free_port()}/ready")

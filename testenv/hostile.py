"""A hostile provider: an HTTPS proxy on 127.0.0.1 in front of a real API server that, per mode, answers
some requests with what no API server sends.

    with HostileProxy(tmp_path, provider_kubeconfig) as proxy:
        kubeconfig = proxy.kubeconfig()      # the provider's, its server moved to the proxy
        proxy.mode = Mode.HUGE               # from now on; Mode.HONEST forwards everything

It terminates TLS with a CA of its own (which ``kubeconfig()`` trusts) and forwards each request to the API
server over TLS of its own, with the provider kubeconfig's client certificate: to the API server it is
that user. Requests whose path ``targets`` matches (by default Liqo's: its API groups, and the ConfigMaps
that hold a cluster's Liqo identity) get the mode's answer instead; the rest, the health probe's
/readyz included, is forwarded as it is, watch streams too.

What it cannot show: it is a stand-in for something hostile in front of an API server (or a compromised
one), written in the harness; it speaks HTTP/1.1 only (no HTTP/2), terminates TLS itself (a proxy that
tampers with the handshake is out of scope), and answers the modes below only.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import http.client
import re
import socket
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from testenv.localk8s import pki

LOOPBACK = "127.0.0.1"
# Liqo's API groups, and the ConfigMaps of a Liqo namespace (its cluster identity is one).
LIQO_PATHS = re.compile(r"^/apis/[^/]*\.liqo\.io(/|$)|^/api/v1/namespaces/[^/]+/configmaps")
MiB = 1 << 20


class Mode(enum.Enum):
    HONEST = "honest"  # forwards everything
    HUGE = "huge"  # an 80 MiB answer, its length declared
    MALFORMED = "malformed"  # not JSON
    DEEP = "deep"  # JSON nested 200000 deep
    WRONG_SHAPE = "wrong-shape"  # a list whose items are not objects, an object without metadata
    ENDLESS = "endless"  # an answer that never ends: a space every 0.2 s, forever
    REDIRECT = "redirect"  # 307 to another loopback address (``redirect_target``), which counts connections


class RedirectTarget:
    """A listener on loopback that counts the connections it accepts and closes them: nothing may reach it."""

    def __init__(self) -> None:
        self.listener = socket.create_server((LOOPBACK, 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True, name="redirect-target").start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.listener.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    proxy: HostileProxy


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def _any(self) -> None:
        proxy = self.server.proxy
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        mode = proxy.mode
        proxy.requests.append((mode, self.command, self.path))
        try:
            if mode is Mode.HONEST or not proxy.targets.search(self.path):
                self._forward(body)
            else:
                self._hostile(mode)
        except (OSError, http.client.HTTPException):  # the client gave up (as it should), or the upstream went
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

    def log_message(self, *_: Any) -> None:
        pass

    def _forward(self, body: bytes) -> None:
        proxy = self.server.proxy
        upstream = http.client.HTTPSConnection(proxy.upstream_host, proxy.upstream_port, context=proxy.upstream_tls)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            resp = upstream.getresponse()
            self.send_response(resp.status, resp.reason)
            for key, value in resp.getheaders():
                if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(key, value)
            self.send_header("Transfer-Encoding", "chunked")  # re-chunked, so that watch events flow as they come
            self.end_headers()
            while chunk := resp.read1(64 << 10):
                self._chunk(chunk)
            self.wfile.write(b"0\r\n\r\n")
        finally:
            upstream.close()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _hostile(self, mode: Mode) -> None:
        proxy = self.server.proxy
        if mode is Mode.HUGE:
            size = 80 * MiB
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            head = b'{"kind": "List", "items": [], "padding": "'
            self.wfile.write(head)
            left = size - len(head) - 2
            block = b"x" * MiB
            while left > 0:
                self.wfile.write(block[: min(left, MiB)])
                left -= MiB
            self.wfile.write(b'"}')
        elif mode is Mode.MALFORMED:
            self._send(200, b'{"kind": "List", "items": [{"metadata": {"name": <html>Service Unavailable</html>')
        elif mode is Mode.DEEP:
            self._send(200, b"[" * 200_000 + b"]" * 200_000)
        elif mode is Mode.WRONG_SHAPE:
            self._send(200, b'{"kind": "List", "metadata": {}, "items": [1, "two", null, {"spec": {}}]}')
        elif mode is Mode.ENDLESS:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while not proxy.closing.wait(0.2):
                self._chunk(b" ")
        elif mode is Mode.REDIRECT:
            location = f"https://{LOOPBACK}:{proxy.redirect_target.port}{self.path}"
            self._send(307, b"", {"Location": location})


class HostileProxy:
    def __init__(self, directory: Path, kubeconfig: bytes, targets: re.Pattern[str] = LIQO_PATHS) -> None:
        self.mode = Mode.HONEST
        self.targets = targets
        self.requests: list[tuple[Mode, str, str]] = []
        self.closing = threading.Event()
        self.redirect_target = RedirectTarget()
        self._config = yaml.safe_load(kubeconfig)
        cluster = self._config["clusters"][0]["cluster"]
        user = self._config["users"][0]["user"]
        host, port = cluster["server"].split("//", 1)[1].rsplit(":", 1)
        self.upstream_host, self.upstream_port = host, int(port)
        # The upstream side: the API server's CA, and the kubeconfig's client certificate.
        files = Path(tempfile.mkdtemp(dir=directory))
        (files / "upstream-ca.crt").write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        (files / "client.crt").write_bytes(base64.b64decode(user["client-certificate-data"]))
        (files / "client.key").write_bytes(base64.b64decode(user["client-key-data"]))
        (files / "client.key").chmod(0o600)
        self.upstream_tls = ssl.create_default_context(cafile=str(files / "upstream-ca.crt"))
        self.upstream_tls.load_cert_chain(str(files / "client.crt"), str(files / "client.key"))
        # The client side: a CA of its own, and a serving certificate for 127.0.0.1.
        self.ca = pki.new_ca("hostile proxy CA")
        serving = pki.new_serving_cert(self.ca, "hostile proxy", [], [LOOPBACK])
        serving.write(files / "proxy.crt", files / "proxy.key")
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(str(files / "proxy.crt"), str(files / "proxy.key"))
        self._server = _Server((LOOPBACK, 0), _Handler)
        self._server.proxy = self
        self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="hostile-proxy")

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.port}"

    def kubeconfig(self) -> bytes:
        """The provider's kubeconfig with its server moved to the proxy, which it trusts."""
        config = yaml.safe_load(yaml.safe_dump(self._config))
        cluster = config["clusters"][0]["cluster"]
        cluster["server"] = self.server
        cluster["certificate-authority-data"] = base64.b64encode(self.ca.cert_pem).decode()
        return yaml.safe_dump(config).encode()

    def hostile_requests(self, mode: Mode) -> int:
        """How many requests got ``mode``'s answer."""
        return sum(1 for m, _, path in self.requests if m is mode and self.targets.search(path))

    def __enter__(self) -> HostileProxy:
        self._thread.start()
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.closing.set()
        self._server.shutdown()
        self._server.server_close()
        with contextlib.suppress(OSError):
            self.redirect_target.close()

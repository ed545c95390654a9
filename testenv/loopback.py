"""HTTP servers on loopback for the clouds' stand-ins (testenv.aws, testenv.gcp, testenv.azure): each served from
a thread of its own, and the CONNECT proxy through which an SDK reaches a cloud's real hostname, its TLS
terminated here with the stand-in's CA."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOOPBACK = "127.0.0.1"


def serve(
    handler: type[BaseHTTPRequestHandler],
    name: str,
    tls: ssl.SSLContext | None = None,
    address: tuple[str, int] = (LOOPBACK, 0),
) -> ThreadingHTTPServer:
    """An HTTP(S) server on ``address`` (a free port of loopback unless told), serving from a thread of its own."""
    server = ThreadingHTTPServer(address, handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server


def stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


def connect_proxy(
    tunnels_to: Callable[[str, str], bool],
    refusal: str,
    tls: Callable[[], ssl.SSLContext],
    serve_tunnel: Callable[[ssl.SSLSocket, str], object],
) -> type[BaseHTTPRequestHandler]:
    """A CONNECT proxy's handler: a tunnel to a (host, port) that ``tunnels_to`` takes is answered here, over TLS
    with ``tls()``, by ``serve_tunnel(connection, host)``; any other is refused (403, ``refusal``)."""

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_CONNECT(self) -> None:
            host, _, port = self.path.partition(":")
            if not tunnels_to(host, port):
                self.send_error(403, refusal)
                return
            self.send_response(200, "Connection established")
            self.end_headers()
            with contextlib.suppress(OSError, ssl.SSLError, ValueError):
                conn = tls().wrap_socket(self.connection, server_side=True)
                serve_tunnel(conn, host)
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

    return Proxy

"""The live connections of one cluster's client, so that the calls blocked on them can be interrupted.

An API server that hangs (frozen, SIGSTOP; a stalled node) keeps its connections open and silent: a call
waits for its read timeout, and the pass making it holds up the peering's next status write that long.
When the health probe finds the server down (informer.Informer._probe), shutting down the sockets of
that client's connections wakes every call blocked on them at once with a connection error.

Each ClusterClient tracks only the connections its own PoolManager opens (pool classes of its own), so
an interrupt never touches another cluster's calls or watches.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import weakref
from typing import Any

from urllib3 import PoolManager, connectionpool
from urllib3.connection import HTTPConnection, HTTPSConnection


class Connections:
    def __init__(self) -> None:
        # Weak: urllib3 drops connections as it pleases; a dropped one has nothing left to interrupt.
        self._live: weakref.WeakSet[HTTPConnection] = weakref.WeakSet()
        self._lock = threading.Lock()

    def track(self, manager: PoolManager) -> None:
        """Register every connection ``manager`` opens from now on (set before its first request)."""
        connections = self

        class Connection(HTTPConnection):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                connections._add(self)

        class TLSConnection(HTTPSConnection):
            # While TLS wraps the socket, ``sock`` is the plain one, already handed over (detached): a second
            # handle on the same socket lets an interrupt reach a hung handshake too. Closed once connected.
            handshaking: socket.socket | None = None

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                connections._add(self)

            def _new_conn(self) -> socket.socket:
                sock = super()._new_conn()
                self.handshaking = sock.dup()
                return sock

            def connect(self) -> None:
                try:
                    super().connect()
                finally:
                    handshaking, self.handshaking = self.handshaking, None
                    if handshaking is not None:
                        handshaking.close()

        # urllib3's names: they appear in its errors, and so in status messages.
        class HTTPConnectionPool(connectionpool.HTTPConnectionPool):
            ConnectionCls = Connection

        class HTTPSConnectionPool(connectionpool.HTTPSConnectionPool):
            ConnectionCls = TLSConnection

        # A dict of this manager's own: urllib3's default one is shared by every PoolManager.
        manager.pool_classes_by_scheme = {"http": HTTPConnectionPool, "https": HTTPSConnectionPool}

    def _add(self, conn: HTTPConnection) -> None:
        with self._lock:
            self._live.add(conn)

    def interrupt(self) -> int:
        """Shut down the socket of every live connection; how many there were.

        A call blocked reading (or in a TLS handshake) wakes at once with an error; an idle pooled
        connection is found dropped and replaced by its next user.
        """
        with self._lock:
            live = list(self._live)
        interrupted = 0
        for conn in live:
            for sock in (conn.sock, getattr(conn, "handshaking", None)):
                if not isinstance(sock, socket.socket):  # not connected (yet, or any more)
                    continue
                with contextlib.suppress(OSError):  # closed meanwhile, or detached (handshaking covers it)
                    # The plain socket's shutdown, also for TLS: SSLSocket.shutdown would drop the TLS state
                    # under the thread reading it; this only makes that thread's read see the end of the stream.
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                    interrupted += 1
                    break
        return interrupted

"""The live connections of one cluster's client, so that the calls blocked on them can be interrupted.

An API server that hangs (frozen, SIGSTOP; a stalled node) keeps its connections open and silent: a call
waits for its read timeout, and the pass making it holds up the peering's next status write that long.
When the health probe finds the server down (informer.Informer._probe), shutting down the sockets of
that client's connections wakes every call blocked on them at once with a connection error.

Each ClusterClient tracks only the connections its own PoolManager opens (pool classes of its own), so
an interrupt never touches another cluster's calls or watches.

The same handle bounds each request in time (``deadline``): urllib3's timeouts bound each wait for a byte,
so a server that trickles its answer (headers, TLS handshake or body) a byte at a time would hold a call for
as long as it likes. A connection carries the deadline of the request it serves, and one watchdog thread
shuts down the socket of any connection past its deadline, which fails that request.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

from urllib3 import PoolManager, connectionpool
from urllib3.connection import HTTPConnection, HTTPSConnection


class Deadline:
    """When a request must be over: ``passed`` once the watchdog may have cut it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    @property
    def passed(self) -> bool:
        return time.monotonic() >= self.at


# The deadline of the request the current thread sends, which the connection it uses takes on.
_current = threading.local()


class Connections:
    def __init__(self) -> None:
        # Weak: urllib3 drops connections as it pleases; a dropped one has nothing left to interrupt.
        self._live: weakref.WeakSet[HTTPConnection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._deadlines: weakref.WeakKeyDictionary[HTTPConnection, Deadline] = weakref.WeakKeyDictionary()

    @contextlib.contextmanager
    def deadline(self, seconds: float) -> Iterator[Deadline]:
        """Bound the requests this thread sends within the block to ``seconds`` in all: connecting, the TLS
        handshake, sending and reading the whole answer."""
        bound = Deadline(seconds)
        outer = getattr(_current, "deadline", None)
        _current.deadline = bound
        try:
            yield bound
        finally:
            # A generator's block (a watch) may be closed from another thread: leave that one's alone.
            if getattr(_current, "deadline", None) is bound:
                _current.deadline = outer
            with self._lock:
                for conn in [c for c, d in self._deadlines.items() if d is bound]:
                    del self._deadlines[conn]

    def tighten(self, bound: Deadline, at: float) -> None:
        """Move ``bound`` to ``at`` (earlier or back later): a watch bounds each event in time as well."""
        bound.at = at
        _WATCHDOG.watch(self, at)

    def _sending(self, conn: HTTPConnection) -> None:
        """``conn`` connects or sends a request for this thread: it takes on that request's deadline."""
        bound = getattr(_current, "deadline", None)
        if bound is None:
            return
        with self._lock:
            self._deadlines[conn] = bound
        _WATCHDOG.watch(self, bound.at)

    def expire(self, now: float) -> float | None:
        """Shut down the connections past their deadline; the next deadline, if any is left."""
        with self._lock:
            expired = [c for c, d in self._deadlines.items() if d.at <= now]
            for conn in expired:
                del self._deadlines[conn]
            left = min((d.at for d in self._deadlines.values()), default=None)
        for conn in expired:
            _shut(conn)
        return left

    def track(self, manager: PoolManager) -> None:
        """Register every connection ``manager`` opens from now on (set before its first request)."""
        connections = self

        class Connection(HTTPConnection):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                connections._add(self)

            def connect(self) -> None:
                connections._sending(self)
                super().connect()

            def request(self, *args: Any, **kwargs: Any) -> None:
                connections._sending(self)
                super().request(*args, **kwargs)

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

            def request(self, *args: Any, **kwargs: Any) -> None:
                connections._sending(self)
                super().request(*args, **kwargs)

            def connect(self) -> None:
                connections._sending(self)
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
        return sum(_shut(conn) for conn in live)


def _shut(conn: HTTPConnection) -> bool:
    """Shut down a connection's socket (or the one its TLS handshake runs on); whether it had one."""
    for sock in (conn.sock, getattr(conn, "handshaking", None)):
        if not isinstance(sock, socket.socket):  # not connected (yet, or any more)
            continue
        with contextlib.suppress(OSError):  # closed meanwhile, or detached (handshaking covers it)
            # The plain socket's shutdown, also for TLS: SSLSocket.shutdown would drop the TLS state
            # under the thread reading it; this only makes that thread's read see the end of the stream.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
            return True
    return False


class _Watchdog:
    """One thread for every client: sleeps until the earliest deadline, then shuts down what is past it."""

    def __init__(self) -> None:
        self._owners: weakref.WeakSet[Connections] = weakref.WeakSet()
        self._wake = threading.Condition()
        self._next: float | None = None
        self._thread: threading.Thread | None = None

    def watch(self, owner: Connections, at: float) -> None:
        with self._wake:
            self._owners.add(owner)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="request-deadlines")
                self._thread.start()
            if self._next is None or at < self._next:
                self._next = at
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                now = time.monotonic()
                while self._next is None or self._next > now:
                    self._wake.wait(None if self._next is None else self._next - now)
                    now = time.monotonic()
                self._next = None
                owners = list(self._owners)
            left = [at for owner in owners if (at := owner.expire(now)) is not None]
            if left:
                with self._wake:
                    self._next = min([*left, *([self._next] if self._next is not None else [])])


_WATCHDOG = _Watchdog()

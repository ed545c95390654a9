"""Free TCP ports on 127.0.0.1."""

from __future__ import annotations

import os
import random
import socket
import threading

# Ports are handed out below the kernel's ephemeral range (net.ipv4.ip_local_port_range, from 32768 by
# default), where no outgoing connection's local port can take one between its handing out and its bind,
# and below Kubernetes' NodePort range (30000-32767), which the clusters' Services use. The suite's tiers
# run side by side, one process each: each process takes its own block (use_block), so that two of them
# never hand out the same port.
LOW, HIGH = 10000, 30000


def _given() -> tuple[int, int]:
    """The block a process is started with, LPO_PORTS=low-high (a `make demo` that a test runs: its tier's
    block); the whole range without it."""
    low, sep, high = os.environ.get("LPO_PORTS", "").partition("-")
    if not sep:
        return LOW, HIGH
    given = int(low), int(high)
    if not LOW <= given[0] < given[1] <= HIGH:
        raise ValueError(f"LPO_PORTS={low}-{high}: not a block of {LOW}-{HIGH}")
    return given


_block = _given()
# Ports handed out by this process: several clusters start in parallel, so never give the same one twice.
_handed_out: set[int] = set()
_lock = threading.Lock()


def use_block(index: int, count: int) -> None:
    """Hand out ports from the index-th of count equal blocks of the range only."""
    size = (HIGH - LOW) // count
    global _block
    _block = (LOW + index * size, LOW + (index + 1) * size)


def block() -> tuple[int, int]:
    """The ports this process hands out: [low, high)."""
    return _block


def free_port() -> int:
    """A port that is free now; the caller's process binds it shortly after."""
    with _lock:
        low, high = _block
        for _ in range(200):
            port = random.randrange(low, high)
            if port in _handed_out:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free port found in {low}-{high - 1}")


def is_listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0

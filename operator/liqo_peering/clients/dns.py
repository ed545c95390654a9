"""Whether a gateway's hostname resolves, asked from the operator's Pod, within a bound: a name that does not
resolve is a cause of its own for a tunnel that does not come up (the gateway client resolves it the same way,
through the cluster's DNS)."""

from __future__ import annotations

import ipaddress
import socket
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

# getaddrinfo takes no timeout: it runs on a small pool of its own, and an answer later than this is no answer.
RESOLVE_TIMEOUT_SECONDS = 3.0
_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="dns")


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def unresolved(host: str, timeout: float = RESOLVE_TIMEOUT_SECONDS) -> str | None:
    """Why ``host`` does not resolve ("does not resolve", "no DNS answer within 3s"), or None: it does, or is
    an address."""
    if is_address(host):
        return None
    future = _pool.submit(socket.getaddrinfo, host, None)
    try:
        future.result(timeout=timeout)
    except FutureTimeout:
        return f"no DNS answer within {timeout:g}s"
    except (socket.gaierror, UnicodeError):
        return "does not resolve"
    return None

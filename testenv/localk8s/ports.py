"""Free TCP ports on 127.0.0.1."""

from __future__ import annotations

import socket
import threading

# Ports handed out by this process: the kernel may offer a just-closed port again, and several
# clusters start in parallel, so never give the same one twice.
_handed_out: set[int] = set()
_lock = threading.Lock()


def free_port() -> int:
    """A port that is free now; the caller's process binds it shortly after (small race accepted)."""
    with _lock:
        for _ in range(100):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port: int = s.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    raise RuntimeError("no free port found")


def is_listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0

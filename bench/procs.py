"""Child processes the benchmark starts, and the one place that stops them all (also on Ctrl-C/SIGTERM)."""

from __future__ import annotations

import shutil
import signal
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from testenv.spawned import Spawned

__all__ = ["Spawned", "exit_on_sigterm", "log", "quietly", "save_logs", "wait_http"]


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def exit_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so every `finally` (and so every clean-up) runs."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def quietly(fn: Callable[[], object], what: str) -> None:
    """Run a clean-up step; a failing one must not keep the others from running."""
    try:
        fn()
    except Exception as e:  # reported; the next clean-up still runs
        log(f"clean-up of {what} failed: {e}")


def wait_http(url: str, timeout: float) -> None:
    """Until `url` answers at all (any status)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer in {timeout:.0f}s") from None
            time.sleep(0.2)


def save_logs(logs: dict[str, Path], dest: Path) -> None:
    """Copy logs out of directories that their clusters remove on stop (for --keep)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name, path in logs.items():
        if path.exists():
            shutil.copy(path, dest / f"{name}.log")

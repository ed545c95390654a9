"""Child processes the benchmark starts, and the one place that stops them all (also on Ctrl-C/SIGTERM)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import FrameType


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


class Spawned:
    """One child in a session of its own: a terminal's Ctrl-C reaches only us, and we stop its whole group."""

    def __init__(self, name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.log_path = log_path
        with open(log_path, "ab") as out:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self, grace: float = 10.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)
        # The group may hold children that outlive the leader.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


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

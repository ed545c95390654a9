"""Getting started's "Try it on one machine" block, as written: `make demo` brings up two clusters, Liqo's chart,
the operator and a peering, and returns once that peering is Ready (hack/demo.py fails otherwise); `make
demo-down` then stops it all and removes the checkout's .local/.

It runs in a clone of this checkout (its uncommitted changes included), since `make demo-down` removes the
checkout's .local/, where the suite keeps its state. The clone finds what `make test` built in the shared
cache: the tools, Liqo's images and, once its build has ended, the operator's image of the same files. The
demo's clusters take their ports from this tier's block (LPO_PORTS), and its LAN a /24 of its own, as every
session's does.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

import doc_blocks
from testenv.localk8s import ports

pytestmark = pytest.mark.solo  # clusters of the demo's own

DEMO = doc_blocks.block("docs/getting-started.md", "make demo ")
REPO = doc_blocks.REPO
# The demo builds nothing that `make test` has not built; its clusters and the peering take a few minutes, more
# under the other tiers' load.
TIMEOUT = 1500


def _clone(into: Path) -> None:
    """This checkout as it is (``git stash create``: its tracked files with their changes), without its .local/."""
    git = ["git", "-C", str(REPO)]
    snapshot = subprocess.run([*git, "stash", "create"], capture_output=True, text=True, check=True).stdout.strip()
    revision = snapshot or "HEAD"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(REPO), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "fetch", "-q", str(REPO), revision], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "-q", "FETCH_HEAD"], check=True)


def _image_built() -> None:
    """Until the suite's build of the operator's image has ended (hack/run-tests.sh holds the lock meanwhile):
    the demo's own build then finds it cached."""
    lock = REPO / ".local" / "images.lock"
    if lock.exists():
        with lock.open() as held:
            fcntl.flock(held, fcntl.LOCK_SH)


def test_make_demo_then_demo_down_as_written(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    _clone(checkout)
    _image_built()
    low, high = ports.block()
    environ = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "LPO_PORTS": f"{low}-{high}",
        **{k: v for k, v in os.environ.items() if k.startswith("LPO_") and k != "LPO_PORTS"},
    }
    proc = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", DEMO.commands({})],
        cwd=checkout, env=environ, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"{DEMO.page}:{DEMO.line} failed (exit {proc.returncode}):\n{DEMO.text}\n"
        f"--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-4000:]}"
    )
    assert "LiqoPeering default/provider is ready" in proc.stdout, proc.stdout[-4000:]
    assert not (checkout / ".local").exists(), "make demo-down left .local/"

"""Getting started's "Try it on one machine" block, as written: `make demo` brings up two clusters, Liqo's chart,
the operator and a peering, and returns once that peering is Ready (hack/demo.py fails otherwise); `make
demo-down` then stops it all: no process of the demo's is left, nor its clusters' state.

It runs in a clone of this checkout (its uncommitted changes included), since the demo keeps its clusters' state
in the checkout's .local/, where the suite keeps its own. The clone finds what `make test` built in the shared
cache: the tools, Liqo's images and, once its build has ended, the operator's image of the same files. The
demo's clusters take their ports from this tier's block (LPO_PORTS), and its LAN a /24 of its own, as every
session's does.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import doc_blocks
from hack.demo import CLUSTERS, LIQO_CHART, LIQO_REAL, ROOT, STATE
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


def _state_left(checkout: Path) -> list[str]:
    """What the demo keeps in .local/ while it runs (hack/demo.py's directories, in the clone)."""
    kept = (path.relative_to(ROOT) for path in (CLUSTERS, LIQO_CHART, LIQO_REAL, STATE))
    return [str(path) for path in kept if (checkout / path).exists()]


def _processes_in(checkout: Path) -> list[str]:
    """The command lines of the processes that name a file of ``checkout`` (the demo's clusters and Liqo)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not a process
            continue
        if str(checkout) in cmdline:
            found.append(cmdline.strip())
    return found


@pytest.fixture
def checkout() -> Iterator[Path]:
    """Where the clone goes: a short path, since the nodes' unix sockets live under its .local/."""
    with tempfile.TemporaryDirectory(prefix="demo-", dir="/tmp") as where:
        yield Path(where)
        if _state_left(Path(where)):  # the block failed before its `make demo-down`
            subprocess.run(["make", "demo-down"], cwd=where, capture_output=True, timeout=300)


def test_make_demo_then_demo_down_as_written(checkout: Path) -> None:
    _clone(checkout)
    _image_built()
    low, high = ports.block()
    # A user's shell: this one's (the package index's certificates, the cache), without the suite's cluster.
    environ = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "VIRTUAL_ENV", "PYTHONPATH")}
    environ["LPO_PORTS"] = f"{low}-{high}"
    out = doc_blocks.shell(DEMO, {}, environ, TIMEOUT, cwd=checkout)
    assert "LiqoPeering default/provider is ready" in out, out[-4000:]
    assert _state_left(checkout) == [], "make demo-down left its state"
    assert _processes_in(checkout) == [], "make demo-down left processes running"

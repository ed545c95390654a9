"""What both benchmarks share: the LiqoPeering kind, and the operator started as users run it."""

from __future__ import annotations

import hashlib
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from testenv import kube as k
from testenv.operator_support import OperatorProcess

from .procs import wait_http

LIQOPEERING = k.Res("peering.liqo-operator.io", "v1alpha1", "liqopeerings")
# The operator's production default; OperatorProcess passes 5 s, a test setting.
RESYNC_ARGS = ["--resync-interval", "60"]
SETTLE_SECONDS = 3.0
REPO = Path(__file__).resolve().parents[1]


def load_average() -> list[float]:
    """The machine's load average over 1, 5 and 15 minutes."""
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def operator_version() -> str:
    """The commit, and a hash of uncommitted changes under operator/: others may be editing it meanwhile,
    and each run starts the operator from the working tree."""
    git = ["git", "-C", str(REPO)]
    commit = subprocess.run([*git, "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True).stdout.strip()
    diff = subprocess.run([*git, "diff", "HEAD", "--", "operator"], capture_output=True, text=True).stdout
    return f"{commit}+{hashlib.sha256(diff.encode()).hexdigest()[:8]}" if diff else commit


def start_operator(kubeconfig: Path, work: Path, extra_args: Sequence[str] = ()) -> OperatorProcess:
    """The operator as a process, with ``extra_args`` after its usual ones; returns once it serves /healthz
    and its start-up lists are done."""
    operator = OperatorProcess(kubeconfig, work, [*RESYNC_ARGS, *extra_args]).start()
    try:
        wait_http(f"http://127.0.0.1:{operator.health_port}/healthz", 60)
        time.sleep(SETTLE_SECONDS)  # its informers list and watch: those requests are not a peering's
    except BaseException:
        operator.stop()
        raise
    return operator

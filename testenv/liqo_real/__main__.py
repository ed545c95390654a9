"""Two local clusters with Liqo's real control plane, in the foreground until Ctrl-C (or SIGTERM).

    python -m testenv.liqo_real [--dir DIR] [--prefix rl] [--nodes N]

Prints the kubeconfig paths; the component logs are under <dir>/<prefix>-<side>/liqo/logs.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m testenv.liqo_real")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--prefix", default="rl")
    parser.add_argument("--nodes", type=int, default=0, help="real nodes per cluster (default 0)")
    args = parser.parse_args()
    from .pytest_plugin import start_real_liqo_pair

    def on_term(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)  # runs the clean-ups, also while starting

    signal.signal(signal.SIGTERM, on_term)
    base = args.dir or Path(tempfile.mkdtemp(prefix="liqo-real-"))
    pair = start_real_liqo_pair(base, args.prefix, args.nodes)
    done = threading.Event()
    try:
        for side, cluster in pair.clusters.items():
            print(f"{side}: {cluster.kubeconfig} (cluster ID {pair.ids[side]})", flush=True)
        print("ready; Ctrl-C to stop", flush=True)
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        pair.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

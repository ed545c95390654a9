"""`python -m testenv.liqo_chart up --dir DIR`: two local clusters with a node each (DIR/consumer,
DIR/provider; kubeconfigs DIR/<name>/admin.kubeconfig), Liqo's images loaded, `helm install liqo` on both;
waits for every Liqo Deployment and DaemonSet to be available and prints each Pod's state, then leaves
the clusters running. `... status --dir DIR` prints it again; `... down --dir DIR` removes them.
Needs hack/build-liqo-images.sh to have run; must run as root."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from testenv.kube import Kube
from testenv.localk8s.__main__ import down, recorded_clusters

from . import LiqoChartPair, liqo_images, pod_report, workloads


def status(base_dir: Path) -> int:
    ok = True
    for cluster in recorded_clusters(base_dir):
        kc = Kube(cluster.api_client())
        print(f"== {cluster.name} ({cluster.kubeconfig})")
        for w in workloads(kc):
            ok &= w.ok
            print(f"{w.kind} {w.name}: {w.available}/{w.desired} available")
        for line in pod_report(kc):
            print(line)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testenv.liqo_chart", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("up", "status", "down"):
        sub.add_parser(name).add_argument("--dir", type=Path, required=True)
    p_up = sub.choices["up"]
    p_up.add_argument("--timeout", type=float, default=300, help="seconds to wait for Liqo to be available")
    args = parser.parse_args(argv)
    base_dir: Path = args.dir.resolve()
    if args.command == "down":
        down(base_dir)
        return 0
    if args.command == "status":
        return status(base_dir)
    pair = LiqoChartPair.start(base_dir, liqo_images())
    try:
        pair.wait_available(args.timeout)
    except AssertionError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        print(" ".join(f"{k}: {v:.1f}s" for k, v in pair.timings.items()))
    print(pair.report(logs=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""CLI: `python -m testenv.localk8s up --dir DIR NAME...` / `python -m testenv.localk8s down --dir DIR`."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from .cluster import STATE_FILE, LocalCluster, start_clusters


def recorded_clusters(base_dir: Path) -> list[LocalCluster]:
    """Every cluster with state under base_dir, including half-started ones."""
    if not base_dir.is_dir():
        return []
    return [LocalCluster.load(d) for d in sorted(base_dir.iterdir()) if (d / STATE_FILE).is_file()]


def down(base_dir: Path) -> None:
    for cluster in recorded_clusters(base_dir):
        cluster.stop()
        print(f"stopped {cluster.name}")
    shutil.rmtree(base_dir, ignore_errors=True)


def up(base_dir: Path, names: list[str]) -> None:
    existing = {c.name: c for c in recorded_clusters(base_dir)}
    if set(existing) == set(names) and all(c.is_running() for c in existing.values()):
        print(f"already up: {', '.join(names)} (use `down` first for fresh clusters)")
        clusters = existing
    else:
        # Anything else (other names, a dead process, a crashed earlier `up`): start clean.
        down(base_dir)
        started = time.monotonic()
        clusters = start_clusters(names, base_dir)
        print(f"started {', '.join(names)} in {time.monotonic() - started:.1f}s")
    for name, cluster in clusters.items():
        target = base_dir / f"{name}.kubeconfig"
        shutil.copyfile(cluster.kubeconfig, target)
        target.chmod(0o600)
        print(f"{name}: {cluster.server}  KUBECONFIG={target}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testenv.localk8s", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start clusters (reused if already up) and write DIR/<name>.kubeconfig")
    p_up.add_argument("--dir", type=Path, required=True)
    p_up.add_argument("names", nargs="+")
    p_down = sub.add_parser("down", help="stop every cluster recorded in DIR and remove DIR")
    p_down.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "up":
        up(args.dir, args.names)
    else:
        down(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""CLI: `python -m testenv.localk8s up --dir DIR [--nodes N] [--kubernetes-version V] NAME...` / `... down --dir DIR` /
`... load --dir DIR ARCHIVE...` (docker-archives into every node of the clusters in DIR) /
`... archive ROOTFS.tar REF OUT.tar CONFIG-JSON [--base LAYER.tar]...` (a root filesystem tarball as a
docker-archive, on top of the --base layers if any, for hack/build-images.sh and build-liqo-images.sh) /
`... compare FIRST.tar SECOND.tar` (whether two docker-archives are the same image, and what differs:
hack/build-images.sh --verify)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from .cluster import STATE_FILE, LocalCluster, start_clusters
from .images import archive_differences, archive_digests, docker_archive


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


def up(base_dir: Path, names: list[str], nodes: int = 0, kubernetes_version: str | None = None) -> None:
    existing = {c.name: c for c in recorded_clusters(base_dir)}
    if set(existing) == set(names) and all(
        c.is_running() and c.nodes == nodes and c.kubernetes_version == kubernetes_version for c in existing.values()
    ):
        print(f"already up: {', '.join(names)} (use `down` first for fresh clusters)")
        clusters = existing
    else:
        # Anything else (other names or nodes, a dead process, a crashed earlier `up`): start clean.
        down(base_dir)
        started = time.monotonic()
        clusters = start_clusters(names, base_dir, nodes=nodes, kubernetes_version=kubernetes_version)
        print(f"started {', '.join(names)} in {time.monotonic() - started:.1f}s")
    for name, cluster in clusters.items():
        target = base_dir / f"{name}.kubeconfig"
        shutil.copyfile(cluster.kubeconfig, target)
        target.chmod(0o600)
        print(f"{name}: {cluster.server}  KUBECONFIG={target}")
        for spec in cluster.node_specs():
            print(f"  node {spec.name}: {spec.ip}, Pods {spec.pod_subnet}")


def load(base_dir: Path, archives: list[Path]) -> None:
    for cluster in recorded_clusters(base_dir):
        for archive in archives:
            cluster.load_image(archive)
        if cluster.nodes:
            print(f"loaded {len(archives)} image(s) into {cluster.name}'s nodes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testenv.localk8s", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start clusters (reused if already up) and write DIR/<name>.kubeconfig")
    p_up.add_argument("--dir", type=Path, required=True)
    p_up.add_argument("--nodes", type=int, default=0, help="real nodes per cluster (default 0: control planes only)")
    p_up.add_argument(
        "--kubernetes-version",
        help="the control plane's release: hack/versions.env KUBERNETES_VERSION (default) or KUBERNETES_FLOOR_VERSION",
    )
    p_up.add_argument("names", nargs="+")
    p_down = sub.add_parser("down", help="stop every cluster recorded in DIR and remove DIR")
    p_down.add_argument("--dir", type=Path, required=True)
    p_load = sub.add_parser("load", help="import docker-archives into every node of the clusters in DIR")
    p_load.add_argument("--dir", type=Path, required=True)
    p_load.add_argument("archives", nargs="+", type=Path)
    p_archive = sub.add_parser("archive", help="a root filesystem tarball as a docker-archive (one layer)")
    p_archive.add_argument("rootfs", type=Path)
    p_archive.add_argument("ref")
    p_archive.add_argument("out", type=Path)
    p_archive.add_argument("config", type=json.loads, help="the image's runtime config, as JSON")
    p_archive.add_argument(
        "--base", type=Path, action="append", default=[], help="a lower layer (tarball), repeatable; ROOTFS goes on top"
    )
    p_compare = sub.add_parser("compare", help="whether two docker-archives are the same image; what differs")
    p_compare.add_argument("first", type=Path)
    p_compare.add_argument("second", type=Path)
    args = parser.parse_args(argv)
    if args.command == "up":
        up(args.dir, args.names, args.nodes, args.kubernetes_version)
    elif args.command == "load":
        load(args.dir, args.archives)
    elif args.command == "archive":
        created_by = f"{args.rootfs.name} as {'a' if args.base else 'one'} layer"
        docker_archive(args.out, args.ref, args.rootfs, args.config, created_by, args.base)
    elif args.command == "compare":
        differences = archive_differences(args.first, args.second)
        image_id, layers = archive_digests(args.first)
        if differences:
            print(f"{args.first} and {args.second} differ:", *differences, sep="\n  ", file=sys.stderr)
            return 1
        print(f"the same image: {image_id}, layers {' '.join(layers)}")
    else:
        down(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())

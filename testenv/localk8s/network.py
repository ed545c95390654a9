"""The LAN of local clusters with nodes, and the host-level pieces a node is made of.

A `Lan` is one Linux bridge on the host, `lk8s<i>`, holding 198.18.<..>.1/24: the i-th /24 of
198.18.0.0/15 (RFC 2544's benchmarking range, never routed anywhere). The API servers listen on that .1;
each node is a network namespace joined to the bridge by a veth pair, with .10 and up. Creating the bridge
is the lock on its /24: two sessions never get the same one. The host does not forward (nothing of the
nodes' traffic leaves these namespaces and the bridge).

Also here: running a command inside a node's namespace (nsenter), cgroup v1 roots, and mount points.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NETWORK = ipaddress.ip_network("198.18.0.0/15")
SUBNETS = 2 ** (24 - NETWORK.prefixlen)
BRIDGE_PREFIX = "lk8s"
CGROUP_FS = Path("/sys/fs/cgroup")
# Node addresses: .10 + 10 * cluster index + node index, so up to 10 nodes per cluster.
NODES_PER_CLUSTER = 10


class NetworkError(RuntimeError):
    pass


def run(argv: list[str], netns: Path | None = None, stdin: str | None = None) -> str:
    """Run a command (inside the network namespace bound at `netns`, if given); its stdout, or raise."""
    if netns is not None:
        argv = in_netns(netns, argv)
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise NetworkError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def in_netns(netns: Path, argv: list[str]) -> list[str]:
    """argv run inside a node's network namespace. Only the network: the node's daemons share the host's
    mounts and cgroup hierarchies (`ip netns exec` would remount /sys, hiding /sys/fs/cgroup)."""
    return ["nsenter", f"--net={netns}", "--", *argv]


@dataclass(frozen=True)
class Lan:
    index: int

    @property
    def bridge(self) -> str:
        return f"{BRIDGE_PREFIX}{self.index}"

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        first = int(NETWORK.network_address) + 256 * self.index
        return ipaddress.IPv4Network((first, 24))

    @property
    def host_ip(self) -> str:
        """The host's address on the LAN, where the API servers listen."""
        return str(self.subnet.network_address + 1)

    def node_ip(self, cluster_index: int, node_index: int) -> str:
        if node_index >= NODES_PER_CLUSTER:
            raise ValueError(f"at most {NODES_PER_CLUSTER} nodes per cluster")
        return str(self.subnet.network_address + 10 + NODES_PER_CLUSTER * cluster_index + node_index)

    def veth(self, node_ip: str) -> str:
        """The host end of a node's veth pair (interface names have at most 15 characters)."""
        return f"{self.bridge}v{node_ip.rsplit('.', 1)[1]}"

    @classmethod
    def acquire(cls) -> Lan:
        """The first free /24: the bridge is created here, and `ip link add` fails if it exists."""
        for index in range(SUBNETS):
            lan = cls(index)
            try:
                run(["ip", "link", "add", "name", lan.bridge, "type", "bridge"])
            except NetworkError as e:
                if "File exists" in str(e):
                    continue
                raise
            try:
                run(["ip", "addr", "add", f"{lan.host_ip}/24", "dev", lan.bridge])
                run(["ip", "link", "set", lan.bridge, "up"])
            except BaseException:
                lan.remove()
                raise
            return lan
        raise NetworkError(f"every /24 of {NETWORK} has a {BRIDGE_PREFIX}<n> bridge; remove stale ones")

    def remove(self) -> None:
        """Delete the bridge (its address and route go with it); nothing to do if it is gone already."""
        with contextlib.suppress(NetworkError):
            run(["ip", "link", "del", self.bridge])

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Lan:
        return cls(int(data["index"]))


def create_netns(path: Path) -> None:
    """A persistent network namespace bound at `path` (not under /run/netns: everything stays in our dirs)."""
    path.touch()
    run(["unshare", f"--net={path}", "true"])


def connect(lan: Lan, netns: Path, ip: str) -> None:
    """Join the namespace to the LAN as `eth0` with `ip`, the host's address as its default route."""
    veth = lan.veth(ip)
    # Created inside the namespace, its peer sent to ours: "netns <pid>" names this process's namespace.
    run(["ip", "link", "add", "eth0", "type", "veth", "peer", "name", veth, "netns", str(os.getpid())], netns)
    run(["ip", "link", "set", veth, "master", lan.bridge, "up"])
    for argv in (
        ["ip", "addr", "add", f"{ip}/24", "dev", "eth0"],
        ["ip", "link", "set", "eth0", "up"],
        ["ip", "link", "set", "lo", "up"],
        ["ip", "route", "add", "default", "via", lan.host_ip],
    ):
        run(argv, netns)


def set_sysctls(netns: Path, values: dict[str, str]) -> None:
    """Per-namespace sysctls (the net.* ones are): written through /proc/sys from inside the namespace."""
    script = "".join(f"echo {v} > /proc/sys/{k.replace('.', '/')}\n" for k, v in values.items())
    run(["sh", "-euc", script], netns)


# ---- host limits -------------------------------------------------------------------------------------------

INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")


def ensure_inotify_instances(minimum: int = 1024) -> None:
    """Raise the per-user limit of inotify instances (the kernel's default is 128, shared by every process
    of the user) to `minimum`: each kubelet, containerd and API server holds several, and when they run out
    containerd's CRI plugin does not load ("unknown service runtime.v1.RuntimeService") and the kubelet
    fails ("too many open files"). Raised only, never lowered; it stays raised after the clusters stop."""
    current = int(INOTIFY_INSTANCES.read_text())
    if current < minimum:
        INOTIFY_INSTANCES.write_text(str(minimum))
        print(f"localk8s: raised fs.inotify.max_user_instances from {current} to {minimum}", file=sys.stderr)


# ---- cgroup v1 --------------------------------------------------------------------------------------------


def cgroup_hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy (v1 ones and, on hybrid hosts, the unified one)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype in ("cgroup", "cgroup2"):
            found.append(Path(fields[4]))
    return found


def make_cgroup_root(relative: str) -> None:
    """The kubelet's cgroupRoot, made in every v1 hierarchy before it starts (it refuses to start when a
    hierarchy lacks it: "cgroup [...] has some missing paths"). A new cpuset is empty until given the
    parent's cpus and mems. Nodes start and stop concurrently and share the top level: a directory another
    node has just made is fine, an empty cpuset is filled whoever made it, and a top level that a stopping
    node's `remove_cgroup_root` took away in between is made again."""
    for hierarchy in cgroup_hierarchies():
        for attempt in range(3):
            try:
                _make_cgroup_path(hierarchy, Path(relative))
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise


def _make_cgroup_path(hierarchy: Path, relative: Path) -> None:
    path = hierarchy
    for part in relative.parts:
        parent, path = path, path / part
        path.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (parent / name).exists() and not (path / name).read_text().strip():
                (path / name).write_text((parent / name).read_text())


def remove_cgroup_root(relative: str, timeout: float = 10.0) -> None:
    """Kill every process left in the subtree (containers whose shim died with the node), then remove its
    cgroups, deepest first, in every hierarchy."""
    deadline = time.monotonic() + timeout
    for hierarchy in cgroup_hierarchies():
        top = hierarchy / relative
        if not top.is_dir():
            continue
        while True:
            pids = [int(p) for d in top.rglob("cgroup.procs") for p in d.read_text().split()]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            dirs = sorted((d for d in [top, *top.rglob("*")] if d.is_dir()), key=lambda d: len(d.parts), reverse=True)
            busy = False
            for d in dirs:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    busy = True
            if not busy:
                break
            if time.monotonic() > deadline:
                raise NetworkError(f"cgroup {top} still busy (pids {pids})")
            time.sleep(0.1)
        # The shared parent (e.g. /localk8s) goes when the last node's root is gone.
        with contextlib.suppress(OSError):
            top.parent.rmdir()


# ---- mounts -------------------------------------------------------------------------------------------------


def mounts_under(directory: Path) -> list[Path]:
    """Mount points at or below `directory`, deepest first (the order to unmount them)."""
    prefix = str(directory.resolve())
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        # Octal escapes (\040 for a space) as the kernel writes them.
        point = line.split()[4].encode().decode("unicode_escape")
        if point == prefix or point.startswith(prefix + "/"):
            found.append(Path(point))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def unmount_all(directory: Path) -> None:
    """Detach every mount under `directory` (kubelet volumes, container root filesystems, network
    namespaces), repeated while some remain: a mount can be stacked on another."""
    for _ in range(5):
        points = mounts_under(directory)
        if not points:
            return
        for point in points:
            subprocess.run(["umount", "--lazy", str(point)], capture_output=True, check=False)
    left = mounts_under(directory)
    if left:
        raise NetworkError(f"could not unmount {', '.join(map(str, left))}")

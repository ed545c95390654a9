"""What a process costs, from /proc: memory, CPU time, threads, open files and TCP connections."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TICKS = os.sysconf("SC_CLK_TCK")
ESTABLISHED = "01"  # the state column of /proc/net/tcp


@dataclass(frozen=True)
class Sample:
    rss_mb: float
    peak_rss_mb: float  # VmHWM: the most it ever held
    threads: int
    open_fds: int
    tcp_established: int
    cpu_seconds: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process so far (0 when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15 of stat)


def total_cpu(pids: Iterable[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def _status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def _kb(value: str) -> float:
    return int(value.split()[0]) / 1024


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _established(pid: int, inodes: set[str], port: int | None = None) -> int:
    """Established TCP connections among ``inodes`` (to ``port`` only, when given)."""
    count = 0
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] != ESTABLISHED or cols[9] not in inodes:
                continue
            if port is None or int(cols[2].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def established_to(pid: int, port: int) -> int:
    """The process's established TCP connections to ``port`` (an API server's, say)."""
    return _established(pid, _socket_inodes(pid), port)


def sample(pid: int) -> Sample:
    status = _status(pid)
    inodes = _socket_inodes(pid)
    return Sample(
        rss_mb=_kb(status["VmRSS"]),
        peak_rss_mb=_kb(status["VmHWM"]),
        threads=int(status["Threads"]),
        open_fds=len(os.listdir(f"/proc/{pid}/fd")),
        tcp_established=_established(pid, inodes),
        cpu_seconds=cpu_seconds(pid),
    )


def read_bytes(pid: int) -> int:
    """Bytes the process has read through read(2) and its kind so far (rchar of /proc/<pid>/io): sockets
    included, so for a client of an API server mostly what its lists and watches received."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == "rchar":
            return int(value)
    return 0


def machine_busy_seconds() -> float:
    """CPU time all cores spent not idle since boot (from /proc/stat): what everything on the machine used."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / TICKS

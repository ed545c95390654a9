"""How many lanes `hack/run-tests.sh` runs side by side, from the machine: its cores, its memory and its load.

Each lane runs its tiers one after the other, and every tier waits on clusters it starts. A lane more than the
machine can carry makes every tier's waits longer; on a busy machine (another job's load, a CPU hog beside the
run) the same lanes that fit an idle one would wait on deadlines they cannot meet. So the number of lanes
follows the cores left free by the load already there, and the memory the lanes' clusters need; the layouts
below keep the lanes about as long as each other at each count. `TEST_LANES` still overrides the choice.

`python -m testenv.lanes` prints the layout on stdout and why on stderr.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

# The tiers' layout per number of lanes: lanes separated by spaces, a lane's tiers by commas. At four the
# lanes take about as long on two cores (each tier's time is in its log's last line): the short tiers behind
# main, liqo and matrix, nodes alone. Fewer lanes put the short tiers behind the long ones, more give the
# long tiers a lane each.
LAYOUTS = {
    2: "main,nodes,standin liqo,matrix,solo,gitops",
    3: "main,solo,gitops liqo,standin nodes,matrix",
    4: "main,standin liqo,gitops nodes matrix,solo",
    5: "main liqo nodes,standin matrix,gitops solo",
    6: "main liqo nodes standin matrix,gitops solo",
    7: "main liqo nodes standin matrix gitops solo",
}
LANES_PER_FREE_CORE = 2  # each lane waits on its clusters about half of the time
MEMORY_PER_LANE_GIB = 4.0  # a lane's clusters at their peak: a Liqo pair, or three nodes with the operator's Pods


@dataclass(frozen=True)
class Machine:
    cores: int
    memory_gib: float  # available (MemAvailable), not installed
    load: float  # cores busy with other work just before the run


@dataclass(frozen=True)
class Choice:
    lanes: int
    layout: str
    why: str


def choose(machine: Machine) -> Choice:
    free = max(machine.cores - machine.load, 1.0)
    by_cpu = round(free * LANES_PER_FREE_CORE)
    by_memory = int(machine.memory_gib // MEMORY_PER_LANE_GIB)
    lanes = min(max(min(by_cpu, by_memory), min(LAYOUTS)), max(LAYOUTS))
    why = (
        f"{lanes} lanes: {machine.cores} cores with {machine.load:.1f} busy leave {free:.1f} free"
        f" ({by_cpu} lanes), {machine.memory_gib:.1f} GiB available ({by_memory} lanes)"
    )
    if min(by_cpu, by_memory) < min(LAYOUTS):
        why += f"; fewer than {min(LAYOUTS)} lanes would not end within CI's time"
    return Choice(lanes, LAYOUTS[lanes], why)


def busy_cores(window: float = 2.0) -> float:
    """Cores busy over the next ``window`` seconds (/proc/stat), not the load average: that would still count
    the builds `make test` ran just before, which are done."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            ticks = [int(n) for n in f.readline().split()[1:]]
        return sum(ticks), ticks[3] + ticks[4]  # all, idle + iowait

    total, idle = sample()
    time.sleep(window)
    total2, idle2 = sample()
    cores = os.cpu_count() or 1
    return cores * (1 - (idle2 - idle) / max(total2 - total, 1))


def this_machine() -> Machine:
    with open("/proc/meminfo") as f:
        fields = dict(line.split(":", 1) for line in f)
    available_kib = int(fields["MemAvailable"].split()[0])
    return Machine(os.cpu_count() or 1, available_kib / 2**20, busy_cores())


def main() -> None:
    choice = choose(this_machine())
    print(f"--> {choice.why}", file=sys.stderr)
    print(choice.layout)


if __name__ == "__main__":
    main()

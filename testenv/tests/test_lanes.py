"""testenv.lanes: the lanes follow the machine, and every layout runs every tier once."""

from __future__ import annotations

import pytest

from testenv.lanes import LAYOUTS, Machine, busy_cores, choose
from testenv.pytest_plugin import TIERS


@pytest.mark.parametrize("count", sorted(LAYOUTS))
def test_each_layout_runs_every_tier_once_in_its_number_of_lanes(count: int) -> None:
    lanes = LAYOUTS[count].split(" ")
    tiers = [tier for lane in lanes for tier in lane.split(",")]
    assert len(lanes) == count
    assert sorted(tiers) == sorted(TIERS)


@pytest.mark.parametrize(
    ("machine", "lanes"),
    [
        (Machine(cores=2, memory_gib=23.0, load=0.1), 4),  # the reference machine, idle
        (Machine(cores=2, memory_gib=23.0, load=1.0), 2),  # a CPU hog on one of its cores
        (Machine(cores=2, memory_gib=23.0, load=0.6), 3),
        (Machine(cores=1, memory_gib=8.0, load=0.0), 2),  # below what the suite needs: the fewest lanes
        (Machine(cores=16, memory_gib=64.0, load=0.0), 7),
        (Machine(cores=16, memory_gib=13.0, load=0.0), 3),  # memory, not cores, limits it
        (Machine(cores=4, memory_gib=64.0, load=1.5), 5),
    ],
)
def test_lanes_follow_free_cores_and_memory(machine: Machine, lanes: int) -> None:
    choice = choose(machine)
    assert choice.lanes == lanes
    assert choice.layout == LAYOUTS[lanes]
    assert f"{lanes} lanes" in choice.why


def test_busy_cores_is_read_from_this_machine() -> None:
    assert 0.0 <= busy_cores(window=0.2) <= 1024

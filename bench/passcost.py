"""The pass-cost row: what one full reconcile pass of one Ready LiqoPeering costs the operator, with no other
LiqoPeering in the consumer and with N others there.

The duplicate check reads the shared informer of every LiqoPeering by its index of remote cluster IDs, so a
pass should read and take the same whatever N. The others sit in a namespace the operator does not watch
(it runs with --namespace): kopf reconciles none of them, while the cluster-wide informer of the duplicate
check holds them all, each with a remote cluster ID of its own in its status, as a Ready peering has.

A spec change is what makes a pass full (engine/kinds.py: "spec" rediscovers, the duplicate check
included) and bumps the generation, so that the pass always writes its status (observedGeneration): the
pass is timed from the spec write to that status write, both seen by the bench's watch. The Liqo stand-ins
are stopped (SIGSTOP) around each pass, so that the operator's requests counted are those of the pass only;
they run between passes, as their heartbeats must go on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from testenv import kube as k
from testenv.kube import Kube, Obj

from .common import LIQOPEERING
from .tracker import Predicate, State

OTHERS_NAMESPACE = "bench-others"
PASSES = 10
# spec.timeout, alternately: each write is a new generation. The scale part creates its LiqoPeerings with
# 30m, so the last of an even number of passes leaves it as it was.
TIMEOUTS = ("31m", "30m")
QUIET_SECONDS = 1.0  # the operator's request counts unchanged this long: what it was doing is over
SETTLE_LIMIT = 15.0  # ... or at most this long
PASS_LIMIT = 120.0  # a pass that has not written its status by then fails the run
# The stand-ins run this long before each pass: the virtual Node's heartbeats, and what they wake, go on.
GAP_SECONDS = 3.0
WORKERS = 4


@dataclass(frozen=True)
class PassCost:
    """``others`` LiqoPeerings in OTHERS_NAMESPACE before the operator starts; ``passes`` full passes timed."""

    others: int
    passes: int = PASSES


@dataclass(frozen=True)
class FullPass:
    seconds: float  # from the spec write to the status write of the pass it made
    requests: dict[str, int]  # the operator's on the consumer, by verb
    cpu_seconds: float  # the operator's CPU time over the pass (clock ticks: 10 ms steps)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Watched(Protocol):
    """What the pass loop needs of bench.tracker.Tracker."""

    def expect(self, name: str, predicate: Predicate) -> None: ...

    def wait(self, names: list[str], timeout: float) -> dict[str, float]: ...

    def snapshot(self) -> State: ...


def remote_id(index: int) -> str:
    return f"bench-other-{index:04d}-cluster-id"


def other(index: int) -> Obj:
    """A LiqoPeering that no pass of the operator ever reads: its kubeconfig Secret does not exist."""
    return {
        "apiVersion": LIQOPEERING.api_version,
        "kind": "LiqoPeering",
        "metadata": {"name": f"other-{index:04d}"},
        "spec": {"remoteKubeconfigSecretRef": {"name": f"other-{index:04d}-kubeconfig"}, "timeout": "30m"},
    }


def create_others(kube: Kube, count: int) -> None:
    """The namespace, then each LiqoPeering and its status's remote cluster ID (the status subresource: a
    create ignores the status), a few requests at a time."""
    kube.create(k.NAMESPACE, {"metadata": {"name": OTHERS_NAMESPACE}})

    def make(index: int) -> None:
        body = other(index)
        kube.create(LIQOPEERING, body, OTHERS_NAMESPACE)
        status = {"status": {"remoteClusterID": remote_id(index)}}
        kube.patch(LIQOPEERING, body["metadata"]["name"], status, OTHERS_NAMESPACE, sub="status")

    with ThreadPoolExecutor(WORKERS) as pool:
        for done in pool.map(make, range(count)):
            del done


def observed(key: str, generation: int) -> Predicate:
    """The LiqoPeering ``key`` ("namespace/name") has a status written for ``generation`` or later."""

    def reached(state: State) -> bool:
        obj = state.get(f"consumer/{LIQOPEERING.plural}", {}).get(key) or {}
        return int((obj.get("status") or {}).get("observedGeneration") or 0) >= generation

    return reached


def settled(count: Callable[[], Counter[str]]) -> Counter[str]:
    """The operator's request counts once they stay the same for QUIET_SECONDS (at most SETTLE_LIMIT)."""
    deadline = time.monotonic() + SETTLE_LIMIT
    last = count()
    while True:
        time.sleep(QUIET_SECONDS)
        now = count()
        if now == last or time.monotonic() > deadline:
            return now
        last = now


@contextlib.contextmanager
def stopped(groups: list[int]) -> Iterator[None]:
    """The process groups stopped (SIGSTOP) for the block, continued after it whatever happens."""
    for group in groups:
        os.killpg(group, signal.SIGSTOP)
    try:
        yield
    finally:
        for group in groups:
            os.killpg(group, signal.SIGCONT)


def measure(
    kube: Kube,
    tracker: Watched,
    namespace: str,
    name: str,
    passes: int,
    count: Callable[[], Counter[str]],
    cpu: Callable[[], float],
    pause: Callable[[], contextlib.AbstractContextManager[None]],
) -> list[FullPass]:
    """``passes`` full passes of the Ready LiqoPeering ``namespace/name``, one after the other, each made by a
    spec change once the last one's status is written and the operator is quiet. ``count``: the operator's
    requests on the consumer so far, by verb; ``cpu``: its CPU seconds so far; ``pause``: what keeps everyone
    else from waking it meanwhile (the stand-ins stopped)."""
    key = f"{namespace}/{name}"
    out = []
    for index in range(passes):
        time.sleep(GAP_SECONDS)
        with pause():
            before = settled(count)
            cpu_before = cpu()
            current = tracker.snapshot()[f"consumer/{LIQOPEERING.plural}"][key]
            generation = int(current["metadata"]["generation"]) + 1
            milestone = f"full pass {index + 1}"
            tracker.expect(milestone, observed(key, generation))  # before the write: its status may come first
            start = time.time()
            written = kube.patch(LIQOPEERING, name, {"spec": {"timeout": TIMEOUTS[index % 2]}}, namespace)
            if int(written["metadata"]["generation"]) != generation:
                raise RuntimeError(
                    f"LiqoPeering {key} changed meanwhile: generation {written['metadata']['generation']}"
                )
            done = tracker.wait([milestone], PASS_LIMIT)[milestone]
            after = settled(count)
            out.append(FullPass(done - start, dict(after - before), cpu() - cpu_before))
    return out

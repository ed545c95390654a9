"""`make soak`: many create/delete cycles of one LiqoPeering against the Liqo stand-in (docs/reliability.md, Soak).

    python -m bench.soak [--cycles 200] [--sample-every 10] [--out docs/soak.json]

Two local clusters with the stand-in, the operator as a process (production resync, 60 s). Each cycle
creates the LiqoPeering, waits for Ready, deletes it and waits until it is gone. Every few cycles the
operator's RSS, threads, open files and TCP connections are sampled, and the Liqo objects on both
clusters are counted. The verdict (printed, and in the JSON):
no object more after the last cycle than after the first (Liqo keeps the ForeignCluster after unpeering),
and nothing that grows without bound, judged on the second half of the run (the first half includes the
start-up's allocations). Not part of `make test`: it takes about as long as the whole suite.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from testenv import machine, procstat, reliability
from testenv.inventory import counts
from testenv.liqo_env.pytest_plugin import StandInProcess, with_liqo
from testenv.localk8s import start_clusters
from testenv.operator_support import SECRET, Peerings, api_client, install_crd

from .common import REPO, operator_version, start_operator
from .procs import exit_on_sigterm, log

NAMESPACE = "soak"
NAME = "provider"
# Growth allowed over the second half of the run: a little RSS (Python's allocator keeps arenas), no
# lasting threads or connections.
RSS_GROWTH_LIMIT_MB = 10.0
COUNT_GROWTH_LIMIT = 2


def growth(samples: list[dict[str, Any]], key: str) -> float:
    """How much a figure grew over the second half of the run: median of its last quarter minus median of
    its third quarter (medians, so one sample taken mid-request does not decide)."""
    values = [s[key] for s in samples]
    half = values[len(values) // 2 :]
    if len(half) < 4:
        return 0.0
    third, last = half[: len(half) // 2], half[len(half) // 2 :]
    return float(statistics.median(last) - statistics.median(third))


def run(cycles: int, sample_every: int, work: Path) -> dict[str, Any]:
    clusters = start_clusters(["soak-consumer", "soak-provider"], work)
    pair = {"consumer": clusters["soak-consumer"], "provider": clusters["soak-provider"]}
    standin = None
    operator = None
    try:
        lc = with_liqo(pair)
        standin = StandInProcess(lc, work / "liqo-standin.log")
        apis = {side: api_client(pair[side].kubeconfig) for side in pair}
        install_crd(apis["consumer"])
        operator = start_operator(Path(pair["consumer"].kubeconfig), work)
        pid = operator.proc.pid if operator.proc else 0
        peerings = Peerings(apis["consumer"])
        peerings.make_namespace(NAMESPACE)
        peerings.put_kubeconfig_secret(NAMESPACE, SECRET, Path(pair["provider"].kubeconfig).read_bytes())
        before = counts(apis)
        baseline: dict[str, dict[str, int]] = {}
        samples: list[dict[str, Any]] = []
        ready_s: list[float] = []
        gone_s: list[float] = []
        spec = {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "2m"}
        for cycle in range(1, cycles + 1):
            start = time.monotonic()
            peerings.create(NAMESPACE, NAME, spec)
            peerings.wait_status(NAMESPACE, NAME, "ready", timeout=120)
            ready_s.append(time.monotonic() - start)
            start = time.monotonic()
            peerings.delete(NAMESPACE, NAME)
            peerings.wait_gone(NAMESPACE, NAME, timeout=120)
            gone_s.append(time.monotonic() - start)
            if cycle == 1:
                # What a peering leaves by design (Liqo keeps the ForeignCluster after unpeering), against
                # which every later cycle is compared.
                baseline = counts(apis)
            if cycle % sample_every == 0 or cycle == cycles:
                sample = {"cycle": cycle, **procstat.sample(pid).to_json()}
                samples.append(sample)
                left = counts(apis)
                log(
                    f"cycle {cycle}/{cycles}: ready {ready_s[-1]:.1f}s, gone {gone_s[-1]:.1f}s,"
                    f" rss {sample['rss_mb']:.1f} MB, threads {sample['threads']}, fds {sample['open_fds']},"
                    f" tcp {sample['tcp_established']},"
                    f" liqo objects {left}"
                )
        left_over = counts(apis)
        return {
            "cycles": cycles,
            "operator": operator_version(),
            "objects_before_first_cycle": before,
            "baseline_objects": baseline,
            "objects_after": left_over,
            "samples": samples,
            "ready_seconds": _summary(ready_s),
            "unpeer_seconds": _summary(gone_s),
            "operator_alive": bool(operator.proc and operator.proc.poll() is None),
        }
    finally:
        if operator is not None:
            operator.stop()
        if standin is not None:
            standin.stop()
        for cluster in clusters.values():
            cluster.stop()


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 2),
        "p95": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 2),
        "max": round(ordered[-1], 2),
    }


def verdict(result: dict[str, Any]) -> dict[str, Any]:
    samples = result["samples"]
    grew = {key: round(growth(samples, key), 2) for key in ("rss_mb", "threads", "open_fds", "tcp_established")}
    problems = []
    if result["objects_after"] != result["baseline_objects"]:
        problems.append(f"objects left over: {result['objects_after']} (before: {result['baseline_objects']})")
    if grew["rss_mb"] > RSS_GROWTH_LIMIT_MB:
        problems.append(f"RSS grew {grew['rss_mb']} MB over the second half")
    for key in ("threads", "open_fds", "tcp_established"):
        if grew[key] > COUNT_GROWTH_LIMIT:
            problems.append(f"{key} grew by {grew[key]} over the second half")
    if not result["operator_alive"]:
        problems.append("the operator exited")
    return {"growth_second_half": grew, "problems": problems, "ok": not problems}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=200)
    p.add_argument("--sample-every", type=int, default=10)
    p.add_argument("--out", type=Path, default=REPO / "docs" / "soak.json")
    args = p.parse_args(argv)
    exit_on_sigterm()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        result = run(args.cycles, args.sample_every, Path(tmp))
    result["verdict"] = verdict(result)
    result["meta"] = {
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.time() - started),
        "machine": machine.record(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    reliability.render()
    print(json.dumps({k: result[k] for k in ("ready_seconds", "unpeer_seconds", "verdict")}, indent=1))
    return 0 if result["verdict"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

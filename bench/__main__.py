"""python -m bench [--runs N] [--scale 1,10,25,50] [--fleet 10] [--memory 5000] [--pass-cost 500] [--skip-real]
[--skip-scale] ...: see --help."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from testenv import machine

from . import page, real, report, scale
from .clutter import Clutter
from .common import load_average
from .procs import exit_on_sigterm, log

REPO = Path(__file__).resolve().parents[1]


# Where each installation's real-Liqo results go in the JSON: runs, summary, and the run's `meta`.
RESULT_KEYS = {
    "processes": ("real_runs", "real_summary", "meta"),
    "chart": ("real_chart_runs", "real_chart_summary", "real_chart_meta"),
}


def save(results: dict[str, Any], out: Path, meta: dict[str, Any], meta_keys: Sequence[str] = ("meta",)) -> None:
    """The results so far, the run's meta under each part it measured (``meta_keys``)."""
    git = ["git", "-C", str(REPO)]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    # Others may be editing the operator while this runs: say which version was measured.
    dirty = subprocess.run([*git, "status", "--porcelain", "operator"], capture_output=True, text=True).stdout
    run = {
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.time() - meta["started"]),
        "commit": commit.strip(),
        "operator_uncommitted_changes": dirty.split("\n")[:-1],
        "machine": machine.record(),
        "load_average_before": meta["load_average_before"],
        "load_average_after": load_average(),
        "args": meta["args"],
    }
    for key in meta_keys:
        results[key] = run
    results["targets"] = report.targets(
        results.get("real_summary"),
        results.get("scale_summary"),
        results.get("memory_summary"),
        results.get("real_chart_summary"),
        results.get("pass_cost_summary"),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description="How fast and how light the operator is.")
    p.add_argument("--runs", type=int, default=5, help="real-Liqo runs per contender (default 5)")
    p.add_argument("--scale", default="1,10,25,50", help="concurrent peerings per scale level (default 1,10,25,50)")
    p.add_argument("--idle-seconds", type=float, default=60.0, help="the quiet window at each scale level")
    p.add_argument("--skip-real", action="store_true", help="keep the real-Liqo results already in --out")
    p.add_argument("--skip-scale", action="store_true", help="keep the scale results already in --out")
    p.add_argument(
        "--fleet",
        type=int,
        default=10,
        help="the fleet row: this many peerings made by one LiqoPeeringSet, against as many LiqoPeerings, on"
        " the scale part's setup (default 10; 0 keeps the fleet results already in --out)",
    )
    p.add_argument(
        "--memory",
        type=int,
        default=0,
        help="the memory row: one peering on the scale part's setup, on an empty consumer and on one holding"
        " this many unrelated Deployments and as many unrelated Secrets (5000, say; default 0 keeps the memory"
        " results already in --out)",
    )
    p.add_argument(
        "--pass-cost",
        type=int,
        default=0,
        help="the pass-cost row: the full reconcile passes of one Ready peering on the scale part's setup, with no"
        " other LiqoPeering in the consumer and with this many in a namespace the operator does not watch (500,"
        " say; default 0 keeps the pass-cost results already in --out)",
    )
    p.add_argument(
        "--install",
        choices=sorted(real.INSTALLS),
        default="processes",
        help="how Liqo is installed for the real-Liqo runs: `processes` (default; its controllers as local "
        "processes, a data-plane stand-in) or `chart` (helm install of Liqo's chart on clusters with a real "
        "node each, real gateway Pods; needs hack/build-liqo-images.sh). The chart's results go under "
        "real_chart_* in --out, next to the others; it runs the real-Liqo part only (the scale part uses "
        "no real Liqo)",
    )
    p.add_argument("--out", type=Path, default=REPO / "docs" / "performance.json")
    p.add_argument("--plot", type=Path, default=REPO / "docs" / "performance.png")
    p.add_argument("--workdir", type=Path, default=None, help="where clusters and logs go (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the work directory afterwards, with the audit logs")
    p.add_argument(
        "--trace",
        action="store_true",
        help="real Liqo: also audit the contender's reads and write each run's request timeline (implies --keep; "
        "slows the contender down, so not for the headline numbers)",
    )
    args = p.parse_args(argv)
    levels = [int(x) for x in args.scale.split(",") if x]
    args.keep = args.keep or args.trace
    runs_key, summary_key, meta_key = RESULT_KEYS[args.install]
    if args.install != "processes":
        args.skip_scale = True
    # The run's meta goes with each part it measured, from the part's start: the real-Liqo and scale parts
    # share one, the others have one each.
    meta_keys = [] if args.skip_real and args.skip_scale else [meta_key]

    exit_on_sigterm()
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    work = Path(tempfile.mkdtemp(prefix="liqo-bench-", dir=args.workdir))
    meta = {
        "started": time.time(),
        "load_average_before": load_average(),
        "args": " ".join(sys.argv[1:] if argv is None else argv),
    }
    try:
        # Saved after every run and level: a failure (or Ctrl-C) late in an hour-long run keeps the rest.
        if not args.skip_real:
            results[runs_key] = []
            for run in real.run_all(args.runs, work, args.keep, args.trace, args.install):
                results[runs_key].append(run.to_json())
                results[summary_key] = report.summarize_real(results[runs_key])
                save(results, args.out, meta, meta_keys)
        if not args.skip_scale:
            results["scale_runs"] = []
            for level in scale.run_all(levels, work, args.idle_seconds, args.keep):
                results["scale_runs"].append(level.to_json())
                results["scale_summary"] = report.summarize_scale(results["scale_runs"])
                save(results, args.out, meta, meta_keys)
        if args.fleet and args.install == "processes":
            # Back to back, so that the same load hits both ways of making N peerings.
            meta_keys.append("fleet_meta")
            results["fleet_runs"] = []
            for via_set in (False, True):
                fleet_run = scale.run_level(args.fleet, work, args.idle_seconds, args.keep, via_set=via_set)
                results["fleet_runs"].append(fleet_run.to_json())
                results["fleet_summary"] = report.summarize_fleet(results["fleet_runs"])
                save(results, args.out, meta, meta_keys)
        if args.memory and args.install == "processes":
            meta_keys.append("memory_meta")
            results["memory_runs"] = []
            clutter = Clutter(args.memory, args.memory)
            for memory_run in scale.run_memory(clutter, work, min(args.idle_seconds, 30.0), args.keep):
                results["memory_runs"].append(memory_run.to_json())
                results["memory_summary"] = report.summarize_memory(results["memory_runs"])
                save(results, args.out, meta, meta_keys)
        if args.pass_cost and args.install == "processes":
            meta_keys.append("pass_cost_meta")
            results["pass_cost_runs"] = []
            for pass_run in scale.run_pass_cost(args.pass_cost, work, min(args.idle_seconds, 30.0), args.keep):
                results["pass_cost_runs"].append(pass_run.to_json())
                results["pass_cost_summary"] = report.summarize_pass_cost(results["pass_cost_runs"])
                save(results, args.out, meta, meta_keys)
    except KeyboardInterrupt:
        log("interrupted: everything started has been stopped")
        return 130
    finally:
        if args.keep:
            log(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    save(results, args.out, meta, meta_keys)
    report.plot(results, args.plot)
    page.write(results, args.out.with_suffix(".md"))
    print(report.console(results))
    log(f"results: {args.out}, plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

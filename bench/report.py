"""Medians, ratios, percentiles and the targets' verdicts from the raw runs; the PNG; the console table."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Run = dict[str, Any]

# The targets the benchmark checks (docs/performance.md, Targets).
TARGET_M2_RATIO = 0.5
TARGET_M3_AFTER_M2 = 1.0
TARGET_REACTION_P50 = 0.100
TARGET_REACTION_P95 = 0.500
TARGET_SCALE_RATIO = 3.0
TARGET_RSS_MB = 120.0
TARGET_IDLE_CPU = 1.0
# The memory row: RSS at rest with the consumer full of objects no peering concerns, against an empty one.
TARGET_MEMORY_RATIO = 1.1
# Unpeering on Liqo's chart: at or below `liqoctl unpeer`'s, medians of the same alternating runs.
TARGET_DELETE_RATIO = 1.0
# On Liqo's chart, the same alternating runs: the virtual node usable sooner, reactions, and no more API
# requests than `liqoctl peer` makes while establishing, on each cluster.
TARGET_CHART_M2_RATIO = 0.4
TARGET_CHART_REACTION_P50 = 0.050
TARGET_CHART_REACTION_P95 = 0.200
TARGET_CHART_REQUESTS_RATIO = 1.0
# The pass-cost row: a full pass's requests with N other LiqoPeerings in the cluster, against with none.
TARGET_PASS_REQUESTS_RATIO = 1.0


def percentile(values: Iterable[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None for no values."""
    data = sorted(values)
    if not data:
        return None
    pos = (len(data) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def median(values: Iterable[float | None]) -> float | None:
    data = [v for v in values if v is not None]
    return statistics.median(data) if data else None


def _of(runs: list[Run], contender: str) -> list[Run]:
    return [r for r in runs if r["contender"] == contender]


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _requests(runs: list[Run], key: str) -> dict[str, dict[str, float | None]]:
    """Median count per side and verb, and per side in total."""
    out: dict[str, dict[str, float | None]] = {}
    for side in ("consumer", "provider"):
        verbs = sorted({v for r in runs for v in r[key].get(side, {})})
        out[side] = {v: median(r[key].get(side, {}).get(v, 0) for r in runs) for v in verbs}
        out[side]["total"] = median(sum(r[key].get(side, {}).values()) for r in runs)
    return out


def summarize_real(runs: list[Run]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "runs_per_contender": len(_of(runs, "operator")),
        "operator_versions": sorted({r.get("operator_version", "") for r in _of(runs, "operator")}),
    }
    for contender in ("liqoctl", "operator"):
        mine = _of(runs, contender)
        fields = ("m1", "m2", "m2_event", "m3", "returned", "vk_pod_ready", "first_write", "delete", "unpeer_returned")
        s: dict[str, Any] = {f: median(r[f] for r in mine) for f in fields}
        s["m3_minus_m2"] = median(r["m3"] - r["m2"] for r in mine if r["m3"] is not None)
        # The operator's own share: from the later of its two prerequisites (Node Ready, virtual-kubelet Pod
        # Ready, the latter written by the test harness) to its Ready.
        s["m3_minus_prerequisites"] = median(
            r["m3"] - max(r["m2"], r["vk_pod_ready"] or 0) for r in mine if r["m3"] is not None
        )
        reactions = [x["seconds"] for r in mine for x in r["reactions"]]
        s["reaction_p50"] = percentile(reactions, 50)
        s["reaction_p95"] = percentile(reactions, 95)
        s["reaction_max"] = max(reactions) if reactions else None
        steps = sorted({x["step"] for r in mine for x in r["reactions"]})
        s["reaction_by_step"] = {
            step: median(x["seconds"] for r in mine for x in r["reactions"] if x["step"] == step) for step in steps
        }
        s["requests"] = _requests(mine, "requests")
        s["delete_requests"] = _requests(mine, "delete_requests")
        out[contender] = s
    op, ctl = out["operator"], out["liqoctl"]
    out["ratio_operator_to_liqoctl"] = {
        "m1": _ratio(op["m1"], ctl["m1"]),
        "m2": _ratio(op["m2"], ctl["m2"]),
        "delete": _ratio(op["delete"], ctl["delete"]),
        "requests_consumer": _ratio(op["requests"]["consumer"]["total"], ctl["requests"]["consumer"]["total"]),
        "requests_provider": _ratio(op["requests"]["provider"]["total"], ctl["requests"]["provider"]["total"]),
        # liqoctl has no M3: the LiqoPeering's Ready against liqoctl's usable virtual node.
        "m3_to_liqoctl_m2": _ratio(op["m3"], ctl["m2"]),
    }
    # The machine's 1-minute load average as each run started (runs recorded before it was kept have none).
    loads = [r["load_average"][0] for r in runs if r.get("load_average")]
    if loads:
        out["load_average_1m"] = {"median": median(loads), "min": min(loads), "max": max(loads)}
    pair_up = [r["pair_timings"]["pair"] for r in runs if (r.get("pair_timings") or {}).get("pair") is not None]
    if pair_up:
        out["pair_up_median"] = median(pair_up)
    return out


def _per_min(counts: dict[str, int] | int | None, seconds: float) -> float | None:
    if counts is None or not seconds:
        return None
    total = counts if isinstance(counts, int) else sum(counts.values())
    return 60 * total / seconds


def summarize_scale(levels: list[Run]) -> list[dict[str, Any]]:
    one = next((lv["all_ready"] for lv in levels if lv["peerings"] == 1), None)
    rows = []
    for lv in sorted(levels, key=lambda x: x["peerings"]):
        rows.append(
            {
                "peerings": lv["peerings"],
                "all_ready": lv["all_ready"],
                "vs_one": _ratio(lv["all_ready"], one),
                "median_ready": median(lv["ready_times"]),
                "busy_cpu_percent": lv["busy_cpu_percent"],
                "busy_cpu_seconds": lv["busy_cpu_seconds"],
                "rss_mb": lv["at_rest"]["rss_mb"],
                "peak_rss_mb": lv["at_rest"]["peak_rss_mb"],
                "threads": lv["at_rest"]["threads"],
                "open_fds": lv["at_rest"]["open_fds"],
                "tcp_established": lv["at_rest"]["tcp_established"],
                "idle_cpu_percent": lv["idle_cpu_percent"],
                "reaction_p50": percentile(lv.get("reactions", []), 50),
                "reaction_p95": percentile(lv.get("reactions", []), 95),
                "standin_p50": percentile(lv.get("standin_turns", []), 50),
                "standin_p95": percentile(lv.get("standin_turns", []), 95),
                "cpu_while_establishing": lv["cpu_while_establishing"],
                "writes_at_rest": sum(lv["writes_at_rest"].values()),
                # What goes on at rest: the operator's requests on the consumer, and the others' writes there
                # (each may wake a peering), per minute.
                "requests_at_rest_per_min": _per_min(lv.get("requests_at_rest"), lv["idle_seconds"]),
                "others_writes_at_rest_per_min": _per_min(lv.get("others_writes_at_rest"), lv["idle_seconds"]),
                "still_cpu_percent": lv.get("still_cpu_percent"),
                "requests_still_per_min": _per_min(lv.get("requests_still"), lv.get("still_seconds", 0)),
                "machine_busy_percent": lv["machine_busy_percent"],
            }
        )
    return rows


def summarize_fleet(runs: list[Run]) -> list[dict[str, Any]]:
    """The fleet rows: N peerings as N LiqoPeerings, and through one LiqoPeeringSet (summarize_scale's
    columns, plus how they were made and the operator's requests on the consumer while establishing)."""
    rows = []
    for run in runs:
        (row,) = summarize_scale([run])
        row["via"] = run.get("via", "LiqoPeerings")
        row["requests_establishing"] = sum((run.get("requests_establishing") or {}).values())
        rows.append(row)
    return rows


def summarize_memory(runs: list[Run]) -> list[dict[str, Any]]:
    """The memory rows: one peering on an empty consumer and on one full of unrelated objects (summarize_scale's
    columns, plus how many objects, the bytes the operator read, and the RSS against the empty consumer's)."""
    rows = []
    for run in runs:
        (row,) = summarize_scale([run])
        row["clutter"] = run.get("clutter") or {}
        row["operator_read_mb"] = run.get("operator_read_mb")
        rows.append(row)
    empty = next((row["rss_mb"] for row in rows if not any(row["clutter"].values())), None)
    for row in rows:
        row["rss_vs_empty"] = _ratio(row["rss_mb"], empty)
    return rows


def summarize_pass_cost(runs: list[Run]) -> list[dict[str, Any]]:
    """The pass-cost rows, one per run: how many other LiqoPeerings the cluster held, and over its full passes
    the operator's requests on the consumer (median per verb, and in total), the lists among them (all
    passes), the pass's time and CPU; the requests and time against the run with no others."""
    rows = []
    for run in runs:
        passes = run.get("full_passes") or []
        verbs = sorted({verb for p in passes for verb in p["requests"]})
        seconds = [p["seconds"] for p in passes]
        rows.append(
            {
                "others": run.get("others", 0),
                "passes": len(passes),
                "requests": {verb: median(p["requests"].get(verb, 0) for p in passes) for verb in verbs},
                "requests_total": median(sum(p["requests"].values()) for p in passes),
                "list_requests": sum(p["requests"].get("list", 0) for p in passes),
                "pass_p50": percentile(seconds, 50),
                "pass_p95": percentile(seconds, 95),
                # The mean: /proc counts CPU in clock ticks (10 ms), coarse for one pass.
                "cpu_mean": sum(p["cpu_seconds"] for p in passes) / len(passes) if passes else None,
                "rss_mb": (run.get("at_rest") or {}).get("rss_mb"),
            }
        )
    none = next((row for row in rows if not row["others"]), None)
    for row in rows:
        row["requests_vs_none"] = _ratio(row["requests_total"], none["requests_total"] if none else None)
        row["time_vs_none"] = _ratio(row["pass_p50"], none["pass_p50"] if none else None)
    return rows


def targets(
    real: dict[str, Any] | None,
    scale: list[dict[str, Any]] | None,
    memory: list[dict[str, Any]] | None = None,
    chart: dict[str, Any] | None = None,
    pass_cost: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Each target: the measured value and whether it was met (None when not measured)."""
    out: list[dict[str, Any]] = []

    def add(name: str, value: float | None, limit: float, unit: str, below: bool = True) -> None:
        met = None if value is None else (value <= limit if below else value >= limit)
        out.append({"target": name, "value": value, "limit": limit, "unit": unit, "met": met})

    if real:
        op = real["operator"]
        add("M2 <= 0.5x liqoctl's M2", real["ratio_operator_to_liqoctl"]["m2"], TARGET_M2_RATIO, "x")
        add("M3 within 1 s of M2", op["m3_minus_m2"], TARGET_M3_AFTER_M2, "s")
        add("reaction p50 < 100 ms", op["reaction_p50"], TARGET_REACTION_P50, "s")
        add("reaction p95 < 500 ms", op["reaction_p95"], TARGET_REACTION_P95, "s")
    if chart:
        ratios, op = chart["ratio_operator_to_liqoctl"], chart["operator"]
        add("M2 <= 0.4x liqoctl's M2 on Liqo's chart", ratios["m2"], TARGET_CHART_M2_RATIO, "x")
        add("reaction p50 <= 50 ms on Liqo's chart", op["reaction_p50"], TARGET_CHART_REACTION_P50, "s")
        add("reaction p95 <= 200 ms on Liqo's chart", op["reaction_p95"], TARGET_CHART_REACTION_P95, "s")
        for side in ("consumer", "provider"):
            add(
                f"requests on the {side} while establishing <= liqoctl's on Liqo's chart",
                ratios.get(f"requests_{side}"),
                TARGET_CHART_REQUESTS_RATIO,
                "x",
            )
        add("delete <= liqoctl's delete on Liqo's chart", ratios["delete"], TARGET_DELETE_RATIO, "x")
    if scale:
        by_n = {row["peerings"]: row for row in scale}
        top = by_n[max(by_n)]
        add(f"{top['peerings']} peerings Ready in < 3x one", top["vs_one"], TARGET_SCALE_RATIO, "x")
        add(f"RSS < 120 MB at {top['peerings']} peerings", top["rss_mb"], TARGET_RSS_MB, "MB")
        for n in sorted({min(by_n), max(by_n)}):
            add(f"idle CPU < 1 % with {n} Ready", by_n[n]["idle_cpu_percent"], TARGET_IDLE_CPU, "%")
        for n in sorted({min(by_n), max(by_n)}):
            add(f"0 writes at rest with {n} Ready", by_n[n]["writes_at_rest"], 0, "writes")
    for row in memory or []:
        objects = row["clutter"]
        if any(objects.values()):
            add(
                f"RSS with {objects.get('deployments', 0)} Deployments and {objects.get('secrets', 0)} Secrets"
                f" unrelated <= {TARGET_MEMORY_RATIO}x an empty consumer's",
                row["rss_vs_empty"],
                TARGET_MEMORY_RATIO,
                "x",
            )
    for row in pass_cost or []:
        if row["others"]:
            add(
                f"requests per full pass with {row['others']} other LiqoPeerings <= with none",
                row["requests_vs_none"],
                TARGET_PASS_REQUESTS_RATIO,
                "x",
            )
    return out


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def _real_table(real: dict[str, Any], title: str) -> list[str]:
    op, ctl, ratio = real["operator"], real["liqoctl"], real["ratio_operator_to_liqoctl"]
    lines = [
        f"{title}, medians of {real['runs_per_contender']} runs per contender (seconds):",
        "",
        "| | liqoctl | operator | operator/liqoctl |",
        "| --- | --- | --- | --- |",
        f"| M1 slice Authentication=Accepted | {_fmt(ctl['m1'])} | {_fmt(op['m1'])} | {_fmt(ratio['m1'])} |",
        f"| `liqoctl peer` returned | {_fmt(ctl['returned'])} | | |",
        f"| M2 virtual node Ready | {_fmt(ctl['m2'])} | {_fmt(op['m2'])} | {_fmt(ratio['m2'])} |",
        f"| M3 LiqoPeering Ready | | {_fmt(op['m3'])} | |",
        f"| M3 - M2 | | {_fmt(op['m3_minus_m2'])} | |",
        f"| delete -> all gone | {_fmt(ctl['delete'])} | {_fmt(op['delete'])} | {_fmt(ratio['delete'])} |",
        f"| reaction p50 | {_fmt(ctl['reaction_p50'], 3)} | {_fmt(op['reaction_p50'], 3)} | |",
        f"| reaction p95 | {_fmt(ctl['reaction_p95'], 3)} | {_fmt(op['reaction_p95'], 3)} | |",
        "",
        "Requests per peering while establishing, median (consumer / provider):",
        "",
        "| verb | liqoctl | operator |",
        "| --- | --- | --- |",
    ]
    seen = {v for c in (op, ctl) for side in ("consumer", "provider") for v in c["requests"][side]}
    verbs = [*sorted(seen - {"total"}), "total"]
    for verb in verbs:
        cells = []
        for c in (ctl, op):
            req = c["requests"]
            cells.append(f"{_fmt(req['consumer'].get(verb, 0), 0)} / {_fmt(req['provider'].get(verb, 0), 0)}")
        lines.append(f"| {verb} | {cells[0]} | {cells[1]} |")
    lines.append("")
    return lines


def console(results: dict[str, Any]) -> str:
    """The numbers, as markdown tables (what docs/performance.md quotes)."""
    lines: list[str] = []
    if results.get("real_summary"):
        lines += _real_table(results["real_summary"], "Real Liqo v1.2.0 (its controllers as processes)")
    if results.get("real_chart_summary"):
        title = "Real Liqo v1.2.0 installed by its Helm chart (real node, real gateway Pods)"
        lines += _real_table(results["real_chart_summary"], title)
    scale = results.get("scale_summary")
    if scale:
        lines += [
            "Scale (stand-in Liqo, light providers): establishing, and the operator's footprint at rest",
            "",
            "| peerings | all Ready (s) | vs one | median Ready (s) | operator CPU establishing "
            "| operator reaction p50 / p95 (ms) | stand-in answer p50 / p95 (ms) | RSS MB (peak) | threads | fds "
            "| TCP conns |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for row in scale:
            lines.append(
                f"| {row['peerings']} | {_fmt(row['all_ready'], 1)} | {_fmt(row['vs_one'])} "
                f"| {_fmt(row['median_ready'], 1)} | {_fmt(row['busy_cpu_percent'], 0)} % "
                f"| {_ms(row['reaction_p50'])} / {_ms(row['reaction_p95'])} "
                f"| {_ms(row['standin_p50'])} / {_ms(row['standin_p95'])} "
                f"| {_fmt(row['rss_mb'], 0)} ({_fmt(row['peak_rss_mb'], 0)}) | {row['threads']} | {row['open_fds']} "
                f"| {row['tcp_established']} |"
            )
        lines += [
            "",
            "At rest, all Ready:",
            "",
            "| peerings | idle CPU | operator writes | operator requests /min | others' writes /min "
            "| idle CPU, stand-ins stopped | operator requests /min, stand-ins stopped |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for row in scale:
            lines.append(
                f"| {row['peerings']} | {_fmt(row['idle_cpu_percent'])} % | {row['writes_at_rest']} "
                f"| {_fmt(row['requests_at_rest_per_min'], 0)} | {_fmt(row['others_writes_at_rest_per_min'], 0)} "
                f"| {_fmt(row['still_cpu_percent'])} % | {_fmt(row['requests_still_per_min'], 0)} |"
            )
        lines.append("")
    fleet = results.get("fleet_summary")
    if fleet:
        lines += [
            "Fleet: N peerings through one LiqoPeeringSet, against N LiqoPeerings (stand-in Liqo, light providers)",
            "",
            "| made by | peerings | all Ready (s) | median Ready (s) | operator CPU-s establishing "
            "| operator requests establishing | RSS MB | idle CPU | operator writes at rest |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for row in fleet:
            lines.append(
                f"| {row['via']} | {row['peerings']} | {_fmt(row['all_ready'], 1)} | {_fmt(row['median_ready'], 1)} "
                f"| {_fmt(row['busy_cpu_seconds'], 1)} | {row['requests_establishing']} | {_fmt(row['rss_mb'], 0)} "
                f"| {_fmt(row['idle_cpu_percent'])} % | {row['writes_at_rest']} |"
            )
        lines.append("")
    memory = results.get("memory_summary")
    if memory:
        title = "Memory: one peering, the consumer empty or full of unrelated objects"
        lines += [title, "", *memory_table(memory), ""]
    pass_cost = results.get("pass_cost_summary")
    if pass_cost:
        title = "Pass cost: one peering's full reconcile pass, with and without other LiqoPeerings in the cluster"
        lines += [title, "", *pass_cost_table(pass_cost), ""]
    if results.get("targets"):
        lines += ["| target | measured | met |", "| --- | --- | --- |"]
        for t in results["targets"]:
            met = {True: "yes", False: "**no**", None: "not measured"}[t["met"]]
            lines.append(f"| {t['target']} | {_fmt(t['value'], 3)} {t['unit']} | {met} |")
    return "\n".join(lines)


def memory_table(memory: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| unrelated Deployments | unrelated Secrets | RSS MB at rest | vs empty | peak RSS MB "
        "| MB the operator read | Ready after (s) | idle CPU |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in memory:
        objects = row["clutter"]
        lines.append(
            f"| {objects.get('deployments', 0)} | {objects.get('secrets', 0)} | {_fmt(row['rss_mb'], 1)} "
            f"| {_fmt(row['rss_vs_empty'])}x | {_fmt(row['peak_rss_mb'], 1)} | {_fmt(row['operator_read_mb'], 1)} "
            f"| {_fmt(row['all_ready'], 1)} | {_fmt(row['idle_cpu_percent'])} % |"
        )
    return lines


def pass_cost_table(pass_cost: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| other LiqoPeerings present | full passes | requests per full pass (consumer, by verb, median) "
        "| list requests, all passes | pass time p50 / p95 (ms) | operator CPU per pass, mean (ms) | RSS MB at rest |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in pass_cost:
        verbs = ", ".join(f"{verb} {_fmt(n, 0)}" for verb, n in row["requests"].items() if n)
        lines.append(
            f"| {row['others']} | {row['passes']} | {verbs or '-'} ({_fmt(row['requests_total'], 0)} in all) "
            f"| {row['list_requests']} | {_ms(row['pass_p50'])} / {_ms(row['pass_p95'])} | {_ms(row['cpu_mean'])} "
            f"| {_fmt(row['rss_mb'], 0)} |"
        )
    return lines


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display here
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    real_runs = results.get("real_runs") or []
    ax = axes[0][0]
    metrics = [
        ("m1", "M1\nslice accepted"),
        ("m2", "M2\nnode Ready"),
        ("m3", "M3\nLiqoPeering Ready"),
        ("delete", "delete\n(all gone)"),
    ]
    chart_runs = results.get("real_chart_runs") or []
    # With the chart installation's runs too: four bars per metric, the chart's hatched.
    series = [(real_runs, "liqoctl", "tab:gray", "", ""), (real_runs, "operator", "tab:blue", "", "")]
    if chart_runs:
        series = [(runs, who, color, hatch, " (processes)") for runs, who, color, hatch, _ in series]
        series += [
            (chart_runs, "liqoctl", "tab:gray", "//", " (Liqo's chart)"),
            (chart_runs, "operator", "tab:blue", "//", " (Liqo's chart)"),
        ]
        offsets, width = [-0.3, -0.1, 0.1, 0.3], 0.19
    else:
        offsets, width = [-0.2, 0.2], 0.38
    for offset, (runs, contender, color, hatch, suffix) in zip(offsets, series, strict=True):
        mine = _of(runs, contender)
        for i, (field, _) in enumerate(metrics):
            values = [r[field] for r in mine if r.get(field) is not None]
            if values:
                label = contender + suffix if i == 0 else None
                ax.bar(i + offset, statistics.median(values), width, color=color, hatch=hatch, label=label)
                ax.plot([i + offset] * len(values), values, "k.", markersize=4)
    ax.set_xticks(range(len(metrics)), [label for _, label in metrics])
    ax.set_ylabel("seconds (bars: median, dots: runs)")
    ax.set_title("Real Liqo v1.2.0, fresh clusters per run")
    ax.legend(fontsize=8 if chart_runs else None)

    ax = axes[0][1]
    summary = results.get("real_summary") or {}
    steps = sorted((summary.get("operator") or {}).get("reaction_by_step", {}))
    for offset, contender, color in ((-0.2, "liqoctl", "tab:gray"), (0.2, "operator", "tab:blue")):
        by_step = (summary.get(contender) or {}).get("reaction_by_step", {})
        ax.barh(
            [i + offset for i in range(len(steps))],
            [1000 * (by_step.get(s) or 0) for s in steps],
            0.38,
            color=color,
            label=contender,
        )
    ax.axvline(100, color="tab:green", linestyle="--", label="p50 target")
    ax.axvline(500, color="tab:red", linestyle="--", label="p95 target")
    ax.set_yticks(range(len(steps)), [s.split(" after ")[0] for s in steps])
    ax.set_xlabel("ms from prerequisite to next write (median)")
    ax.set_title("Reaction latency, from the audit logs")
    ax.legend(fontsize=8)

    rows = results.get("scale_summary") or []
    ns = [r["peerings"] for r in rows]
    ax = axes[1][0]
    ax.plot(ns, [r["all_ready"] for r in rows], "o-", label="all Ready")
    ax.plot(ns, [r["median_ready"] for r in rows], "s--", label="median Ready")
    if rows:
        ax.plot(ns, [TARGET_SCALE_RATIO * rows[0]["all_ready"]] * len(ns), ":", color="tab:red", label="3x one")
    ax.set_xticks(ns)
    ax.set_xlabel("concurrent peerings")
    ax.set_ylabel("seconds")
    ax.set_title("Scale: time to Ready (stand-in Liqo)")
    ax.legend()

    ax = axes[1][1]
    ax.plot(ns, [r["rss_mb"] for r in rows], "o-", color="tab:purple", label="RSS at rest (MB)")
    ax.axhline(TARGET_RSS_MB, color="tab:purple", linestyle=":")
    ax.set_ylim(0, max([TARGET_RSS_MB * 1.2, *(r["rss_mb"] * 1.1 for r in rows)]))
    ax.set_xticks(ns)
    ax.set_xlabel("concurrent peerings")
    ax.set_ylabel("MB")
    twin = ax.twinx()
    twin.plot(ns, [r["idle_cpu_percent"] for r in rows], "s-", color="tab:orange", label="idle CPU (%)")
    twin.axhline(TARGET_IDLE_CPU, color="tab:orange", linestyle=":")
    twin.set_ylim(0, max([TARGET_IDLE_CPU * 2, *(r["idle_cpu_percent"] * 1.2 for r in rows)]))
    twin.set_ylabel("% of one core")
    ax.set_title("Scale: operator memory and idle CPU (dotted: targets)")
    handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    ax.legend(handles, [str(h.get_label()) for h in handles], loc="upper left")

    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)

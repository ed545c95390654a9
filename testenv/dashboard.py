"""The chart's Grafana dashboard outside Grafana: its panels' queries made plain PromQL (Grafana's interval
variables and template variables replaced as Grafana replaces them), and the panels drawn with matplotlib
from Prometheus's query_range results (docs/operations/dashboard.png)."""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Grafana's built-in interval variables, as $__name or ${__name}.
_BUILTIN = re.compile(r"\$(?:__(rate_interval|interval|range)\b|\{__(rate_interval|interval|range)\})")


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel with queries, those of collapsed rows too, in the dashboard's order."""
    for panel in dashboard["panels"]:
        for p in (panel, *panel.get("panels", [])):
            if p.get("targets"):
                yield p


def rate_interval(step: float, scrape_interval: float) -> float:
    """Grafana's $__rate_interval: max($__interval + scrape interval, 4 * scrape interval)."""
    return max(step + scrape_interval, 4 * scrape_interval)


def promql(expr: str, ranges: dict[str, float], variables: dict[str, str]) -> str:
    """The panel's expression as Grafana sends it: $__range, $__interval and $__rate_interval as whole
    seconds (`ranges`, by name without the underscores), template variables ($job, ${job}) as their value."""
    text = _BUILTIN.sub(lambda m: f"{math.ceil(ranges[m.group(1) or m.group(2)])}s", expr)
    for name, value in variables.items():
        text = _substitute(text, name, value)
    return text


def _substitute(text: str, name: str, value: str) -> str:
    return re.sub(rf"\$(?:{name}\b|\{{{name}\}})", lambda _m: value, text)


def legend(template: str | None, metric: dict[str, str]) -> str:
    """A series' name by the target's legendFormat ({{label}}), or its labels."""
    if template:
        return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), template)
    return ", ".join(f"{k}={v}" for k, v in sorted(metric.items()) if k != "__name__") or "value"


@dataclass
class Series:
    name: str
    times: list[float]  # Unix seconds
    values: list[float]
    labels: dict[str, str] | None = None  # a query without legendFormat: its labels, for a shorter name


def short_names(lines: list[Series]) -> list[str]:
    """Names for a chart's legend: a series named by its labels is named by those that differ between the
    chart's series (all of them when one series alone has labels)."""
    labelled = [s.labels for s in lines if s.labels]
    varying = {key for labels in labelled for key in labels if len({str(o.get(key)) for o in labelled}) > 1}
    return [
        ", ".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if k in varying) or s.name
        if s.labels and varying
        else s.name
        for s in lines
    ]


def series(result: list[dict[str, Any]], template: str | None) -> list[Series]:
    """A query_range result (a matrix) as named series."""
    return [
        Series(
            legend(template, item["metric"]),
            [float(t) for t, _ in item["values"]],
            [float(v) for _, v in item["values"]],
            None if template else {k: v for k, v in item["metric"].items() if k != "__name__"},
        )
        for item in result
    ]


def draw(
    dashboard: dict[str, Any],
    data: dict[int, list[Series]],
    notes: dict[int, str],
    path: Path,
    caption: str,
    span: tuple[float, float],
    shaded: tuple[float, float] | None = None,
) -> None:
    """One small chart per panel (by panel id: its series in `data`, or the reason it has none in `notes`),
    three to a row, titled as in the dashboard, over the time `span` (Unix seconds, from and to), written to
    `path` as a PNG; `shaded` marks a time span on every chart."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    shown = list(panels(dashboard))
    columns = 3
    rows = math.ceil(len(shown) / columns)

    def when(t: float) -> datetime:
        return datetime.fromtimestamp(t, UTC)

    fig, axes = plt.subplots(rows, columns, figsize=(15, 2.8 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, shown, strict=False):
        ax.set_title(panel["title"], fontsize=10)
        ax.tick_params(labelsize=7)
        lines = data.get(panel["id"]) or []
        for s, name in zip(lines, short_names(lines), strict=True):
            ax.plot([when(t) for t in s.times], s.values, label=textwrap.shorten(name, 60), linewidth=1.2)
        if lines:
            if shaded is not None:
                ax.axvspan(when(shaded[0]), when(shaded[1]), color="tab:red", alpha=0.12)
            ax.set_xlim(when(span[0]), when(span[1]))
            ax.xaxis.set_major_locator(mdates.AutoDateLocator(maxticks=5))
            ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=UTC))
            ax.legend(fontsize=6, loc="upper left")
        else:
            ax.set_xticks([])
            ax.set_yticks([])
            note = textwrap.fill(notes.get(panel["id"], "no data"), 45)
            ax.text(0.5, 0.5, note, ha="center", va="center", fontsize=8)
    for ax in list(axes.flat)[len(shown) :]:
        ax.axis("off")
    fig.suptitle(caption, fontsize=11)
    fig.subplots_adjust(left=0.04, right=0.99, bottom=0.03, top=0.95, hspace=0.45, wspace=0.15)
    fig.savefig(path, dpi=80)
    plt.close(fig)

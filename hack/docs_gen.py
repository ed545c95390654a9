#!/usr/bin/env python3
"""The generated tables of the docs: the operator's flags and the Helm chart's values.

* ``docs/operations/configuration.md``: every flag of ``liqo-peering-operator run`` (from
  ``liqo_peering.cli.build_parser``, with the chart value that sets it, read from the Deployment template)
  and every chart value;
* ``deploy/helm/liqo-peering-operator/README.md``: every chart value, helm-docs style;
* ``docs/reference/liqopeering.md``: each Liqo version the suite runs and how (from ``hack/versions.env``:
  LIQO_VERSION runs the whole real-Liqo suite, each of LIQO_MATRIX the matrix tier), so that the table claims
  only what runs (README's compatibility table names the same versions: tests/unit/test_docs_generated.py).

A chart value is a key of ``values.yaml`` with a ``# --`` comment above it (its description, continued by
the comment lines that follow), or a leaf under keys without one. Each table sits between
``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->`` in its page; the text around it is
written by hand.

``hack/gen-docs.py`` (``make generate``) rewrites the tables; ``--check`` exits 1 naming each stale
page. ``tests/unit/test_docs_generated.py`` fails on drift too, and on a value without a description.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CHART = Path("deploy") / "helm" / "liqo-peering-operator"
VALUES = CHART / "values.yaml"
DEPLOYMENT = CHART / "templates" / "deployment.yaml"
CHART_README = CHART / "README.md"
CONFIGURATION = Path("docs") / "operations" / "configuration.md"
LIQOPEERING = Path("docs") / "reference" / "liqopeering.md"
VERSIONS_ENV = Path("hack") / "versions.env"

_KEY = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z0-9_.-]+):(\s|$)")
_VALUES_REF = re.compile(r"\.Values\.([A-Za-z0-9_.]+)")
_BLOCK_OPEN = re.compile(r"\{\{-?\s*(if|range|with)\b")
_BLOCK_END = re.compile(r"\{\{-?\s*end\b")
_FLAG = re.compile(r"^\s*-\s+--(?:no-)?([a-z0-9-]+)")


@dataclass(frozen=True)
class Value:
    """One chart value: its dotted key, its default and its description."""

    key: str
    default: Any
    description: str


@dataclass(frozen=True)
class Flag:
    """One flag of ``liqo-peering-operator run``."""

    names: tuple[str, ...]
    argument: str  # what follows the flag, or "" for a switch
    default: str
    help: str
    chart: tuple[str, ...]  # the chart values that set it


# -- values.yaml --------------------------------------------------------------------------------------------
def value_comments(text: str) -> dict[str, str]:
    """The ``# --`` comment above each key of a values file, by dotted key, its lines joined."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    comment: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped[1:])
            continue
        match = _KEY.match(line)
        if match is None:
            comment = []  # a blank line or a list item ends a comment
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        described = _described(comment)
        if described:
            found[".".join(k for _, k in stack)] = described
        comment = []
    return found


def _described(comment: list[str]) -> str:
    """The description in a comment block: from its last line starting ``--`` to its end."""
    starts = [i for i, line in enumerate(comment) if line.strip().startswith("--")]
    if not starts:
        return ""
    lines = comment[starts[-1] :]
    lines[0] = lines[0].strip()[2:]
    # Continuation lines keep their own indentation past the one space after "#": a "  * item" is a list item.
    return "\n".join(line[1:] if line.startswith(" ") else line for line in lines).strip()


def chart_values(text: str) -> list[Value]:
    """Every chart value, in the file's order."""
    data = yaml.safe_load(text) or {}
    docs = value_comments(text)
    rows: list[Value] = []

    def walk(node: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            path = prefix + str(key)
            if path in docs or not isinstance(value, dict) or not value:
                rows.append(Value(path, value, docs.get(path, "")))
            else:
                walk(value, path + ".")

    walk(data, "")
    return rows


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, list items on lines of their own, pipes escaped."""
    parts: list[str] = []
    for line in _escape_html(text).splitlines():
        item = line.strip()
        if item.startswith("* "):
            parts.append("<br>• " + item[2:])
        elif parts and parts[-1].startswith("<br>• ") and line.startswith("   "):
            parts[-1] += " " + item  # an item's own continuation line
        else:
            parts.append(item)
    joined = " ".join(p for p in parts if p).replace(" <br>", "<br>")
    return joined.replace("|", "\\|")


def _escape_html(text: str) -> str:
    """``<`` and ``>`` outside code spans as entities: ``<release>`` is text, not a tag."""
    pieces = text.split("`")
    for i in range(0, len(pieces), 2):
        pieces[i] = pieces[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(pieces)


def _type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "int" if isinstance(value, int) else "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"


def _default(value: Any) -> str:
    return "`" + json.dumps(value, separators=(", ", ": ")) + "`"


def values_table(values: list[Value]) -> str:
    lines = ["| key | type | default | description |", "| --- | --- | --- | --- |"]
    for v in values:
        lines.append(f"| `{v.key}` | {_type(v.default)} | {_default(v.default)} | {_cell(v.description)} |")
    return "\n".join(lines)


# -- the operator's flags -----------------------------------------------------------------------------------
def chart_flags(template: str) -> dict[str, tuple[str, ...]]:
    """The chart values that set each flag in the Deployment template: those on the flag's line, else the
    ones of the blocks (if, range, with) it is in."""
    found: dict[str, tuple[str, ...]] = {}
    blocks: list[list[str]] = []
    for line in template.splitlines():
        if _BLOCK_END.search(line):
            if blocks:
                blocks.pop()
            continue
        refs = _VALUES_REF.findall(line)
        if _BLOCK_OPEN.search(line):
            blocks.append(refs)
            continue
        flag = _FLAG.match(line)
        if flag is not None:
            keys = refs or next((b for b in reversed(blocks) if b), [])
            found["--" + flag[1]] = tuple(dict.fromkeys([*found.get("--" + flag[1], ()), *keys]))
    return found


def run_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``run`` subcommand's parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices["run"]  # type: ignore[no-any-return]
    raise LookupError("the parser has no run subcommand")


def operator_flags(parser: argparse.ArgumentParser, template: str) -> list[Flag]:
    chart = chart_flags(template)
    flags: list[Flag] = []
    for action in run_parser(parser)._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        switch = action.nargs == 0
        if switch:
            argument = ""
        elif action.choices:
            argument = "{" + ",".join(map(str, action.choices)) + "}"
        else:
            argument = str(action.metavar or action.dest.upper())
        if isinstance(action, argparse.BooleanOptionalAction):
            default = "on" if action.default else "off"
        elif switch:
            default = "off"
        elif action.default in (None, []):
            default = ""
        else:
            default = f"`{action.default}`"
        primary = action.option_strings[0]
        flags.append(Flag(tuple(action.option_strings), argument, default, action.help or "", chart.get(primary, ())))
    return flags


def flags_table(flags: list[Flag]) -> str:
    lines = ["| flag | default | chart value | description |", "| --- | --- | --- | --- |"]
    for f in flags:
        names = ", ".join(f"`{n}{' ' + f.argument if f.argument else ''}`" for n in f.names)
        chart = ", ".join(f"`{k}`" for k in f.chart)
        lines.append(f"| {names} | {f.default} | {chart} | {_cell(f.help)} |")
    return "\n".join(lines)


# -- pages --------------------------------------------------------------------------------------------------
def replace_block(text: str, name: str, content: str) -> str:
    """``text`` with the generated block ``name`` holding ``content``."""
    begin, end = f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"no {begin} ... {end} block")
    return pattern.sub(lambda _: f"{begin}\n{content}\n{end}", text, count=1)


def _operator_parser() -> argparse.ArgumentParser:
    sys.path.insert(0, str(REPO / "operator"))
    from liqo_peering.cli import build_parser

    return build_parser()


def render_chart_readme(root: Path) -> str:
    values = chart_values((root / VALUES).read_text())
    return replace_block((root / CHART_README).read_text(), "values", values_table(values))


def liqo_tested(versions_env: str) -> list[tuple[str, str]]:
    """(version, how the suite runs it) for every Liqo version of versions.env, newest first: its defaults,
    not the environment's (LIQO_VERSION=... make demo changes nothing here)."""
    sys.path.insert(0, str(REPO))
    from testenv.liqo_env import upgraded_from
    from testenv.localk8s.tools import parse_versions

    found = parse_versions(versions_env, environ={})
    target = found["LIQO_VERSION"].lstrip("v")
    matrix = [v.lstrip("v") for v in found["LIQO_MATRIX"].split()]
    rows = [
        (
            target,
            "every feature: adopting a `liqoctl peer`, peering in one and both directions, in-band authentication,"
            " offloading, spec changes, minted and least-privilege credentials, Secret rotation, outages of either"
            " cluster, the operator killed at each step, unpeering and force-delete",
        )
    ]
    upgraded = upgraded_from(matrix, target)
    for version in matrix:
        how = (
            "peering with real gateways, a Pod offloaded, a spec change, unpeering, a `liqoctl peer` of the same"
            " version adopted"
        )
        if version in upgraded:
            how += (
                f"; Liqo upgraded to v{target} under a live peering (it stays Ready, with `LiqoVersionSkew` while the"
                f" two sides differ)"
            )
        rows.append((version, how))
    return sorted(rows, key=lambda row: tuple(int(x) for x in row[0].split(".")), reverse=True)


def liqo_versions_table(versions_env: str) -> str:
    lines = ["| Liqo | what is verified on it, with Liqo installed by its own Helm chart |", "| --- | --- |"]
    lines += [f"| v{version} | {how} |" for version, how in liqo_tested(versions_env)]
    return "\n".join(lines)


def render_liqo_versions(page: Path) -> Callable[[Path], str]:
    def render(root: Path) -> str:
        table = liqo_versions_table((root / VERSIONS_ENV).read_text())
        return replace_block((root / page).read_text(), "liqo-versions", table)

    return render


def render_configuration(root: Path) -> str:
    text = (root / CONFIGURATION).read_text()
    flags = operator_flags(_operator_parser(), (root / DEPLOYMENT).read_text())
    text = replace_block(text, "flags", flags_table(flags))
    return replace_block(text, "values", values_table(chart_values((root / VALUES).read_text())))


PAGES: dict[Path, Callable[[Path], str]] = {
    CHART_README: render_chart_readme,
    CONFIGURATION: render_configuration,
    LIQOPEERING: render_liqo_versions(LIQOPEERING),
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale, writing nothing")
    args = parser.parse_args(argv)
    stale = []
    for page, render in PAGES.items():
        want = render(REPO)
        if (REPO / page).read_text() == want:
            continue
        if args.check:
            stale.append(str(page))
        else:
            (REPO / page).write_text(want)
            print(f"wrote {page}")
    if stale:
        print(f"stale: {', '.join(stale)}; run `make generate` (hack/gen-docs.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

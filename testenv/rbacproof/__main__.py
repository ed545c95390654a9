"""`python -m testenv.rbacproof check [--parts DIR] [--tiers a,b]`: the chart's RBAC against what the tiers'
parts saw. A request refused fails it always; a grant no request used only when every tier's part is there
(`--tiers`, by default all of them), since a grant one tier alone uses looks unused in a partial run, and
not with `--unused list`, which lists such grants without failing."""

from __future__ import annotations

import argparse
from pathlib import Path

from testenv.rbacproof.check import check
from testenv.rbacproof.collect import PARTS

# testenv.pytest_plugin's TIERS (imported here, it would bring pytest and the harness along).
TIERS = ("main", "nodes", "liqo", "matrix", "gitops", "solo", "standin")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testenv.rbacproof")
    parser.add_argument("command", choices=["check"])
    parser.add_argument("--parts", type=Path, default=PARTS)
    parser.add_argument("--tiers", default=",".join(TIERS), help="the tiers the run was to cover")
    parser.add_argument(
        "--unused", choices=["fail", "list"], default="fail", help="whether a grant no request used fails the check"
    )
    args = parser.parse_args(argv)
    tiers = args.tiers.split(",")
    paths = [p for p in sorted(args.parts.glob("*.json")) if p.stem in tiers]
    report = check(paths)
    print("\n".join(report.lines()))
    missing = sorted(set(tiers) - {p.stem for p in paths})
    if missing:
        print(f"rbac: no part of {', '.join(missing)}: unused grants not judged")
        return 1 if report.forbidden or report.errors else 0
    if args.unused == "list":
        return 1 if report.forbidden or report.errors else 0
    return 1 if report.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

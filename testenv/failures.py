"""The failed tests of a run, one short block each, from the tiers' JUnit files: printed last by
hack/run-tests.sh, so that the end of a long log (all a CI page may keep) says what failed and why."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

MESSAGE_LINES = 8


def failures(junit: Path) -> list[tuple[str, str]]:
    """(test id, the first lines of its failure or error message) for each failed test in a JUnit file."""
    found = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        for outcome in ("failure", "error"):
            for node in case.findall(outcome):
                test = f"{case.get('classname', '')}::{case.get('name', '')}"
                text = node.get("message") or node.text or ""
                lines = [line for line in text.splitlines() if line.strip()][:MESSAGE_LINES]
                found.append((f"{test} ({outcome})", "\n".join(lines)))
    return found


def main(paths: list[str]) -> int:
    found = [(Path(path).stem, test, message) for path in paths if Path(path).is_file()
             for test, message in failures(Path(path))]  # fmt: skip
    if found:
        print(f"\n==================== failed: {len(found)} ====================")
        for junit, test, message in found:
            print(f"{junit}: {test}")
            print("    " + message.replace("\n", "\n    "))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

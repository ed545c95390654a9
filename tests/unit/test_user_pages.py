"""The pages users read speak to users: no test files, tiers or "a unit test checks" in them. How the project
is tested is the Development section's subject (docs/development/testing.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "liqo-peering-operator"
USER_PAGES = [
    ROOT / "README.md",
    CHART / "README.md",
    CHART / "values.yaml",
    ROOT / "docs" / "index.md",
    ROOT / "docs" / "getting-started.md",
    ROOT / "docs" / "installation.md",
    ROOT / "docs" / "troubleshooting.md",
    *sorted((ROOT / "docs" / "guides").glob("*.md")),
    *sorted((ROOT / "docs" / "reference").glob("*.md")),
    *sorted((ROOT / "docs" / "operations").glob("*.md")),
]
TEST_TALK = re.compile(r"\btests/|\btestenv\b|\btest_\w+\.py\b|\btier `?\w+`?|\bunit tests? (checks?|fails?)\b", re.I)


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_user_page_names_no_test(page: Path) -> None:
    found = [
        f"{n}: {line.strip()}" for n, line in enumerate(page.read_text().splitlines(), 1) if TEST_TALK.search(line)
    ]
    assert not found, "\n".join(found)


def test_the_pattern_finds_test_talk() -> None:
    for said in ("see tests/e2e/x.py", "test_release.py runs it", "tier `liqo`", "a unit test checks that"):
        assert TEST_TALK.search(said), said

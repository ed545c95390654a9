"""Wherever a page or an example turns minting on, it says the chart value minting needs: without it the
operator may not write the minted kubeconfig's Secret, and the peering is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "deploy/helm/liqo-peering-operator/README.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "examples").glob("*.yaml"),
    ]
)
MINT_ON = re.compile(r"mint: true")


@pytest.mark.parametrize(
    "page", [p for p in PAGES if MINT_ON.search(p.read_text())], ids=lambda p: str(p.relative_to(ROOT))
)
def test_a_page_that_turns_minting_on_names_the_chart_value(page: Path) -> None:
    assert "credentialsMinting=true" in page.read_text()


def test_the_pages_that_turn_minting_on_are_found() -> None:
    assert any(MINT_ON.search(p.read_text()) for p in PAGES)

"""Shared pytest configuration for the whole suite."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["testenv.localk8s.pytest_plugin", "testenv.liqo_env.pytest_plugin"]

_E2E_DIR = Path(__file__).parent / "e2e"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Everything under tests/e2e needs the local clusters; `-m "not e2e"` skips it all.
    for item in items:
        if item.path.is_relative_to(_E2E_DIR):
            item.add_marker(pytest.mark.e2e)

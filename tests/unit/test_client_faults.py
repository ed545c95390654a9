"""clients/faults.py: off without its directory; with it, each call is recorded when asked, and an armed call
raises once."""

from __future__ import annotations

from pathlib import Path

import pytest

from liqo_peering.clients import faults


def test_off_without_its_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(faults, "_DIR", None)
    faults.at("consumer", "get", "liqopeerings")  # nothing to look at, nothing raised


def test_records_calls_and_raises_once_at_the_armed_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(faults, "_DIR", tmp_path)
    (tmp_path / "record").touch()
    (tmp_path / "raise").write_text("provider apply tenants\n")
    faults.at("consumer", "get", "liqopeerings")
    with pytest.raises(RuntimeError, match="fault injected at provider apply tenants"):
        faults.at("provider", "apply", "tenants")
    faults.at("provider", "apply", "tenants")  # once only
    assert (tmp_path / "raised").read_text() == "provider apply tenants\n" and not (tmp_path / "raise").exists()
    assert (tmp_path / "calls").read_text().splitlines() == [
        "consumer get liqopeerings",
        "provider apply tenants",
        "provider apply tenants",
    ]


def test_several_armed_calls_each_raise_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(faults, "_DIR", tmp_path)
    (tmp_path / "raise").write_text("consumer get secrets\nprovider apply tenants\n")
    faults.at("consumer", "list", "namespaces")  # not armed
    with pytest.raises(RuntimeError, match="at provider apply tenants"):
        faults.at("provider", "apply", "tenants")
    assert (tmp_path / "raise").read_text() == "consumer get secrets\n"
    with pytest.raises(RuntimeError, match="at consumer get secrets"):
        faults.at("consumer", "get", "secrets")
    faults.at("consumer", "get", "secrets")
    faults.at("provider", "apply", "tenants")
    assert not (tmp_path / "raise").exists()
    assert (tmp_path / "raised").read_text().splitlines() == ["provider apply tenants", "consumer get secrets"]

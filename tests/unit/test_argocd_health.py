"""deploy/argocd/health.lua (LiqoPeering) and health-liqopeeringset.lua, run as Argo CD runs them: real Lua 5.1
(gopher-lua's dialect) through lupa."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from lupa import lua51

REPO = Path(__file__).resolve().parents[2]
HEALTH_LUA = REPO / "deploy" / "argocd" / "health.lua"
SET_HEALTH_LUA = REPO / "deploy" / "argocd" / "health-liqopeeringset.lua"
SNIPPET = REPO / "deploy" / "argocd" / "argocd-cm-snippet.yaml"
FIXTURES = REPO / "tests" / "fixtures" / "liqopeering-status"
SET_FIXTURES = REPO / "tests" / "fixtures" / "liqopeeringset-status"
ARGOCD_KEY = "resource.customizations.health.peering.liqo-operator.io_LiqoPeering"
SET_ARGOCD_KEY = "resource.customizations.health.peering.liqo-operator.io_LiqoPeeringSet"


def _to_lua(runtime: Any, value: Any) -> Any:
    """Python -> Lua the way Argo CD hands `obj` over: maps and lists become tables, null is absent."""
    if isinstance(value, dict):
        return runtime.table_from({k: _to_lua(runtime, v) for k, v in value.items() if v is not None})
    if isinstance(value, list):
        return runtime.table_from([_to_lua(runtime, v) for v in value])
    return value


def health(obj: dict[str, Any], script: Path = HEALTH_LUA) -> tuple[str, str]:
    runtime = lua51.LuaRuntime(unpack_returned_tuples=True)
    assert runtime.eval("_VERSION") == "Lua 5.1"
    runtime.globals().obj = _to_lua(runtime, obj)
    # Argo CD compiles the script as a chunk and calls it; a top-level `return hs` is its result.
    result = runtime.execute(script.read_text())
    assert result is not None, "the script must return a table"
    return str(result["status"]), str(result["message"])


def fixture(name: str, where: Path = FIXTURES) -> dict[str, Any]:
    data = yaml.safe_load((where / f"{name}.yaml").read_text())
    assert isinstance(data, dict)
    return data


CASES = [
    ("ready", "Healthy", "Networking, authentication and offloading are ready"),
    ("establishing", "Progressing", "Waiting for the gateway connection to be established"),
    ("no-peers", "Progressing", "Peering has not started"),
    ("timeout", "Degraded", "Networking did not become ready within 5m: gateway connection still pending"),
    ("error", "Degraded", "Secret default/provider-kubeconfig has no key kubeconfig: fix the Secret"),
    ("error-ready-only", "Degraded", "Provider API server unreachable: connection refused"),
    ("stale-generation", "Progressing", "Waiting for the operator to observe generation 3"),
    ("ready-not-confirmed", "Progressing", "Checking the virtual node"),
    ("deleting", "Progressing", "LiqoPeering is being deleted: the operator is tearing the peering down"),
    ("no-status", "Progressing", "Waiting for the operator to report a status"),
]


@pytest.mark.parametrize(("name", "status", "message"), CASES)
def test_fixture_health(name: str, status: str, message: str) -> None:
    assert health(fixture(name)) == (status, message)


def test_every_fixture_is_covered() -> None:
    names = {p.stem for p in FIXTURES.glob("*.yaml")}
    assert names == {name for name, _, _ in CASES}


def test_timeout_without_condition_messages_has_a_fallback() -> None:
    obj = fixture("timeout")
    obj["status"]["conditions"] = []
    assert health(obj) == ("Degraded", "Peering timed out")


def test_stalled_condition_degrades_even_while_establishing() -> None:
    obj = fixture("establishing")
    for cond in obj["status"]["conditions"]:
        if cond["type"] == "Stalled":
            cond.update(status="True", reason="Invalid", message="gateway template missing")
    assert health(obj) == ("Degraded", "gateway template missing")


def test_missing_observed_generation_is_stale() -> None:
    obj = fixture("ready")
    del obj["status"]["observedGeneration"]
    assert health(obj)[0] == "Progressing"


def test_no_generation_in_metadata_skips_the_staleness_check() -> None:
    obj = copy.deepcopy(fixture("ready"))
    del obj["metadata"]["generation"]
    assert health(obj)[0] == "Healthy"


def test_unknown_peer_status_is_progressing() -> None:
    obj = fixture("ready")
    obj["status"]["peerStatus"] = "something-new"
    assert health(obj)[0] == "Progressing"


def test_snippet_embeds_the_scripts_verbatim() -> None:
    snippet = yaml.safe_load(SNIPPET.read_text())
    assert snippet["kind"] == "ConfigMap"
    assert snippet["metadata"]["name"] == "argocd-cm"
    assert snippet["data"] == {ARGOCD_KEY: HEALTH_LUA.read_text(), SET_ARGOCD_KEY: SET_HEALTH_LUA.read_text()}


@pytest.mark.parametrize("script", [HEALTH_LUA, SET_HEALTH_LUA], ids=["LiqoPeering", "LiqoPeeringSet"])
def test_script_avoids_lua_5_2_plus_features(script: Path) -> None:
    """gopher-lua is Lua 5.1: no goto/labels, integer division, bitwise operators or utf8/table.unpack."""
    source = script.read_text()
    code = "\n".join(line.split("--", 1)[0] for line in source.splitlines())
    for token in ("goto ", "::", "//", " & ", " | ", "<<", ">>", "utf8.", "table.unpack", "math.type"):
        assert token not in code, token


# -- LiqoPeeringSet ----------------------------------------------------------------------------------

SET_CASES = [
    (
        "ready",
        "Healthy",
        "2 of 2 LiqoPeerings ready, 0 establishing, 0 waiting (maxConcurrent), 0 failed, 0 being removed",
    ),
    (
        "progressing",
        "Progressing",
        "1 of 3 LiqoPeerings ready, 1 establishing, 1 waiting (maxConcurrent), 0 failed, 0 being removed",
    ),
    ("failed", "Degraded", "1 of 2 LiqoPeerings failed: edge-a-again: DuplicatePeering"),
    ("stale-generation", "Progressing", "Waiting for the operator to observe generation 3"),
    ("deleting", "Progressing", "LiqoPeeringSet is being deleted: its LiqoPeerings are unpeered or released first"),
    ("no-status", "Progressing", "Waiting for the operator to report a status"),
]


@pytest.mark.parametrize(("name", "status", "message"), SET_CASES)
def test_set_fixture_health(name: str, status: str, message: str) -> None:
    assert health(fixture(name, SET_FIXTURES), SET_HEALTH_LUA) == (status, message)


def test_every_set_fixture_is_covered() -> None:
    assert {p.stem for p in SET_FIXTURES.glob("*.yaml")} == {name for name, _, _ in SET_CASES}


def test_a_set_without_condition_messages_has_fallbacks() -> None:
    failed = fixture("failed", SET_FIXTURES)
    for cond in failed["status"]["conditions"]:
        cond["message"] = ""
    assert health(failed, SET_HEALTH_LUA) == ("Degraded", "A LiqoPeering of the set failed")
    ready = fixture("ready", SET_FIXTURES)
    ready["status"]["conditions"][0]["message"] = ""
    assert health(ready, SET_HEALTH_LUA) == ("Healthy", "Every LiqoPeering is ready")

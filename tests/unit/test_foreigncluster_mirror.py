"""Unit tests for liqo_peering.status.foreigncluster (ForeignCluster mirror, liqoctl info health)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from liqo_peering.status.conditions import is_valid_reason
from liqo_peering.status.foreigncluster import (
    LIQO_STATUS_TO_METAV1,
    MODULES,
    liqo_status_to_metav1,
    mirror_foreign_cluster,
    module_alerts,
    module_condition,
    module_health,
)

# Every ConditionStatusType in Liqo v1.2.0 apis/core/v1beta1/foreigncluster_types.go.
LIQO_STATUSES = ["None", "Pending", "Established", "Error", "Ready", "NotReady", "SomeNotReady"]
HEALTHY = {"Established", "Ready"}
T = "2026-01-02T03:04:05Z"


def lc(type_: str, status: str, message: str = "", **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"type": type_, "status": status, "lastTransitionTime": T, "reason": "R"}
    if message:
        c["message"] = message
    c.update(extra)
    return c


def fc(
    *,
    role: str = "Provider",
    networking: tuple[bool, list[dict[str, Any]]] = (True, []),
    authentication: tuple[bool, list[dict[str, Any]]] = (True, []),
    offloading: tuple[bool, list[dict[str, Any]]] = (True, []),
    **status_extra: Any,
) -> dict[str, Any]:
    modules = {
        name: {"enabled": enabled, "conditions": conds}
        for name, (enabled, conds) in {
            "networking": networking,
            "authentication": authentication,
            "offloading": offloading,
        }.items()
    }
    return {
        "apiVersion": "core.liqo.io/v1beta1",
        "kind": "ForeignCluster",
        "metadata": {"name": "cool-firefly", "generation": 1},
        "spec": {"clusterID": "cool-firefly"},
        "status": {"role": role, "modules": modules, **status_extra},
    }


def healthy_fc() -> dict[str, Any]:
    return fc(
        networking=(
            True,
            [
                lc("NetworkConfigurationStatus", "Ready"),
                lc("NetworkGatewayServerStatus", "Ready"),
                lc("NetworkConnectionStatus", "Established"),
            ],
        ),
        authentication=(
            True,
            [lc("AuthIdentityControlPlaneStatus", "Ready"), lc("AuthTenantStatus", "Ready")],
        ),
        offloading=(True, [lc("OffloadingVirtualNodeStatus", "Ready"), lc("OffloadingNodeStatus", "Ready")]),
        apiServerUrl="https://172.18.0.3:6443",
        tenantNamespace={"local": "liqo-tenant-cool-firefly", "remote": "liqo-tenant-dry-paper"},
        conditions=[lc("APIServerStatus", "Established")],
    )


# ----------------------------------------------------------------------------------------------
# liqo_status_to_metav1
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("liqo", "expected"),
    [
        ("None", "Unknown"),
        ("Pending", "Unknown"),
        ("Established", "True"),
        ("Error", "False"),
        ("Ready", "True"),
        ("NotReady", "False"),
        ("SomeNotReady", "False"),
        # not Liqo values: claim nothing
        ("Connected", "Unknown"),
        ("ready", "Unknown"),
        ("True", "Unknown"),
        ("", "Unknown"),
        (None, "Unknown"),
    ],
)
def test_liqo_status_to_metav1(liqo: str | None, expected: str) -> None:
    assert liqo_status_to_metav1(liqo) == expected


def test_mapping_table_covers_exactly_every_liqo_status() -> None:
    assert set(LIQO_STATUS_TO_METAV1) == set(LIQO_STATUSES)


@pytest.mark.parametrize("liqo", LIQO_STATUSES)
def test_metav1_true_iff_liqoctl_healthy(liqo: str) -> None:
    # Consistency with liqoctl info: True exactly for the statuses liqoctl counts as healthy.
    assert (liqo_status_to_metav1(liqo) == "True") == (liqo in HEALTHY)


# ----------------------------------------------------------------------------------------------
# module_health / module_alerts (liqoctl info CheckModuleStatus / GetModuleAlerts)
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("liqo", LIQO_STATUSES)
def test_health_single_condition(liqo: str) -> None:
    expected = "Healthy" if liqo in HEALTHY else "Unhealthy"
    assert module_health(True, [lc("X", liqo)]) == expected


@pytest.mark.parametrize("liqo", LIQO_STATUSES)
def test_disabled_module_is_disabled_whatever_its_conditions(liqo: str) -> None:
    assert module_health(False, [lc("X", liqo)]) == "Disabled"
    assert module_health(False, []) == "Disabled"


def test_enabled_without_conditions_is_healthy_like_liqoctl() -> None:
    # liqoctl's loop over conditions is vacuous: enabled + no conditions = Healthy.
    assert module_health(True, []) == "Healthy"


@pytest.mark.parametrize("bad", [s for s in LIQO_STATUSES if s not in HEALTHY])
def test_one_bad_condition_among_good_ones_is_unhealthy(bad: str) -> None:
    conds = [lc("A", "Ready"), lc("B", bad), lc("C", "Established")]
    assert module_health(True, conds) == "Unhealthy"


def test_alerts_are_messages_of_non_healthy_conditions() -> None:
    conds = [
        lc("A", "Ready", "fine"),
        lc("B", "Error", "gateway crashed"),
        lc("C", "Pending", "connecting"),
        lc("D", "Established", "ok"),
    ]
    assert module_alerts(conds) == ["gateway crashed", "connecting"]


# ----------------------------------------------------------------------------------------------
# mirror_foreign_cluster
# ----------------------------------------------------------------------------------------------


def test_mirror_none() -> None:
    assert mirror_foreign_cluster(None) == {"role": "Unknown", "modules": {}}


def test_mirror_healthy_fc() -> None:
    obj = healthy_fc()
    m = mirror_foreign_cluster(obj)
    assert m["role"] == "Provider"
    assert m["apiServerUrl"] == "https://172.18.0.3:6443"
    assert m["conditions"] == [lc("APIServerStatus", "Established")]
    assert set(m["modules"]) == set(MODULES)
    for name in MODULES:
        assert m["modules"][name]["enabled"] is True
        assert m["modules"][name]["health"] == "Healthy"
        assert m["modules"][name]["conditions"] == obj["status"]["modules"][name]["conditions"]
    # Only the documented keys (tenantNamespace etc. are not mirrored).
    assert set(m) == {"role", "modules", "apiServerUrl", "conditions"}


def test_mirror_conditions_are_verbatim_subset_of_keys() -> None:
    cond = lc("NetworkConnectionStatus", "Error", "tunnel down", extra="dropped")
    m = mirror_foreign_cluster(fc(networking=(True, [cond])))
    assert m["modules"]["networking"]["conditions"] == [
        {
            "type": "NetworkConnectionStatus",
            "status": "Error",
            "lastTransitionTime": T,
            "reason": "R",
            "message": "tunnel down",
        }
    ]
    assert m["modules"]["networking"]["health"] == "Unhealthy"


def test_mirror_optional_condition_fields_are_omitted_not_invented() -> None:
    m = mirror_foreign_cluster(fc(authentication=(True, [{"type": "AuthTenantStatus", "status": "Ready"}])))
    assert m["modules"]["authentication"]["conditions"] == [{"type": "AuthTenantStatus", "status": "Ready"}]


def test_mirror_condition_without_status_reads_as_liqo_default_none() -> None:
    m = mirror_foreign_cluster(fc(networking=(True, [{"type": "NetworkConnectionStatus"}])))
    assert m["modules"]["networking"]["conditions"][0]["status"] == "None"
    assert m["modules"]["networking"]["health"] == "Unhealthy"


def test_mirror_skips_malformed_conditions() -> None:
    junk: list[Any] = ["junk", {"status": "Ready"}, lc("OffloadingNodeStatus", "Ready")]
    m = mirror_foreign_cluster(fc(offloading=(True, junk)))
    assert [c["type"] for c in m["modules"]["offloading"]["conditions"]] == ["OffloadingNodeStatus"]


@pytest.mark.parametrize("role", ["Consumer", "Provider", "ConsumerAndProvider", "Unknown"])
def test_mirror_role(role: str) -> None:
    assert mirror_foreign_cluster(fc(role=role))["role"] == role


@pytest.mark.parametrize(
    "obj",
    [
        {"metadata": {"name": "x"}},
        {"metadata": {"name": "x"}, "status": None},
        {"metadata": {"name": "x"}, "status": {}},
        {"metadata": {"name": "x"}, "status": {"role": "", "modules": None}},
    ],
)
def test_mirror_fc_without_status_has_disabled_modules(obj: dict[str, Any]) -> None:
    m = mirror_foreign_cluster(obj)
    assert m["role"] == "Unknown"
    assert m["modules"] == {name: {"enabled": False, "health": "Disabled", "conditions": []} for name in MODULES}
    assert "apiServerUrl" not in m
    assert "conditions" not in m


def test_mirror_missing_single_module_is_zero_value() -> None:
    obj = healthy_fc()
    del obj["status"]["modules"]["offloading"]
    m = mirror_foreign_cluster(obj)
    assert m["modules"]["offloading"] == {"enabled": False, "health": "Disabled", "conditions": []}
    assert m["modules"]["networking"]["health"] == "Healthy"


@pytest.mark.parametrize("enabled", [False, None, "true", 1])
def test_mirror_enabled_must_be_real_true(enabled: Any) -> None:
    m = mirror_foreign_cluster(fc(networking=(enabled, [lc("NetworkConnectionStatus", "Error")])))
    assert m["modules"]["networking"]["enabled"] is False
    assert m["modules"]["networking"]["health"] == "Disabled"


def test_mirror_does_not_mutate_or_alias_input() -> None:
    obj = healthy_fc()
    before = copy.deepcopy(obj)
    m = mirror_foreign_cluster(obj)
    m["modules"]["networking"]["conditions"][0]["status"] = "Error"
    assert obj == before


# ----------------------------------------------------------------------------------------------
# module_condition
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("module", MODULES)
def test_module_condition_fc_missing(module: str) -> None:
    for mirror in (mirror_foreign_cluster(None), {}):
        assert module_condition(mirror, module)[:2] == ("Unknown", "ForeignClusterMissing")


@pytest.mark.parametrize("module", MODULES)
def test_module_condition_healthy(module: str) -> None:
    status, reason, message = module_condition(mirror_foreign_cluster(healthy_fc()), module)
    assert (status, reason) == ("True", "ModuleHealthy")
    assert module in message


@pytest.mark.parametrize("module", MODULES)
@pytest.mark.parametrize("expected", [True, False])
def test_module_condition_disabled(module: str, expected: bool) -> None:
    obj = fc(**{module: (False, [lc("X", "Error", "stale")])})  # type: ignore[arg-type]
    result = module_condition(mirror_foreign_cluster(obj), module, expected=expected)
    if expected:
        assert result[:2] == ("Unknown", "ModuleNotEnabled")
    else:
        assert result[:2] == ("True", "ModuleDisabled")


def test_module_condition_default_expects_the_stage() -> None:
    assert module_condition(mirror_foreign_cluster(fc(networking=(False, []))), "networking")[1] == "ModuleNotEnabled"


def test_module_condition_enabled_without_conditions_is_unknown() -> None:
    # Stricter than liqoctl (which says Healthy): Liqo has not reported anything yet.
    mirror = mirror_foreign_cluster(fc(networking=(True, [])))
    assert mirror["modules"]["networking"]["health"] == "Healthy"
    assert module_condition(mirror, "networking")[:2] == ("Unknown", "ModuleConditionsPending")


@pytest.mark.parametrize("liqo", LIQO_STATUSES)
def test_module_condition_for_every_liqo_status(liqo: str) -> None:
    conds = [
        lc("NetworkConfigurationStatus", "Ready"),
        lc("NetworkConnectionStatus", liqo, f"conn is {liqo}"),
    ]
    status, reason, message = module_condition(mirror_foreign_cluster(fc(networking=(True, conds))), "networking")
    expected = {
        "True": ("True", "ModuleHealthy"),
        "False": ("False", "ModuleUnhealthy"),
        "Unknown": ("Unknown", "ModulePending"),
    }[liqo_status_to_metav1(liqo)]
    assert (status, reason) == expected
    if status != "True":
        # The alert (Liqo's message) and the failing type are in our message; healthy ones are not.
        assert f"NetworkConnectionStatus={liqo}" in message
        assert f"conn is {liqo}" in message
        assert "NetworkConfigurationStatus" not in message


def test_module_condition_false_wins_over_pending_and_lists_all_failures() -> None:
    conds = [
        lc("NetworkConnectionStatus", "Pending", "connecting"),
        lc("NetworkGatewayServerStatus", "NotReady", "server pod not ready"),
        lc("NetworkGatewayClientStatus", "SomeNotReady", "1/2 client pods ready"),
        lc("NetworkConfigurationStatus", "Ready", "configured"),
    ]
    status, reason, message = module_condition(mirror_foreign_cluster(fc(networking=(True, conds))), "networking")
    assert (status, reason) == ("False", "ModuleUnhealthy")
    assert "server pod not ready" in message
    assert "1/2 client pods ready" in message
    assert "connecting" not in message  # only the failing ones when something fails
    assert "configured" not in message


def test_module_condition_message_without_liqo_message() -> None:
    conds = [lc("OffloadingNodeStatus", "NotReady")]
    _, _, message = module_condition(mirror_foreign_cluster(fc(offloading=(True, conds))), "offloading")
    assert "OffloadingNodeStatus=NotReady" in message
    assert "()" not in message


def test_module_condition_unknown_module() -> None:
    with pytest.raises(ValueError, match="unknown Liqo module"):
        module_condition(mirror_foreign_cluster(healthy_fc()), "storage")


def test_all_reasons_are_valid_metav1_reasons() -> None:
    mirrors = [
        mirror_foreign_cluster(None),
        mirror_foreign_cluster(healthy_fc()),
        mirror_foreign_cluster(fc(networking=(False, []), authentication=(True, []))),
        *(mirror_foreign_cluster(fc(offloading=(True, [lc("X", s)]))) for s in LIQO_STATUSES),
    ]
    reasons = {module_condition(m, mod, expected=e)[1] for m in mirrors for mod in MODULES for e in (True, False)}
    assert reasons == {
        "ForeignClusterMissing",
        "ModuleDisabled",
        "ModuleNotEnabled",
        "ModuleConditionsPending",
        "ModuleUnhealthy",
        "ModulePending",
        "ModuleHealthy",
    }
    assert all(is_valid_reason(r) for r in reasons)

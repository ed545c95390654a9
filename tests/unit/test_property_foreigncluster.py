"""Property: the ForeignCluster-to-condition mapping is total. Whatever Liqo's ForeignCluster holds
(missing keys, wrong types, unknown condition types and statuses, None), mirroring it and mapping it to
the stage conditions never raises, and the LiqoPeering status built from it fits the CRD."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jsonschema
from hypothesis import example, given, settings
from hypothesis import strategies as st

from liqo_peering.api import model
from liqo_peering.stages import STAGES, StageResult
from liqo_peering.status.compute import Observation, compute
from liqo_peering.status.conditions import REASON_PATTERN, make_condition
from liqo_peering.status.foreigncluster import LIQO_STATUS_TO_METAV1, mirror_foreign_cluster, module_condition
from unit.strategies import STATUS_SCHEMA, anything, field

SETTINGS = settings(max_examples=150)
NOW = datetime(2025, 1, 1, tzinfo=UTC)


condition = st.fixed_dictionaries(
    {},
    optional={
        "type": field(
            st.sampled_from(["NetworkConnectionStatus", "AuthIdentityControlPlaneStatus", "APIServerStatus", "New", ""])
        ),
        "status": field(st.sampled_from([*LIQO_STATUS_TO_METAV1, "Unknown", "True", "", "established"])),
        "reason": field(st.text(max_size=8)),
        "message": field(st.text(max_size=20)),
        "lastTransitionTime": field(st.just("2025-01-01T00:00:00Z")),
        "extra": anything,
    },
)
conditions = field(st.lists(field(condition), max_size=4))
module = field(st.fixed_dictionaries({}, optional={"enabled": field(st.booleans()), "conditions": conditions}))
statuses = field(
    st.fixed_dictionaries(
        {},
        optional={
            "role": field(st.sampled_from(["Consumer", "Provider", "ConsumerAndProvider", "Unknown", ""])),
            "modules": field(st.fixed_dictionaries({}, optional={name: module for name in (*STAGES, "other")})),
            "apiServerUrl": field(st.just("https://provider:6443")),
            "conditions": conditions,
        },
    )
)
foreign_clusters = st.none() | anything | st.fixed_dictionaries({"status": statuses}, optional={"spec": anything})


def prune_nulls(value: Any) -> Any:
    """A merge patch's nulls delete fields: what the API server stores has none."""
    if isinstance(value, dict):
        return {k: prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [prune_nulls(v) for v in value]
    return value


def _fits_status_schema(status: dict[str, Any]) -> None:
    status = prune_nulls(status)
    model.LiqoPeeringStatus.model_validate(status)
    # jsonschema for the structural part (the CRD's own keywords it ignores)
    jsonschema.Draft4Validator(STATUS_SCHEMA).validate(status)


@SETTINGS
@given(foreign_clusters)
# Found by this property: a condition status that is a list raised TypeError (unhashable), and
# non-string types were mirrored verbatim, which the CRD refuses (the whole status write failed).
@example({"status": {"modules": {"networking": {"enabled": True, "conditions": [{"type": "X", "status": ["x"]}]}}}})
@example({"status": {"conditions": [{"type": 1}, {"type": "Y", "message": 1.5, "reason": {}}]}})
def test_the_mirror_and_the_module_conditions_are_well_formed(fc: Any) -> None:
    mirror = mirror_foreign_cluster(fc)
    model.ForeignClusterMirror.model_validate(mirror)
    _fits_status_schema({"foreignCluster": mirror})
    for stage in STAGES:
        for expected in (True, False):
            status, reason, message = module_condition(mirror, stage, expected=expected)
            assert status in ("True", "False", "Unknown")
            assert REASON_PATTERN.fullmatch(reason) and isinstance(message, str)
            make_condition("NetworkReady", status, reason, message, 1, NOW)


@SETTINGS
@given(foreign_clusters, st.sampled_from(["ready", "progressing"]))
def test_the_status_built_from_any_foreign_cluster_fits_the_crd(fc: Any, state: str) -> None:
    stages = {
        stage: StageResult.ready(stage, "ok") if state == "ready" else StageResult.waiting(stage, "Waiting", "...")
        for stage in STAGES
    }
    obs = Observation(generation=1, now=NOW, timeout_seconds=300, stages=stages, mirror=mirror_foreign_cluster(fc))
    status, events = compute(None, obs)
    _fits_status_schema(status)
    assert {c["type"] for c in status["conditions"]} >= {"Ready", "Reconciling", "Stalled", "NetworkReady"}
    assert all(isinstance(e.message, str) for e in events)

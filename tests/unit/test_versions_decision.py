"""Which Liqo each side runs, what the operator decides from it, and what the status says (pure parts)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from liqo_peering.api.model import LiqoPeeringSpec, LiqoPeeringStatus
from liqo_peering.engine import discovery
from liqo_peering.liqo import networking, offloading, versions
from liqo_peering.liqo.context import ClusterInfo, PeeringContext
from liqo_peering.liqo.versions import LiqoVersion, from_label, from_shape, judge
from liqo_peering.stages import STAGES, StageResult
from liqo_peering.status.compute import VERSION_CONDITIONS, Observation, VersionNotice, compute
from liqo_peering.status.conditions import get_condition
from testenv.localk8s.tools import read_versions

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
V100, V112, V120, V123, V130 = (from_label(v) for v in ("v1.0.0", "v1.1.2", "v1.2.0", "v1.2.3", "v1.3.0"))
SHA = "557c199cf0123456789abcdef0123456789abcde"


# -- reading the version ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("label", "release"),
    [("v1.2.0", (1, 2, 0)), ("1.1.2", (1, 1, 2)), ("v1.3.0-rc.1", (1, 3, 0)), ("v0.10.3", (0, 10, 3))],
)
def test_a_release_label_names_the_version(label: str, release: tuple[int, int, int]) -> None:
    assert from_label(label).release == release


@pytest.mark.parametrize("label", [SHA, "main", "", None])
def test_a_commit_or_custom_tag_is_unknown_and_says_so(label: str | None) -> None:
    version = from_label(label)
    assert not version.known
    assert version.describe().startswith("unknown (")
    assert (label or "no version label") in version.describe()


def test_the_api_shape_bounds_an_unknown_version() -> None:
    assert from_shape(SHA, True, True).describe() == f"unknown, v1.2 or newer (development build {SHA})"
    assert from_shape(SHA, True, True).at_least(1, 2) is True
    assert from_shape(SHA, True, False).at_least(1, 2) is None  # v1.0 or newer: v1.1 or v1.2, nobody can say
    assert from_shape(SHA, False, False).at_least(1, 0) is False
    assert from_shape(None, False, False).describe() == "older than v1.0 (no version label)"


# -- refusing what cannot work -------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [from_label("v0.10.3"), from_shape(SHA, False, False)])
def test_liqo_before_1_0_is_refused_naming_cluster_version_and_range(version: LiqoVersion) -> None:
    refusal = versions.unsupported("provider", "https://10.0.0.5:6443", version)
    assert refusal is not None
    assert (refusal.reason, refusal.side, refusal.found) == ("LiqoVersionUnsupported", "provider", version.describe())
    assert "provider cluster (https://10.0.0.5:6443)" in refusal.message
    assert version.describe() in refusal.message and versions.SUPPORTED_RANGE in refusal.message


@pytest.mark.parametrize("version", [V100, V112, V120, V130, from_label(SHA), from_shape(SHA, True, False)])
def test_liqo_1_x_and_unknown_builds_are_not_refused(version: LiqoVersion) -> None:
    assert versions.unsupported("consumer", "here", version) is None


def test_same_minor_and_tested_is_silent() -> None:
    verdict = judge(V120, V123, allow_skew=False, established=False, skew_field="spec.allowLiqoVersionSkew")
    assert verdict.refusal is None and verdict.notices == ()


def test_a_minor_skew_is_refused_quoting_liqos_rule() -> None:
    verdict = judge(V112, V120, allow_skew=False, established=False, skew_field="spec.allowLiqoVersionSkew")
    assert verdict.refusal is not None
    assert verdict.refusal.reason == "LiqoVersionSkew"
    assert verdict.refusal.found == "consumer v1.1.2, provider v1.2.0"
    (notice,) = verdict.notices
    assert (notice.type, notice.reason) == ("LiqoVersionSkew", "Refused")
    assert versions.LIQO_SKEW_RULE in notice.message and "spec.allowLiqoVersionSkew" in notice.message
    assert versions.LIQO_SKEW_RULE in verdict.refusal.message


def test_a_minor_skew_goes_on_when_allowed_with_a_warning() -> None:
    verdict = judge(V112, V120, allow_skew=True, established=False, skew_field="spec.allowLiqoVersionSkew")
    assert verdict.refusal is None
    (notice,) = verdict.notices
    assert (notice.type, notice.reason, notice.warn) == ("LiqoVersionSkew", "Allowed", True)


def test_a_skew_appearing_on_an_established_peering_carries_on() -> None:
    verdict = judge(V120, V112, allow_skew=False, established=True, skew_field="spec.allowLiqoVersionSkew")
    assert verdict.refusal is None
    assert [(n.type, n.reason) for n in verdict.notices] == [("LiqoVersionSkew", "AppearedWhileReady")]


def test_a_version_newer_than_tested_goes_on_with_a_warning() -> None:
    verdict = judge(V130, V130, allow_skew=False, established=False, skew_field="f")
    assert verdict.refusal is None
    (notice,) = verdict.notices
    assert (notice.type, notice.reason, notice.warn) == ("LiqoVersionUntested", "NewerThanTested", True)
    assert "the consumer runs Liqo v1.3.0" in notice.message and versions.SUPPORTED_RANGE in notice.message


def test_an_unknown_version_cannot_skew_but_is_untested() -> None:
    verdict = judge(from_label(SHA), V112, allow_skew=False, established=False, skew_field="f")
    assert verdict.refusal is None
    assert [(n.type, n.reason) for n in verdict.notices] == [("LiqoVersionUntested", "UnknownVersion")]


def test_tested_minors_are_one_list() -> None:
    assert {f"v{major}.{minor}.x" for major, minor in versions.TESTED_MINORS} >= {"v1.0.x", "v1.2.x"}
    assert all(from_label(v).minor in versions.TESTED_MINORS for v in versions.TESTED_RELEASES)
    assert {versions.SKEW_CONDITION, versions.UNTESTED_CONDITION} == set(VERSION_CONDITIONS)


def test_tested_releases_are_those_the_suite_runs() -> None:
    """What the LiqoVersionUntested message calls tested is what runs: LIQO_VERSION (the whole real-Liqo
    suite) and LIQO_MATRIX (tests/e2e/test_liqo_matrix.py) of hack/versions.env, with their defaults."""
    found = read_versions(environ={})
    runs = {found["LIQO_VERSION"], *found["LIQO_MATRIX"].split()}
    assert set(versions.TESTED_RELEASES) == {f"v{v.lstrip('v')}" for v in runs}
    assert {from_label(v).minor for v in versions.TESTED_RELEASES} == set(versions.TESTED_MINORS)


# -- the engine's glue: status block and the established rule -----------------------------------------------
def ctx(consumer: LiqoVersion, provider: LiqoVersion) -> PeeringContext:
    c = ClusterInfo("c", ("10.0.0.0/16",), "10.1.0.0/16", liqo_version=consumer, kubernetes_version="v1.35.0")
    p = ClusterInfo("p", ("10.2.0.0/16",), "10.3.0.0/16", liqo_version=provider)
    return PeeringContext("ns", "lp", c, p)


SPEC = LiqoPeeringSpec.model_validate({"remoteKubeconfigSecretRef": {"name": "k"}})
READY = {"conditions": [{"type": "Ready", "status": "True"}]}


def test_check_versions_shows_both_sides_and_leaves_out_what_is_unknown() -> None:
    check = discovery.check_versions(ctx(V120, from_label(SHA)), SPEC, {})
    assert check.versions == {
        "consumer": {"liqo": "v1.2.0", "kubernetes": "v1.35.0"},
        "provider": {"liqo": f"unknown (development build {SHA})"},
    }
    LiqoPeeringStatus.model_validate({"versions": check.versions})  # the CRD's shape


def test_check_versions_refuses_a_skew_unless_ready_or_allowed() -> None:
    refused = discovery.check_versions(ctx(V112, V120), SPEC, {})
    assert refused.refusal is not None
    assert (refused.refusal.reason, refused.refusal.transient) == ("LiqoVersionSkew", False)
    assert discovery.check_versions(ctx(V112, V120), SPEC, READY).refusal is None
    allowed = SPEC.model_copy(update={"allow_liqo_version_skew": True})
    assert discovery.check_versions(ctx(V112, V120), allowed, {}).refusal is None
    # Once carrying on, it keeps doing so even when a later pass finds it not Ready.
    carrying_on = {"conditions": [{"type": "LiqoVersionSkew", "status": "True", "reason": "AppearedWhileReady"}]}
    assert discovery.check_versions(ctx(V112, V120), SPEC, carrying_on).refusal is None


# -- the status -------------------------------------------------------------------------------------------------
def observe(notices: tuple[VersionNotice, ...] | None, versions_: dict[str, Any] | None = None) -> Observation:
    stages = {stage: StageResult.ready(stage, f"{stage} established") for stage in STAGES}
    return Observation(
        generation=1,
        now=T0,
        timeout_seconds=300,
        stages=stages,
        liqo_checked=frozenset(),
        version_notices=notices,
        versions=versions_,
    )


SKEW = VersionNotice("LiqoVersionSkew", "AppearedWhileReady", "Liqo versions differ")


def test_a_version_notice_is_a_condition_with_one_warning_event() -> None:
    block = {"consumer": {"liqo": "v1.2.0"}, "provider": {"liqo": "v1.1.2"}}
    status, events = compute({}, observe((SKEW,), block))
    cond = get_condition(status["conditions"], "LiqoVersionSkew")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "AppearedWhileReady")
    assert status["versions"] == block and status["peerStatus"] == "ready"
    assert [(e.type, e.reason) for e in events if e.reason == "LiqoVersionSkew"] == [("Warning", "LiqoVersionSkew")]
    # At rest: the same status, no Event.
    again, events = compute(status, observe((SKEW,), block))
    assert again == status
    assert not [e for e in events if e.reason in VERSION_CONDITIONS]


def test_a_version_condition_goes_when_it_no_longer_holds_and_stays_when_not_judged() -> None:
    status, _ = compute({}, observe((SKEW,)))
    kept, _ = compute(status, observe(None))
    assert get_condition(kept["conditions"], "LiqoVersionSkew") is not None
    gone, _ = compute(status, observe(()))
    assert get_condition(gone["conditions"], "LiqoVersionSkew") is None
    assert "versions" not in gone  # not discovered in this pass: the merge patch keeps what is there


# -- what differs per version -----------------------------------------------------------------------------------
def configuration(conditions: list[dict[str, Any]] | None, remote: dict[str, Any] | None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if conditions is not None:
        status["conditions"] = conditions
    if remote is not None:
        status["remote"] = remote
    return {"metadata": {"generation": 2}, "status": status}


BOTH = {"cidr": {"pod": ["10.71.0.0/16"], "external": ["10.70.0.0/16"]}}
POD_ONLY = {"cidr": {"pod": ["10.71.0.0/16"]}}
CONFIGURED = [{"type": "NetworkCIDRsConfigured", "status": "True", "observedGeneration": 2}]
STALE = [{"type": "NetworkCIDRsConfigured", "status": "True", "observedGeneration": 1}]


@pytest.mark.parametrize(
    ("version", "conf", "ready"),
    [
        # v1.2+: the condition, for the current generation, whatever status.remote holds.
        (V120, configuration(CONFIGURED, None), True),
        (V120, configuration(STALE, BOTH), False),
        (V120, configuration(None, BOTH), False),
        (V130, configuration(CONFIGURED, BOTH), True),
        # v1.1 and older: both the pod and the external CIDR in status.remote (IsConfigurationStatusSet).
        (V112, configuration(None, BOTH), True),
        (V112, configuration(None, POD_ONLY), False),
        (V100, configuration([], {"cidr": {"pod": [], "external": ["10.70.0.0/16"]}}), False),
        (V112, configuration(STALE, BOTH), True),  # a condition v1.1 does not write is not its signal
        # Unknown: the condition when there is one, else the older rule.
        (from_label(SHA), configuration(STALE, BOTH), False),
        (from_label(SHA), configuration(None, BOTH), True),
        (from_label(SHA), configuration(None, POD_ONLY), False),
    ],
)
def test_configuration_accepted_as_each_version_of_liqo_accepts_it(
    version: LiqoVersion, conf: dict[str, Any], ready: bool
) -> None:
    assert networking.configuration_ready(conf, version) is ready


def ready_node() -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


READY_POD = {"metadata": {"name": "vk-p"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.mark.parametrize(
    ("version", "networking_on", "connected", "usable"),
    [
        (V120, True, False, True),  # v1.2's virtual kubelet checks the network before it reports Ready
        (from_label(SHA), True, False, True),
        (V112, True, False, False),  # v1.1 reports Ready before its network check: the tunnel must be up
        (V112, True, True, True),
        (V100, False, False, True),  # no network to wait for
    ],
)
def test_virtual_node_judged_as_each_version_of_liqo_judges_it(
    version: LiqoVersion, networking_on: bool, connected: bool, usable: bool
) -> None:
    checked = offloading.node_ready_checks_network(version, networking_on, connected)
    got, message = offloading.virtual_node_usable(ready_node(), [READY_POD], checked)
    assert got is usable
    if not usable:
        assert "before v1.2" in message and "Connected" in message

"""Mirror of Liqo's ForeignCluster (``core.liqo.io/v1beta1``) status, as pure data.

Field names verified against Liqo v1.2.0 ``apis/core/v1beta1/foreigncluster_types.go``:
``status.role`` (Consumer | Provider | ConsumerAndProvider | Unknown, default Unknown),
``status.modules.{networking,authentication,offloading}.{enabled, conditions[]}``,
``status.apiServerUrl``, ``status.foreignProxyUrl``, ``status.tenantNamespace.{local,remote}``,
``status.conditions[]`` (generic, e.g. APIServerStatus), ``status.observedGeneration``.
A Liqo condition is ``{type, status, lastTransitionTime?, reason?, message?}`` and its status is one
of None | Pending | Established | Error | Ready | NotReady | SomeNotReady (default None). These are NOT
metav1 condition statuses; ``liqo_status_to_metav1`` maps them.

Module health follows ``liqoctl info`` exactly (Liqo v1.2.0 ``pkg/liqoctl/info/common/utils.go``,
``CheckModuleStatus`` / ``GetModuleAlerts``, used by ``pkg/liqoctl/info/peer/{network,auth,
offloading}.go``):

* not enabled -> Disabled (whatever conditions are left);
* enabled -> Unhealthy as soon as one condition is neither Established nor Ready, else Healthy.
  NOTE: the loop is vacuous, so an enabled module with NO conditions is **Healthy** for liqoctl.
  Liqo's controller enables a module as soon as its objects exist and writes conditions later, so
  that state is transient. ``health`` reproduces liqoctl; ``module_condition`` is stricter and
  reports it as Unknown (see there).
* alerts = the ``message`` of every condition that is neither Established nor Ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from liqo_peering.stages import STAGES

from .conditions import ConditionStatus

MODULES: tuple[str, ...] = STAGES  # Liqo names its modules after the stages
ROLES: tuple[str, ...] = ("Consumer", "Provider", "ConsumerAndProvider", "Unknown")

Health = Literal["Healthy", "Unhealthy", "Disabled"]

# Every ConditionStatusType of Liqo v1.2.0 and its metav1 meaning. Our conditions have positive
# polarity ("this works"), so:
#   Established, Ready          -> True : Liqo asserts the thing works (liqoctl's healthy set).
#   Error, NotReady, SomeNotReady -> False: Liqo asserts it does not (fully) work. SomeNotReady means
#                                  some replicas/nodes are not ready: the whole is not ready.
#   Pending                     -> Unknown: in progress (e.g. the tunnel is Connecting); neither
#                                  success nor failure yet, so not False (that would read as a fault).
#   None                        -> Unknown: Liqo's default / "not applicable": no assertion at all.
#   anything else (newer Liqo)  -> Unknown: we cannot interpret it, so we claim nothing.
LIQO_STATUS_TO_METAV1: Mapping[str, ConditionStatus] = MappingProxyType(
    {
        "None": "Unknown",
        "Pending": "Unknown",
        "Established": "True",
        "Ready": "True",
        "Error": "False",
        "NotReady": "False",
        "SomeNotReady": "False",
    }
)
_HEALTHY_LIQO_STATUSES = frozenset({"Established", "Ready"})
_CONDITION_KEYS = ("type", "status", "lastTransitionTime", "reason", "message")


def liqo_status_to_metav1(status: str | None) -> ConditionStatus:
    """Map a Liqo ConditionStatusType to "True"/"False"/"Unknown" (table above)."""
    if not isinstance(status, str):
        return "Unknown"
    return LIQO_STATUS_TO_METAV1.get(status, "Unknown")


def _verbatim_conditions(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        return []
    out: list[dict[str, Any]] = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("type"), str) or not item["type"]:
            continue
        # Liqo's fields are strings: anything else (an object that bypassed Liqo's schema) is dropped, as
        # the LiqoPeering's schema would refuse the whole status write over it.
        cond = {k: item[k] for k in _CONDITION_KEYS if isinstance(item.get(k), str)}
        # Liqo's CRD defaults status to "None"; an object that bypassed defaulting reads the same.
        cond.setdefault("status", "None")
        out.append(cond)
    return out


def module_health(enabled: bool, conditions: list[dict[str, Any]]) -> Health:
    """``liqoctl info``'s CheckModuleStatus."""
    if not enabled:
        return "Disabled"
    for cond in conditions:
        if not _healthy(cond):
            return "Unhealthy"
    return "Healthy"


# A condition's text copied from the provider's ForeignCluster into status: its first characters only (the
# provider writes that object; a condition message of megabytes must not become the peering's status).
TEXT_CHARS = 512


def _text(value: Any) -> str:
    text = str(value)
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + "…"


def module_alerts(conditions: list[dict[str, Any]]) -> list[str]:
    """``liqoctl info``'s GetModuleAlerts: messages of the conditions not Established/Ready."""
    return [_text(c.get("message", "")) for c in conditions if not _healthy(c)]


def _healthy(condition: dict[str, Any]) -> bool:
    status = condition.get("status")
    return isinstance(status, str) and status in _HEALTHY_LIQO_STATUSES  # an unhashable status must not raise


def mirror_foreign_cluster(fc: dict[str, Any] | None) -> dict[str, Any]:
    """Summarise a ForeignCluster object.

    Returns ``{"role", "modules": {name: {"enabled", "health", "conditions"}}}`` plus
    ``"apiServerUrl"`` and ``"conditions"`` (the generic FC conditions, verbatim) when present.

    ``fc is None`` (no ForeignCluster yet) returns ``{"role": "Unknown", "modules": {}}``: EMPTY
    modules is the marker for "no ForeignCluster" (``module_condition`` reports
    ForeignClusterMissing). A ForeignCluster without status gets all three modules as Liqo's zero
    value (disabled), exactly as a Go client would decode it.
    """
    if fc is None:
        return {"role": "Unknown", "modules": {}}
    status = fc.get("status") if isinstance(fc, dict) else None
    if not isinstance(status, dict):
        status = {}
    role = status.get("role")
    modules_raw = status.get("modules")
    if not isinstance(modules_raw, dict):
        modules_raw = {}
    modules: dict[str, Any] = {}
    for name in MODULES:
        raw = modules_raw.get(name)
        if not isinstance(raw, dict):
            raw = {}
        enabled = raw.get("enabled") is True
        conditions = _verbatim_conditions(raw.get("conditions"))
        modules[name] = {
            "enabled": enabled,
            "health": module_health(enabled, conditions),
            "conditions": conditions,
        }
    mirror: dict[str, Any] = {
        "role": role if isinstance(role, str) and role else "Unknown",
        "modules": modules,
    }
    api_server_url = status.get("apiServerUrl")
    if isinstance(api_server_url, str) and api_server_url:
        mirror["apiServerUrl"] = api_server_url
    generic = _verbatim_conditions(status.get("conditions"))
    if generic:
        mirror["conditions"] = generic
    return mirror


def module_condition(mirror: dict[str, Any], module: str, *, expected: bool = True) -> tuple[ConditionStatus, str, str]:
    """Our per-stage condition ``(status, reason, message)`` for one Liqo module.

    ``expected`` says whether the LiqoPeering wants this stage (False when the spec disables it).

    ==========================================  =========  ===========================
    situation                                    status     reason
    ==========================================  =========  ===========================
    no ForeignCluster (mirror has no modules)    Unknown    ForeignClusterMissing
    module disabled, stage not expected          True       ModuleDisabled
    module disabled, stage expected              Unknown    ModuleNotEnabled
    enabled, no conditions yet                   Unknown    ModuleConditionsPending
    any condition False (Error/NotReady/Some..)  False      ModuleUnhealthy (alerts)
    else any condition Unknown (None/Pending/?)  Unknown    ModulePending (alerts)
    all conditions Established/Ready             True       ModuleHealthy
    ==========================================  =========  ===========================

    "ModuleDisabled" is True so a deliberately skipped stage never blocks Ready. A disabled module
    the spec wants is Unknown, not False: Liqo enables a module only once it sees the stage's
    objects, so this is the normal state before/while the stage starts. Pending/None are progress,
    so they are Unknown, not False; they still count as Unhealthy for liqoctl's ``health``.
    """
    if module not in MODULES:
        raise ValueError(f"unknown Liqo module {module!r}; expected one of {', '.join(MODULES)}")
    modules = mirror.get("modules") or {}
    data = modules.get(module)
    if not isinstance(data, dict):
        return (
            "Unknown",
            "ForeignClusterMissing",
            "Liqo has not created the ForeignCluster for the provider cluster yet; it appears once "
            "the peering objects exist",
        )
    conditions: list[dict[str, Any]] = data.get("conditions") or []
    if not data.get("enabled"):
        if not expected:
            return ("True", "ModuleDisabled", f"the {module} stage is disabled for this peering")
        return (
            "Unknown",
            "ModuleNotEnabled",
            f"Liqo has not enabled the {module} module on the ForeignCluster yet",
        )
    if not conditions:
        return (
            "Unknown",
            "ModuleConditionsPending",
            f"Liqo enabled the {module} module but reports no conditions yet",
        )
    failing = [c for c in conditions if liqo_status_to_metav1(c.get("status")) == "False"]
    pending = [c for c in conditions if liqo_status_to_metav1(c.get("status")) == "Unknown"]
    if failing:
        return ("False", "ModuleUnhealthy", f"Liqo {module} module is unhealthy: {_describe(failing)}")
    if pending:
        return ("Unknown", "ModulePending", f"Liqo {module} module is not ready yet: {_describe(pending)}")
    types = ", ".join(_text(c.get("type")) for c in conditions[:20])
    return ("True", "ModuleHealthy", f"Liqo {module} module is healthy ({types})")


def _describe(conditions: list[dict[str, Any]]) -> str:
    parts = []
    for c in conditions[:20]:  # as many as a status shows
        text = f"{_text(c.get('type'))}={_text(c.get('status'))}"
        message = c.get("message")
        if message:
            text += f" ({_text(message)})"
        parts.append(text)
    return "; ".join(parts)

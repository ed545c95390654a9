"""Stage 3 builders: the ResourceSlice, and how to read its and its VirtualNode's state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from liqo_peering.api.model import OffloadingSpec, Quantity
from liqo_peering.fields import mappings_at, text_at
from liqo_peering.liqo import naming, resources
from liqo_peering.liqo.context import PeeringContext
from liqo_peering.liqo.stored import canonical_quantity
from liqo_peering.liqo.versions import LiqoVersion


@dataclass(frozen=True)
class SliceRequest:
    """One ResourceSlice a direction asks its provider for. ``field``: where the spec sets it, after the
    direction's offloading field (empty for the single form, such as ``.resourceSlices[1]`` for the list)."""

    name: str
    cls: str
    resources: Mapping[str, Quantity]
    create_virtual_node: bool
    field: str = ""


def requested_slices(spec: OffloadingSpec, provider_id: str) -> list[SliceRequest]:
    """The ResourceSlices a direction's spec asks for: each of resourceSlices, or the single form's one, named
    after the provider as liqoctl names it."""
    if spec.resource_slices is not None:
        return [
            SliceRequest(s.name, s.class_, s.resources, s.create_virtual_node, f".resourceSlices[{i}]")
            for i, s in enumerate(spec.resource_slices)
        ]
    if not spec.create_resource_slice:
        return []
    return [SliceRequest(provider_id, spec.resource_slice_class, spec.resources, spec.create_virtual_node)]


def wants_virtual_node(spec: OffloadingSpec) -> bool:
    """Whether any of the direction's slices asks Liqo for a virtual node."""
    return any(s.create_virtual_node for s in requested_slices(spec, "provider"))


def resource_slice(ctx: PeeringContext, req: SliceRequest) -> dict[str, Any]:
    provider_id = ctx.provider.cluster_id
    labels = ctx.labels(provider_id, **{naming.REPLICATION: "true", naming.REMOTE_ID: provider_id})
    annotations = {naming.CREATE_VIRTUAL_NODE: "true" if req.create_virtual_node else "false"}
    slice_spec: dict[str, Any] = {"class": req.cls, "providerClusterID": provider_id}
    if req.resources:
        # Liqo writes the slice back through Go structs: no empty map (omitempty), canonical quantities.
        slice_spec["resources"] = {name: canonical_quantity(qty) for name, qty in req.resources.items()}
    return {
        "apiVersion": resources.RESOURCE_SLICE.api_version,
        "kind": resources.RESOURCE_SLICE.kind,
        "metadata": ctx.metadata(req.name, ctx.consumer_tenant_ns, labels, annotations),
        "spec": slice_spec,
    }


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _owned(obj: dict[str, Any], owner: Mapping[str, str]) -> bool:
    labels = _meta(obj).get("labels") or {}
    return all(labels.get(k) == v for k, v in owner.items())


def made_from(vnode: dict[str, Any]) -> str:
    """The ResourceSlice a VirtualNode was made from: Liqo's label, else its name (Liqo names it after the slice)."""
    return str((_meta(vnode).get("labels") or {}).get(naming.RESOURCE_SLICE_NAME) or _meta(vnode)["name"])


@dataclass(frozen=True)
class Leftovers:
    """A direction's ResourceSlices and VirtualNodes that no requested slice accounts for (names), and which of
    them still exist (to wait for)."""

    slices: tuple[str, ...] = ()
    virtual_nodes: tuple[str, ...] = ()


def leftovers(
    slices: list[dict[str, Any]],
    vnodes: list[dict[str, Any]],
    wanted: set[str],
    owner: Mapping[str, str],
    provider_id: str,
) -> Leftovers:
    """What to remove of a direction's offloading, from the consumer's ResourceSlices and VirtualNodes for the
    provider: the slices this peering made that are no longer requested, and the VirtualNodes made from them,
    or from a slice already gone. A slice someone else made (liqoctl, another peering) and its virtual node are
    not ours; a VirtualNode of no slice is ours only under the single form's name, the provider's ID. The
    copies Liqo replicates in from the other cluster are not this direction's."""
    own = {str(_meta(s)["name"]): s for s in slices if (_meta(s).get("labels") or {}).get(naming.REPLICATED) != "true"}
    drop = sorted(name for name, s in own.items() if name not in wanted and _owned(s, owner))
    drop_nodes = []
    for vnode in vnodes:
        source = made_from(vnode)
        if source in wanted:
            continue
        made_by_slice = naming.RESOURCE_SLICE_NAME in (_meta(vnode).get("labels") or {})
        if source in drop or (source not in own and (made_by_slice or source == provider_id)):
            drop_nodes.append(str(_meta(vnode)["name"]))
    return Leftovers(tuple(drop), tuple(sorted(drop_nodes)))


def slice_conditions(obj: dict[str, Any] | None) -> dict[str, str]:
    """Condition type -> status (Accepted | Denied | …) of a ResourceSlice."""
    return {str(c.get("type")): str(c.get("status")) for c in mappings_at(obj, "status", "conditions")}


def virtual_kubelet_selector(provider_id: str, virtual_node: str) -> str:
    """The virtual kubelet's Pods of one virtual node for a provider (Liqo's VirtualKubeletLabels)."""
    return (
        f"{naming.VK_COMPONENT}={naming.VK_COMPONENT_VALUE},{naming.REMOTE_CLUSTER_ID}={provider_id},"
        f"{naming.VIRTUAL_NODE_LABEL}={virtual_node}"
    )


def _condition_true(obj: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in mappings_at(obj, "status", "conditions"))


def kubelet_started(pods: list[dict[str, Any]]) -> bool:
    """Whether one of a virtual node's virtual kubelet Pods runs Ready (and so has read its kubeconfig)."""
    return any(not p["metadata"].get("deletionTimestamp") and _condition_true(p, "Ready") for p in pods)


def virtual_node_usable(
    node: dict[str, Any] | None, pods: list[dict[str, Any]], network_checked: bool = True, restarting: bool = False
) -> tuple[bool, str]:
    """Liqo's own rule (ForeignCluster status.go), read at its source: the virtual Node is Ready and
    every virtual-kubelet Pod is Ready. Liqo's ForeignCluster learns it only when something wakes its
    controller (up to a minute later); the Node's Ready condition is the earliest authoritative signal.

    ``network_checked``: whether the Node's Ready includes the network. Liqo before v1.2 lets the virtual
    kubelet report Ready before it has looked at the network (see ``node_ready_checks_network``).
    ``restarting``: the operator has just restarted the virtual kubelet (engine/renewal.py), and its Pod or Node
    is not Ready again yet; the Node still counts as usable for a while.

    Returns (usable, what is still missing).
    """
    unready = sorted(str(p["metadata"]["name"]) for p in pods if not _condition_true(p, "Ready"))
    if restarting and node is not None and (unready or not pods or not _condition_true(node, "Ready")):
        # A restart the operator made: the Pods offloaded there keep running meanwhile.
        return True, (
            f"the virtual Node {node['metadata']['name']} stays usable while its virtual kubelet restarts to read its"
            " renewed certificate"
        )
    if not pods:
        return False, "waiting for Liqo to start the virtual kubelet"
    if unready:
        return False, f"waiting for the virtual kubelet Pod(s) {', '.join(unready)} to be Ready"
    if node is None:
        return False, "waiting for the virtual kubelet to register its Node"
    if not _condition_true(node, "Ready"):
        return False, f"waiting for the virtual Node {node['metadata']['name']} to be Ready"
    if not network_checked:
        return False, (
            f"the virtual Node {node['metadata']['name']} is Ready, but Liqo before v1.2 says so before it checks"
            f" the network: waiting for the tunnel to be Connected"
        )
    return True, f"the virtual Node {node['metadata']['name']} is Ready"


def node_ready_checks_network(consumer: LiqoVersion, networking: bool, connected: bool) -> bool:
    """Whether the virtual Node's Ready can be taken as Liqo on the consumer means it. Up to v1.1 the virtual
    kubelet treats networking as disabled until it has seen the ForeignCluster, so its Node turns Ready before
    the network check: then the tunnel itself must be Connected. Unknown versions are taken as v1.2."""
    return not networking or connected or consumer.at_least(1, 2) is not False


# Liqo's reasons for a Denied ResourceSlice condition (remoteresourceslice-controller on the provider):
# Authentication: an invalid certificate request, the slice outside the consumer's tenant namespace, or
# credentials it could not issue. Resources, built-in class: the consumer's Tenant cordoned or drained; on Liqo
# after v1.2.0, also a provider that turned its built-in `default` class off. A resource plugin serving another
# class denies with reasons of its own.
AUTHENTICATION_DENIED = "ResourceSliceAuthenticationDenied"
RESOURCES_DENIED = "ResourceSliceResourcesDenied"
DEFAULT_CLASS_DISABLED = "DefaultResourceSliceClassDisabled"
BUILT_IN_CLASSES = ("", "default")


@dataclass(frozen=True)
class Denial:
    """Where a denied ResourceSlice is, and who the clusters are, for the message (``field``: where the spec sets
    this direction's offloading, such as spec.offloading)."""

    namespace: str
    name: str
    provider: str  # the provider's side, as messages name it ("provider", or "consumer" in the reverse direction)
    consumer: str
    consumer_id: str
    field: str
    tenant_condition: str | None = None  # the provider's Tenant for this consumer: Active, Cordoned or Drained
    class_field: str = "resourceSliceClass"  # the field under ``field`` that sets the slice's class


def _denied_fix(cond: dict[str, Any], cls: str, d: Denial) -> str:
    """The fix that matches one Denied condition, from its type and Liqo's reason."""
    reason = str(cond.get("reason") or "")
    if cond.get("type") == "Authentication":
        return (
            f"the {d.provider} refused the slice's certificate request, or could not issue its credentials: its"
            f" Events on the {d.provider}'s copy of the ResourceSlice (InvalidCSR, AuthParamsFailed) say which;"
            f" check that the {d.provider} still holds this {d.consumer}'s Tenant and that Liqo runs there"
        )
    if reason == DEFAULT_CLASS_DISABLED:
        return (
            f"the {d.provider}'s Liqo has its built-in `default` ResourceSlice class turned off: set"
            f" {d.field}.{d.class_field} to a class the {d.provider} serves (its administrator knows which)"
        )
    if d.tenant_condition in ("Cordoned", "Drained"):
        return (
            f"the {d.provider} has {d.tenant_condition.lower()} this {d.consumer}'s Tenant, so it grants nothing new:"
            f" set the Tenant's spec.tenantCondition back to Active on the {d.provider} (`liqoctl uncordon tenant"
            f" {d.consumer_id}` there, for a cordoned one)"
        )
    plugin = "" if cls in BUILT_IN_CLASSES else f"; the {d.provider}'s Liqo resource plugin for class {cls!r} decides"
    return f"ask for fewer resources in {d.field}.resources, or free some on the {d.provider}{plugin}"


def denial_message(obj: dict[str, Any], d: Denial) -> str | None:
    """Why the provider denied a ResourceSlice, quoting Liqo's condition reason and message, with the fix that
    matches each; None when no condition is Denied."""
    denied = [c for c in mappings_at(obj, "status", "conditions") if c.get("status") == "Denied"]
    if not denied:
        return None
    cls = text_at(obj, "spec", "class") or ""
    said = []
    for cond in sorted(denied, key=lambda c: str(c.get("type"))):
        quoted = ": ".join(str(cond[k]) for k in ("reason", "message") if cond.get(k))
        said.append(f"{cond.get('type')} Denied ({quoted or 'no reason given'}): {_denied_fix(cond, cls, d)}")
    return (
        f"the {d.provider} Denied ResourceSlice {d.namespace}/{d.name} on the {d.consumer}"
        f" ({' and '.join(str(c.get('type')) for c in denied)}); " + "; ".join(said)
    )

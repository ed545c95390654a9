"""What a LiqoPeeringSet wants and the next writes to get there, as controller-runtime's owner pattern (pure).

One LiqoPeering (a "child") per provider the selector picks (fleet.members: a Secret, a Cluster, a
ClusterProfile), named after the set and that object, labelled with the set's name, owned by the set
(controller). ``desired_children`` says which children there should
be; ``plan`` compares them with the live ones and says what to create, update or delete, and what waits
for a slot (maxConcurrent) or for its provider to become available (a Cluster being provisioned: not made
until it is, but kept once made). A selected Secret deleted while its LiqoPeering exists is kept, for that
LiqoPeering's unpeering, by the operator's kubeconfig protection (engine.protection), as any LiqoPeering's.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from liqo_peering.api.model import LiqoPeeringSpec
from liqo_peering.api.peeringset import KIND, LabelSelector, Source
from liqo_peering.fleet import members
from liqo_peering.fleet.members import controller
from liqo_peering.fleet.selector import matches
from liqo_peering.liqo import naming

NAME_MAX_LENGTH = 63  # a LiqoPeering's name is a label value on every Liqo object it makes
HASH_LENGTH = 8
SETTLED = ("ready", "error", "timeout")

Obj = dict[str, Any]
# Why a child is written, as the set's status and Events name it.
Why = Literal["Created", "TemplateChanged", "Overwritten", "Adopted", "Removed"]


def child_name(set_name: str, member_name: str) -> str:
    """``<set>-<member>``: stable, and a DNS label. When that is too long or has dots (a Secret name may),
    the rest is cut and a hash of both names appended, so that two members never share a name."""
    base = f"{set_name}-{member_name}"
    if len(base) <= NAME_MAX_LENGTH and "." not in base:
        return base
    digest = hashlib.sha256(f"{set_name}/{member_name}".encode()).hexdigest()[:HASH_LENGTH]
    stem = base.replace(".", "-")[: NAME_MAX_LENGTH - HASH_LENGTH - 1].rstrip("-")
    return f"{stem}-{digest}"


def spec_hash(spec: Obj) -> str:
    """A LiqoPeering spec's fingerprint, insensitive to defaults (the API server fills them in on one side)."""
    try:
        normal: Any = LiqoPeeringSpec.model_validate(spec).model_dump(mode="json", by_alias=True, exclude_none=True)
    except ValidationError:
        normal = {"unparsed": spec}
    return hashlib.sha256(json.dumps(normal, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Desired:
    name: str
    member: members.Member
    spec: Obj
    spec_hash: str

    @property
    def secret(self) -> str | None:
        return self.member.secret


def child_spec(template: Obj, member: members.Member) -> Obj:
    return {**copy.deepcopy(member.ref), **copy.deepcopy(template)}


def deleting(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def desired_children(
    set_name: str, template: Obj, selector: LabelSelector, objects: list[Obj], source: Source = "Secret"
) -> dict[str, Desired]:
    """One child per object of ``source``'s kind the selector picks, by child name; not objects being
    deleted, nor what fleet.members turns down (the minted credentials a LiqoPeering owns)."""
    out: dict[str, Desired] = {}
    for obj in sorted(objects, key=lambda o: str(o["metadata"]["name"])):
        meta = obj["metadata"]
        if deleting(obj) or not matches(selector, meta.get("labels") or {}):
            continue
        member = members.of(source, obj)
        if member is None:
            continue
        name = child_name(set_name, member.name)
        spec = child_spec(template, member)
        out.setdefault(name, Desired(name, member, spec, spec_hash(spec)))
    return out


def owned_by_a_set(obj: Obj, uid: str | None = None) -> bool:
    ref = controller(obj)
    return ref is not None and ref.get("kind") == KIND and (uid is None or ref.get("uid") == uid)


def settled(child: Obj) -> bool:
    """Its own reconcile has answered the current spec: ready, or failed (which holds no slot)."""
    status = child.get("status") or {}
    generation = (child.get("metadata") or {}).get("generation")
    return status.get("observedGeneration") == generation and status.get("peerStatus") in SETTLED


@dataclass(frozen=True)
class Action:
    verb: Literal["create", "update", "delete"]
    name: str
    why: Why
    desired: Desired | None = None


@dataclass(frozen=True)
class Plan:
    actions: list[Action] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # desired children whose create or update waits for a slot
    conflicts: dict[str, str] = field(default_factory=dict)  # name -> why the set cannot have it
    removing: list[str] = field(default_factory=list)  # children of the set that are going (not desired)
    unavailable: list[str] = field(default_factory=list)  # desired, not made: their provider is not available yet


def plan(
    set_uid: str, set_name: str, desired: dict[str, Desired], children: list[Obj], max_concurrent: int | None
) -> Plan:
    """The writes that bring ``children`` (the live LiqoPeerings labelled with the set) to ``desired``.

    Creates and spec updates make a child establish, so they take a slot: at most ``max_concurrent``
    children establish at once (counting those already establishing); the rest wait. Deletes, and updates
    of metadata only (adoption), never wait.
    """
    by_name = {c["metadata"]["name"]: c for c in children}
    out = Plan()
    in_flight = 0
    spec_writes: list[Action] = []
    for name, want in desired.items():
        child = by_name.get(name)
        if child is None and want.member.unavailable is not None:
            out.unavailable.append(name)  # a peering once made stays: its own status says how it fares
            continue
        if child is None:
            spec_writes.append(Action("create", name, "Created", want))
            continue
        if deleting(child):
            out.removing.append(name)  # re-created once gone
            continue
        owner = controller(child)
        if owner is not None and not owned_by_a_set(child, set_uid):
            out.conflicts[name] = f"LiqoPeering {name} belongs to {owner.get('kind')} {owner.get('name')}"
            continue
        establishing = owner is not None and not settled(child)
        in_flight += establishing
        meta = child["metadata"]
        recorded = (meta.get("annotations") or {}).get(naming.SET_SPEC_HASH)
        live = spec_hash(child.get("spec") or {})
        labelled = (meta.get("labels") or {}).get(naming.SET_LABEL) == set_name
        if live != want.spec_hash:
            why: Why = (
                "Adopted" if owner is None else "Overwritten" if recorded == want.spec_hash else "TemplateChanged"
            )
            # One already establishing holds its slot: its update takes no other.
            (out.actions if establishing else spec_writes).append(Action("update", name, why, want))
        elif owner is None or recorded != want.spec_hash or not labelled:
            out.actions.append(Action("update", name, "Adopted", want))
    for name, child in by_name.items():
        if name not in desired and owned_by_a_set(child, set_uid):
            out.removing.append(name)
            if not deleting(child):
                out.actions.append(Action("delete", name, "Removed"))
    slots = len(spec_writes) if max_concurrent is None else max(0, max_concurrent - in_flight)
    ordered = sorted(spec_writes, key=lambda a: (a.verb != "update", a.name))  # existing children first
    out.actions.extend(ordered[:slots])
    out.waiting.extend(a.name for a in ordered[slots:])
    out.removing.sort()
    return out


def child_object(set_body: Obj, want: Desired, live: Obj | None = None) -> Obj:
    """The child as the set writes it: ``live`` (kept: its finalizers, annotations, status) with the set's
    labels, owner reference, spec and the hash of that spec."""
    meta = set_body["metadata"]
    obj = copy.deepcopy(live) if live is not None else {"apiVersion": set_body["apiVersion"], "kind": "LiqoPeering"}
    obj.setdefault("metadata", {}).update(name=want.name, namespace=meta["namespace"])
    child_meta = obj["metadata"]
    child_meta["labels"] = {**(child_meta.get("labels") or {}), naming.SET_LABEL: meta["name"]}
    child_meta["annotations"] = {**(child_meta.get("annotations") or {}), naming.SET_SPEC_HASH: want.spec_hash}
    others = [ref for ref in child_meta.get("ownerReferences") or [] if ref.get("uid") != meta["uid"]]
    child_meta["ownerReferences"] = [*others, owner_reference(set_body)]
    obj["spec"] = copy.deepcopy(want.spec)
    obj.pop("status", None)
    return obj


def owner_reference(set_body: Obj) -> Obj:
    meta = set_body["metadata"]
    return {
        "apiVersion": set_body["apiVersion"],
        "kind": KIND,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }

"""spec.commonMetadata on every object a peering makes: which labels and annotations go on, and what must
change on an object already there so that it carries exactly the current ones (no object is re-created).

Each object made with common metadata records the keys it was given in one annotation (RECORD), so that a key
dropped from the spec is known to be ours to remove, and a key someone else put there is left alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from liqo_peering.api.model import MAX_COMMON_KEYS, CommonMetadata
from liqo_peering.fields import mapping
from liqo_peering.liqo import naming

RECORD = naming.COMMON_METADATA  # {"annotations": [keys], "labels": [keys]}, sorted
# The longest record record() writes: MAX_COMMON_KEYS label and annotation keys of at most 317 characters
# (a 253-character prefix, a slash, a 63-character name), quoted and separated. A longer one is not ours.
MAX_RECORD_LENGTH = 2 * MAX_COMMON_KEYS * (317 + 4) + 64


@dataclass(frozen=True)
class Common:
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, spec: CommonMetadata) -> Common:
        return cls(dict(spec.labels), dict(spec.annotations))

    def record(self) -> str | None:
        """The RECORD annotation's value; None when there is nothing common."""
        if not self.labels and not self.annotations:
            return None
        return json.dumps({"annotations": sorted(self.annotations), "labels": sorted(self.labels)}, sort_keys=True)


NONE = Common()


def decorate(meta: dict[str, Any], common: Common) -> dict[str, Any]:
    """``meta`` with the common labels and annotations under its own: the builder's keys win."""
    record = common.record()
    if record is None:
        return meta
    out = dict(meta)
    out["labels"] = {**common.labels, **(meta.get("labels") or {})}
    out["annotations"] = {**common.annotations, **(meta.get("annotations") or {}), RECORD: record}
    return out


def dress(obj: dict[str, Any], common: Common) -> dict[str, Any]:
    """A built object with the common metadata (for builders that know no peering context)."""
    return {**obj, "metadata": decorate(obj["metadata"], common)}


def recorded(obj: dict[str, Any] | None) -> tuple[set[str], set[str]]:
    """The (label, annotation) keys an object says it was given as common metadata."""
    value = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(RECORD)
    # Anyone who may edit the object may edit the record: read it within bounds, and as what record() writes.
    if not isinstance(value, str) or not value or len(value) > MAX_RECORD_LENGTH:
        return set(), set()
    try:
        doc = json.loads(value)
    except (ValueError, RecursionError):
        return set(), set()
    return _keys(mapping(doc).get("labels")), _keys(mapping(doc).get("annotations"))


def _keys(value: Any) -> set[str]:
    return {k for k in value if isinstance(k, str)} if isinstance(value, list) else set()


def record_of(obj: dict[str, Any] | None) -> str | None:
    value = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(RECORD)
    return str(value) if value else None


def dropped(live: dict[str, Any] | None, desired: dict[str, Any]) -> dict[str, dict[str, None]]:
    """The common keys ``live`` was given that ``desired`` no longer has, as a merge patch's removals (plus the
    record itself when nothing is common any more)."""
    old_labels, old_annotations = recorded(live)
    new_labels, new_annotations = recorded(desired)
    out: dict[str, dict[str, None]] = {}
    labels = {k: None for k in sorted(old_labels - new_labels)}
    annotations = {k: None for k in sorted(old_annotations - new_annotations)}
    if record_of(live) is not None and record_of(desired) is None:
        annotations[RECORD] = None
    if labels:
        out["labels"] = labels
    if annotations:
        out["annotations"] = annotations
    return out


def metadata_patch(live: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch bringing ``live``'s common metadata to ``desired``'s, or None when it has it already: for
    objects that are created once and never applied again (namespaces, nonces, the Tenant)."""
    want = desired.get("metadata") or {}
    have = live.get("metadata") or {}
    new_labels, new_annotations = recorded(desired)
    patch: dict[str, dict[str, Any]] = {}
    record = {RECORD} if new_labels or new_annotations else set()
    for kind, keys in (("labels", new_labels), ("annotations", new_annotations | record)):
        wanted = want.get(kind) or {}
        current = have.get(kind) or {}
        changed = {k: wanted[k] for k in sorted(keys) if k in wanted and current.get(k) != wanted[k]}
        if changed:
            patch[kind] = changed
    for kind, removals in dropped(live, desired).items():
        patch.setdefault(kind, {}).update(removals)
    return {"metadata": patch} if patch else None


def over(live: dict[str, Any] | None, desired: dict[str, Any]) -> dict[str, Any]:
    """``desired`` as an overlay on ``live`` that also removes the common keys dropped since (for a client that
    updates instead of applying: server-side apply removes them by itself)."""
    removals = dropped(live, desired)
    if not removals:
        return desired
    meta = dict(desired.get("metadata") or {})
    for kind, keys in removals.items():
        meta[kind] = {**keys, **(meta.get(kind) or {})}
    return {**desired, "metadata": meta}

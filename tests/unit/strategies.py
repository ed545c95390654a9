"""Hypothesis strategies the property tests share: what Liqo's objects may hold when they are not what Liqo
writes."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from hack import crdgen

# The LiqoPeering status schema: whatever the readers build from Liqo's objects must validate against it.
STATUS_SCHEMA = crdgen.render_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]

junk = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
anything = st.recursive(
    junk,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def field(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly what Liqo writes, sometimes anything at all (a wrong type, a list, a mapping, None)."""
    return st.one_of(good, good, anything)

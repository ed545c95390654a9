"""No module of the operator holds a mutable container at module level: state lives in the objects the CLI
wires (the reconciler, the unpeerer, the runner, the watch hub), owned, locked where threads share it, and pruned.

Each module is imported and every name its top level assigns is looked at: a dict, list, set, deque or
weak mapping there is state shared by every thread and every test. A constant is a tuple, a frozenset or a
MappingProxyType.
"""

from __future__ import annotations

import ast
import collections
import importlib
import weakref
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "operator"
MUTABLE = (
    dict,
    list,
    set,
    bytearray,
    collections.deque,
    weakref.WeakKeyDictionary,
    weakref.WeakValueDictionary,
    weakref.WeakSet,
)
# (module, name suffix): why a mutable container is a constant there.
ALLOWED = {
    ("liqo_peering.api.model", "_RULE"): "a CEL rule, a JSON Schema fragment that pydantic and hack/crdgen.py "
    "copy into the CRDs; they take dicts, and nothing writes it",
    ("liqo_peering.api.peeringset", "_RULE"): "as api.model's rules",
}


def module_names(path: Path) -> list[str]:
    """The names the module's top level assigns (tuple targets included)."""
    names = []
    for node in ast.parse(path.read_text()).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names += [n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)]
    return names


def mutable_globals() -> list[str]:
    found = []
    for path in sorted((SOURCE / "liqo_peering").rglob("*.py")):
        parts = path.relative_to(SOURCE).with_suffix("").parts
        module_name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        module = importlib.import_module(module_name)
        for name in module_names(path):
            if any(module_name == m and name.endswith(suffix) for m, suffix in ALLOWED):
                continue
            if isinstance(getattr(module, name, None), MUTABLE):
                found.append(f"{module_name}.{name} ({type(getattr(module, name)).__name__})")
    return found


def test_no_module_holds_a_mutable_container() -> None:
    found = mutable_globals()
    assert not found, (
        "module-level mutable containers (make them tuples, frozensets or MappingProxyType, or state of an "
        "object the CLI wires): " + ", ".join(found)
    )


def test_the_scan_sees_a_module_level_dict(tmp_path: Path) -> None:
    source = "import weakref\n\nCACHE: dict[str, int] = {}\nA, B = [], ()\nREFS = weakref.WeakKeyDictionary()\n"
    (tmp_path / "stateful.py").write_text(source)
    assert module_names(tmp_path / "stateful.py") == ["CACHE", "A", "B", "REFS"]

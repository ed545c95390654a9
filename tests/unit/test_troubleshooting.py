"""docs/troubleshooting.md lists every reason the operator can write, found in the code by an AST scan.

A reason is what the operator puts in a condition's ``reason`` (Ready, Reconciling, Stalled, the stage
conditions, CredentialsMinted, a LiqoPeeringSet's), in a LiqoPeeringSet line's ``reason``, or in an Event's
``reason``. The scan finds them where the code spells them:

* a class attribute ``reason = "X"`` (every PeeringError and KubeconfigError subclass);
* a keyword argument ``reason="X"`` or ``error_reason="X"``, to any call;
* an assignment to a name or attribute ending in ``reason`` (``stall_reason = "Timeout"``,
  ``self.reason = "X"``, tuple assignments too);
* the reason argument of ``StageResult.waiting``/``failed``, ``EventSpec``, ``make_condition``, an Event's
  ``emit`` and a set line's ``_line``;
* a ``(status, reason, message)`` tuple returned with a literal status ("True", "False", "Unknown" or a bool);
* a dict literal's ``"reason"`` entry.

Each place may hold a literal, a module constant (``PENDING``) or a choice between them (``"A" if x else "B"``,
``reason or PENDING``). The page may list reasons the code does not write (yet): only missing ones fail.
"""

from __future__ import annotations

import ast
import re
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path

from liqo_peering.fleet import children
from liqo_peering.stages import REVERSE_STAGE_CONDITIONS, STAGE_CONDITIONS

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "operator" / "liqo_peering"
PAGE = REPO / "docs" / "troubleshooting.md"

# A condition reason as the operator writes them: CamelCase (metav1.Condition allows more, the code uses this).
REASON = re.compile(r"^[A-Z][A-Za-z0-9]*$")
# The position of the reason among the positional arguments of the calls that take one.
REASON_ARGUMENT = {"waiting": 1, "failed": 1, "EventSpec": 1, "make_condition": 2, "emit": 2, "_line": 3}
CONDITION_STATUSES = ("True", "False", "Unknown", True, False)
# Reasons the code computes but writes nowhere: status/foreigncluster.module_condition's, of which
# status/compute.py keeps only the status and the message.
NOT_WRITTEN = frozenset(
    {
        "ForeignClusterMissing",
        "ModuleDisabled",
        "ModuleNotEnabled",
        "ModuleConditionsPending",
        "ModuleUnhealthy",
        "ModulePending",
        "ModuleHealthy",
    }
)


def module_constants(tree: ast.Module) -> dict[str, str]:
    """The module-level string constants: ``NAME = "x"`` and ``A, B = "x", "y"``."""
    found: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            for name, value in _pairs(target, node.value):
                if isinstance(name, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found[name.id] = value.value
    return found


def _pairs(target: ast.expr, value: ast.expr) -> Iterator[tuple[ast.expr, ast.expr]]:
    """Each target with the value it gets, through tuple unpacking of a tuple literal."""
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts, strict=True):
            yield from _pairs(t, v)
    else:
        yield target, value


def _names_a_reason(target: ast.expr) -> bool:
    """A variable or attribute whose name ends in ``reason``: ``stall_reason``, ``self.reason``."""
    name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""
    return name.lower().endswith("reason")


def _assigns_reason(item: ast.Assign | ast.AnnAssign) -> bool:
    """A class body's ``reason = ...`` or ``reason: str = ...``."""
    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
    return any(isinstance(t, ast.Name) and t.id == "reason" for t in targets)


class ReasonScan:
    """The reasons written in a set of modules (their sources), and where each is spelled."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.trees = {name: ast.parse(text, filename=name) for name, text in sources.items()}
        self.constants = {name: module_constants(tree) for name, tree in self.trees.items()}
        # A constant named as an attribute (creds.CONDITION) is resolved when one module defines that name.
        defined: dict[str, set[str]] = {}
        for consts in self.constants.values():
            for key, value in consts.items():
                defined.setdefault(key, set()).add(value)
        self.unique = {key: next(iter(values)) for key, values in defined.items() if len(values) == 1}
        self.found: dict[str, set[str]] = {}
        for name, tree in self.trees.items():
            self._scan(name, tree)

    def _strings(self, module: str, node: ast.expr | None) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.IfExp):
            return self._strings(module, node.body) | self._strings(module, node.orelse)
        if isinstance(node, ast.BoolOp):
            return set().union(*(self._strings(module, v) for v in node.values))
        if isinstance(node, ast.Name) and node.id in self.constants[module]:
            return {self.constants[module][node.id]}
        if isinstance(node, ast.Attribute) and node.attr in self.unique:
            return {self.unique[node.attr]}
        return set()

    def _add(self, module: str, node: ast.AST, values: Iterable[str]) -> None:
        for value in values:
            if REASON.fullmatch(value):
                self.found.setdefault(value, set()).add(f"{module}:{getattr(node, 'lineno', 0)}")

    def _scan(self, module: str, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.Assign | ast.AnnAssign) and _assigns_reason(item):
                        self._add(module, item, self._strings(module, item.value))
            elif isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg is not None and kw.arg.endswith("reason"):
                        self._add(module, node, self._strings(module, kw.value))
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                position = REASON_ARGUMENT.get(called)
                if position is not None and len(node.args) > position:
                    self._add(module, node, self._strings(module, node.args[position]))
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    for name, value in _pairs(target, node.value):
                        if _names_a_reason(name):
                            self._add(module, node, self._strings(module, value))
            elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) == 3:
                status = node.value.elts[0]
                if isinstance(status, ast.Constant) and status.value in CONDITION_STATUSES:
                    self._add(module, node, self._strings(module, node.value.elts[1]))
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "reason":
                        self._add(module, node, self._strings(module, value))


def code_reasons() -> dict[str, set[str]]:
    """Every reason the operator writes, with where it is spelled."""
    sources = {str(p.relative_to(REPO)): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}
    found = ReasonScan(sources).found
    # Reasons held in variables the scan cannot follow: a stage condition turning True is an Event of that
    # name (status/compute.py), and a LiqoPeeringSet line says why the set wrote a LiqoPeering (fleet/children).
    for value in (*STAGE_CONDITIONS.values(), *REVERSE_STAGE_CONDITIONS.values(), *typing.get_args(children.Why)):
        found.setdefault(value, set()).add("named in a variable")
    return found


def documented_reasons(text: str) -> set[str]:
    """The reasons the page lists: each `Name` in the first cell of a table row."""
    names: set[str] = set()
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        first = line.split("|")[1]
        names.update(n for n in re.findall(r"`([^`]+)`", first) if REASON.fullmatch(n))
    return names


def test_every_reason_in_the_code_is_on_the_troubleshooting_page() -> None:
    documented = documented_reasons(PAGE.read_text())
    missing = {r: sorted(w) for r, w in code_reasons().items() if r not in documented and r not in NOT_WRITTEN}
    assert not missing, (
        "docs/troubleshooting.md has no row for these reasons (add one with the cause and the fix): "
        + "; ".join(f"{r} ({', '.join(w)})" for r, w in sorted(missing.items()))
    )


def test_the_scan_finds_the_reasons_of_each_kind_of_place() -> None:
    found = code_reasons()
    # One of each: a class attribute, a keyword, a stage wait, a returned tuple, an assignment, an Event,
    # a module constant in a set line, a dict entry.
    for reason in (
        "SecretNotFound",
        "ConsumerUnreachable",
        "WaitingForConnection",
        "ModuleHealthy",
        "PeeringEstablished",
        "Unpeered",
        "Pending",
        "LiqoPeeringOperatorApproval",
    ):
        assert reason in found
    # The exceptions are still in the code: a stale one would hide a reason that comes back.
    assert set(found) >= NOT_WRITTEN


def test_the_scan_catches_a_new_error_class_and_a_new_keyword_reason() -> None:
    source = """
from liqo_peering.errors import PeeringError

LATER = "FromAConstant"

class QuotaExceeded(PeeringError):
    reason = "QuotaExceeded"
    transient = False

def write(exc):
    raise PeeringError("the namespace is being deleted", reason="NamespaceTerminating")

def choose(flag):
    return PeeringError("x", reason="Chosen" if flag else LATER)

class ByItsSide(PeeringError):
    def __init__(self, side):
        super().__init__("refused")
        self.reason = "ConsumerForbidden" if side == "consumer" else "ProviderForbidden"
"""
    assert set(ReasonScan({"new.py": source}).found) == {
        "QuotaExceeded",
        "NamespaceTerminating",
        "Chosen",
        "FromAConstant",
        "ConsumerForbidden",
        "ProviderForbidden",
    }


def test_the_page_parser_reads_the_first_cell_of_each_row() -> None:
    page = "| reason | cause |\n| --- | --- |\n| `A`, `Bee` | uses `NotThis` |\ntext `Nor` this\n"
    assert documented_reasons(page) == {"A", "Bee"}

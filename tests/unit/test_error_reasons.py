"""A reason is an error class's: no raise site spells one, each documented error reason is one class's, a
reason that names its cluster is a subclass per side, and a stage's error reaches the status as it was."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import liqo_peering
from liqo_peering import errors
from liqo_peering.errors import (
    AccessRefused,
    ClusterForbidden,
    ClusterUnreachable,
    ConsumerForbidden,
    ConsumerUnauthorized,
    ConsumerUnreachable,
    PeeringError,
    ProviderForbidden,
    ProviderUnauthorized,
    ProviderUnreachable,
    Request,
    Unauthorized,
)
from liqo_peering.stages import StageResult
from unit.test_boundary import conditions, service

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "operator" / "liqo_peering"
PAGE = REPO / "docs" / "troubleshooting.md"
REASON = re.compile(r"^[A-Z][A-Za-z0-9]*$")
# Documented reasons no class has any more, kept on the page for a status written by an older operator.
LEGACY: dict[str, str] = {}


def _strings(node: ast.expr) -> bool:
    """Whether ``node`` is a string spelt there: a literal, or a choice between literals."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.IfExp):
        return _strings(node.body) or _strings(node.orelse)
    return isinstance(node, ast.BoolOp) and any(_strings(v) for v in node.values)


def spelt_reasons(source: str, filename: str = "<source>") -> list[str]:
    """Where ``source`` gives an error its reason other than as a class attribute: a ``reason=`` argument
    spelt as a string, any ``reason=`` argument to a PeeringError, or ``something.reason = ...``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            for kw in node.keywords:
                if kw.arg == "reason" and (_strings(kw.value) or called == "PeeringError"):
                    found.append(f"{filename}:{node.lineno} {called}(reason=...)")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "reason":
                    found.append(f"{filename}:{node.lineno} {ast.unparse(target)} = ...")
    return found


def test_no_code_gives_an_error_its_reason_at_the_raise_site() -> None:
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in spelt_reasons(path.read_text(), str(path))]
    assert not found, "a reason is a class attribute of an error class: " + "; ".join(found)
    assert "reason" not in inspect.signature(PeeringError.__init__).parameters


def test_the_scan_finds_a_spelt_reason() -> None:
    source = """
raise PeeringError("x", reason="Spelt")
raise PeeringError("x", reason=other.reason)
log.warning("y", reason="Logged" if a else "Other")
self.reason = "Chosen"
log.warning("y", reason=exc.reason)
"""
    assert sorted(hit.split(" ", 1)[0] for hit in spelt_reasons(source)) == [
        "<source>:2",
        "<source>:3",
        "<source>:4",
        "<source>:5",
    ]


def error_classes() -> list[type[PeeringError]]:
    """Every PeeringError class of the operator (each of its modules imported)."""
    for module in pkgutil.walk_packages(liqo_peering.__path__, "liqo_peering."):
        importlib.import_module(module.name)
    found, todo = [], [PeeringError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return [cls for cls in found if cls.__module__.startswith("liqo_peering")]


def classes_by_reason() -> dict[str, list[str]]:
    """Each reason with the classes that define it (a subclass that inherits its reason does not count)."""
    by_reason: dict[str, list[str]] = {}
    for cls in error_classes():
        if "reason" in vars(cls):
            by_reason.setdefault(vars(cls)["reason"], []).append(cls.__qualname__)
    return by_reason


def error_table(text: str) -> set[str]:
    """The reasons in the first cell of the Errors section's table."""
    section = text.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    return {
        name
        for line in section.splitlines()
        if line.startswith("|")
        for name in re.findall(r"`([^`]+)`", line.split("|")[1])
        if REASON.fullmatch(name)
    }


def test_every_documented_error_reason_is_one_class() -> None:
    documented, by_reason = error_table(PAGE.read_text()), classes_by_reason()
    assert documented >= {"ProviderForbidden", "InvalidSpec", "CertificateRefused"}  # the table was found
    wrong = {r: by_reason.get(r, []) for r in documented - set(LEGACY) if len(by_reason.get(r, [])) != 1}
    assert not wrong, f"documented reasons that are not exactly one class's: {wrong}"
    assert not set(LEGACY) & set(by_reason), "a legacy reason is a class's again: list it as any other"
    undocumented = set(by_reason) - documented
    assert not undocumented, f"error classes whose reason docs/troubleshooting.md does not list: {undocumented}"


ASKED = Request(server="https://p:6443", verb="get", resource="namespaces", name="t")


# Where a user page or the chart says what a peering "reports": each such reason is one the code writes.
SAID = re.compile(r"reports `?([A-Z][A-Za-z0-9]+)`?")
USER_PAGES = [
    REPO / "README.md",
    REPO / "deploy" / "helm" / "liqo-peering-operator" / "values.yaml",
    REPO / "deploy" / "helm" / "liqo-peering-operator" / "README.md",
    *sorted((REPO / "docs").rglob("*.md")),
]


def test_every_reason_a_page_says_a_peering_reports_is_written_by_the_code() -> None:
    by_reason = classes_by_reason()
    said = {(str(p.relative_to(REPO)), m) for p in USER_PAGES for m in SAID.findall(p.read_text())}
    assert said, "no page says what a peering reports: the pattern no longer matches"
    assert not {(page, reason) for page, reason in said if reason not in by_reason}


@pytest.mark.parametrize(
    ("made", "expected", "reason"),
    [
        (ClusterForbidden(side="consumer", request=ASKED), ConsumerForbidden, "ConsumerForbidden"),
        (ClusterForbidden(side="provider", request=ASKED), ProviderForbidden, "ProviderForbidden"),
        (Unauthorized(side="consumer", request=ASKED), ConsumerUnauthorized, "Unauthorized"),
        (Unauthorized(side="provider", request=ASKED), ProviderUnauthorized, "ProviderUnauthorized"),
        (ClusterUnreachable("consumer", "https://c", "refused"), ConsumerUnreachable, "ConsumerUnreachable"),
        (ClusterUnreachable("provider", "https://p", "refused"), ProviderUnreachable, "ProviderUnreachable"),
        (errors.AnswerTooLarge("consumer", ASKED, "big"), errors.ConsumerAnswerTooLarge, "ConsumerAnswerTooLarge"),
        (errors.AnswerInvalid("provider", ASKED, "html"), errors.ProviderAnswerInvalid, "ProviderAnswerInvalid"),
    ],
)
def test_an_error_made_for_a_side_is_that_sides_class(made: PeeringError, expected: type, reason: str) -> None:
    assert type(made) is expected and made.reason == reason == expected.reason


def test_a_401_and_a_403_are_both_refused_access_and_neither_is_the_other() -> None:
    denied, unknown = ClusterForbidden(side="provider", request=ASKED), Unauthorized(side="provider", request=ASKED)
    assert isinstance(denied, AccessRefused) and isinstance(unknown, AccessRefused)
    assert not isinstance(unknown, ClusterForbidden) and not isinstance(denied, Unauthorized)
    assert denied.transient and unknown.transient


def test_a_restated_error_keeps_its_class_and_fields() -> None:
    denied = ClusterForbidden(side="provider", request=ASKED, reverse=False)
    told = denied.restated("minting needs more: " + denied.refused, transient=False)
    assert type(told) is ProviderForbidden and told.request == ASKED and told.side == "provider"
    assert (told.message, str(told), told.transient) == ("minting needs more: " + denied.refused, told.message, False)
    assert denied.transient and denied.message != told.message  # the original is left as it was
    assert told.in_reverse("liqo").message == told.message  # no longer built from its fields


def test_a_stages_error_reaches_the_status_as_the_stage_met_it(monkeypatch: pytest.MonkeyPatch) -> None:
    met = ClusterForbidden(side="provider", request=ASKED)

    def refused(*_: object) -> StageResult:
        raise met

    svc, local, _ = service(monkeypatch, networking=refused)
    outcome = svc.reconcile("team-a", "to-provider")
    assert outcome.error is met
    ready, stage = conditions(local)["Ready"], conditions(local)["NetworkReady"]
    assert ready["reason"] == stage["reason"] == "ProviderForbidden"
    assert ready["message"] == stage["message"] == met.message

"""The test environment's pytest plugin: `pytest_plugins = ["testenv.pytest_plugin"]` in a conftest.py.

Fixtures:
- `local_clusters` (session): {"consumer", "provider"} LocalClusters (testenv.localk8s);
- `liqo_clusters` (session): those with Liqo's CRDs and chart objects (testenv.liqo_env);
- `liqo_standin` (function): the Liqo stand-in as a process, with fault knobs (testenv.standin);
- `real_liqo` (session): two more clusters running Liqo's real control plane (testenv.liqo_real);
- `operator_env` (session): the LiqoPeering CRD (read from crds/) installed on `liqo_clusters` and the
  operator running as a process against the consumer (testenv.operator_support) as the ServiceAccount of
  the chart installed there (testenv.chart_rbac);
- `case` (function): a namespace of its own with the provider's kubeconfig in a Secret, its peerings
  unpeered afterwards;
- `leak_scan` (session): every credential the run's clusters held, and every operator log, Event and
  LiqoPeering status, for tests/e2e/test_zz_no_leaks.py (testenv.leakscan).
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import pytest

from testenv import audit, chart_rbac, crashwatch, reliability
from testenv.leakscan import LeakScan
from testenv.localk8s import ports
from testenv.operator_support import (
    SECRET,
    OperatorEnv,
    PeeringCase,
    Peerings,
    api_client,
    install_crd,
)
from testenv.rbacproof import collect as rbac_collect

if TYPE_CHECKING:  # imported for real by pytest_plugins, after pytest has set up its assertion rewriting
    from testenv.liqo_env.pytest_plugin import LiqoClusters, StandInProcess

pytest_plugins = [
    "testenv.localk8s.pytest_plugin",
    "testenv.liqo_env.pytest_plugin",
    "testenv.liqo_real.pytest_plugin",
]


# Tiers: runs of the suite that share no cluster, so that hack/run-tests.sh can run them side by side.
# A test belongs to the tier of the clusters its fixtures start; the leak scan belongs to every tier.
TIERS = ("main", "nodes", "liqo", "matrix", "gitops", "solo", "standin")


def tier_of(fixturenames: Iterable[str], markers: Iterable[str] = ()) -> str:
    names, marks = set(fixturenames), set(markers)
    if "liqo_matrix_pair" in names:
        return "matrix"  # Liqo's chart of each other version of LIQO_MATRIX on a pair of its own
    if "real_liqo" in names or "liqochart" in marks:  # test_liqo_chart asks for real_liqo at run time
        return "liqo"  # Liqo's chart on two clusters with a node each (testenv.liqo_real / liqo_chart)
    if names & {"node_clusters", "two_node_clusters", "node_images"} or "image" in marks:
        return "nodes"  # clusters with real nodes, the operator's image in them
    if "gitops" in marks:
        return "gitops"  # Argo CD's and Flux's controllers beside control planes of their own
    if "standin" in marks:
        return "standin"  # the stand-in on control planes of their own, a second process beside main's
    if marks & {"solo", "faults"}:
        return "solo"  # clusters of a module's own, shared with no other module (faults: hundreds of passes)
    return "main"  # control planes without nodes, the stand-in; unit tests


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=TIERS,
        default=None,
        help="run only the tests of one tier (clusters of its own; hack/run-tests.sh runs tiers side by side)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tests in an `e2e` directory (tests/e2e, testenv/tests/e2e) need the local clusters: marked `e2e`,
    # so that `-m "not e2e"` leaves them all out.
    for item in items:
        where = item.path.parent
        if where.is_relative_to(config.rootpath):
            where = where.relative_to(config.rootpath)
        if "e2e" in where.parts:
            item.add_marker(pytest.mark.e2e)
    # A test that leaves its clusters as a destroyed cluster does (marker pairlast) goes after the others; the
    # run's leak scan looks at what every other test left: it goes last.
    last = [item for item in items if item.path.name == "test_zz_no_leaks.py"]
    late = [item for item in items if item not in last and item.get_closest_marker("pairlast")]
    items[:] = [item for item in items if item not in last and item not in late] + late + last
    tier = config.getoption("--tier")
    if tier is not None:
        keep = [
            item
            for item in items
            if item in last or tier_of(getattr(item, "fixturenames", ()), (m.name for m in item.iter_markers())) == tier
        ]
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep


_scenarios = reliability.Recorder.empty()

# The skips a run may show, by the start of their reason, each with why it is no failure. Any other skip fails
# the run: a prerequisite that is missing (a tool, an image) is a failure, never a skip.
EXPECTED_SKIPS = {
    "the upgrade is checked from": "test_liqo_matrix: the upgrade runs from the target's previous minor only",
    "the renewal is checked on": "test_liqo_matrix: certificate renewal runs on the last minor that needs it only",
    "no e2e test fed the scan": "test_zz_no_leaks: a selection without e2e tests has nothing to scan",
    "the chart's Pods need a node": "test_real_liqo_ha: LIQO_INSTALL=processes runs Liqo without nodes",
}
_unexpected_skips: list[str] = []


def skip_reason(report: pytest.TestReport) -> str | None:
    """Why the test was skipped (None if it was not, or if it is an xfail)."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return None
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")


def unexpected_skip(reason: str) -> bool:
    return not any(reason.startswith(expected) for expected in EXPECTED_SKIPS)


def pytest_configure(config: pytest.Config) -> None:
    # A tier's part of the RBAC proof: its clusters' audit logs, read as each is torn down.
    tier = config.getoption("--tier", None)
    # The tiers run side by side: each hands out ports of its own (one block more for a run without --tier).
    # A collection starts nothing; it leaves the block alone (testenv/tests/test_tiers.py collects each tier in
    # the process of a running one).
    if not config.option.collectonly:
        ports.use_block(TIERS.index(tier) if tier is not None else len(TIERS), len(TIERS) + 1)
    if tier is not None and not config.option.collectonly and rbac_collect.before_removal not in audit.BEFORE_REMOVAL:
        rbac_collect.start(tier)
        audit.BEFORE_REMOVAL.append(rbac_collect.before_removal)


def _fail_on_crash(item: pytest.Item, when: str, failed: bool) -> None:
    """A crash is a failure (testenv.crashwatch): what the watched operators did since the previous check fails
    this phase of this test; a phase that already failed gets it as a section of its report."""
    message = crashwatch.check()
    if when == "teardown":
        crashwatch.after_test()
    if message is None:
        return
    message = f"an operator crashed during {when}:\n{message}"
    if failed:
        item.add_report_section(when, "operator crash", message)
    else:
        pytest.fail(message, pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _checked(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _checked(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    return (yield from _checked(item, "teardown"))


def _checked(item: pytest.Item, when: str) -> Iterator[None]:
    try:
        result = yield
    except BaseException:
        _fail_on_crash(item, when, failed=True)
        raise
    _fail_on_crash(item, when, failed=False)
    return result


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _scenarios.record(report.nodeid, report.when, report.outcome, report.duration)
    reason = skip_reason(report)
    if reason is not None and unexpected_skip(reason):
        _unexpected_skips.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Only a run that covered every scenario rewrites docs/reliability.md (a -k run leaves it alone); a tier
    # saves its part, which `python -m testenv.reliability merge` joins once every tier has run.
    tier = session.config.getoption("--tier")
    if session.config.option.collectonly:
        return
    if _unexpected_skips:
        # A run cannot pass by skipping (EXPECTED_SKIPS lists the skips that are no failure).
        sys.stderr.write("\nunexpected skips, which fail the run:\n" + "\n".join(_unexpected_skips) + "\n")
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if tier is not None:
        _scenarios.save_part(tier)
    elif _scenarios.complete():
        _scenarios.write()


@pytest.fixture(scope="session")
def leak_scan() -> LeakScan:
    return LeakScan()


@pytest.fixture(scope="session")
def operator_env(
    liqo_clusters: LiqoClusters,
    tmp_path_factory: pytest.TempPathFactory,
    leak_scan: LeakScan,
    request: pytest.FixtureRequest,
) -> Iterator[OperatorEnv]:
    consumer_api = api_client(liqo_clusters["consumer"].kubeconfig)
    install_crd(consumer_api)
    log_dir = tmp_path_factory.mktemp("operator")
    # With the chart's rights only, so that the RBAC check sees every feature the tier exercises.
    chart = chart_rbac.install(liqo_clusters["consumer"].kubeconfig, liqo_clusters.namespace)
    # The operator's own script, as users run it; through the fault points' wrapper (tests/faultpoints.py) only
    # in a run that holds the tests of faults (marker faults: tier solo).
    faults = any(item.get_closest_marker("faults") for item in request.session.items)
    operator = chart.operator(log_dir, faults=faults).start()
    leak_scan.add_log(operator.log_path)
    env = OperatorEnv(liqo_clusters, operator, Peerings(consumer_api), api_client(liqo_clusters["provider"].kubeconfig))
    try:
        yield env
    finally:
        operator.stop()
        sys.stderr.write(f"\n--- operator log: {operator.log_path}\n")


@pytest.fixture
def case(
    operator_env: OperatorEnv, liqo_standin: StandInProcess, leak_scan: LeakScan, request: pytest.FixtureRequest
) -> Iterator[PeeringCase]:
    """A namespace of its own holding Secret provider-kubeconfig; its peerings are unpeered afterwards."""
    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())
    if len(name) > 50:  # keep it unique: parametrized tests differ only at the end
        name = name[:41] + "-" + hashlib.sha256(request.node.name.encode()).hexdigest()[:8]
    namespace = "e2e-" + name.strip("-")
    peerings = operator_env.peerings
    install_crd(peerings.api)  # idempotent; restores it if a chart test on these clusters removed it
    peerings.make_namespace(namespace)
    peerings.put_kubeconfig_secret(namespace, SECRET, operator_env.provider_kubeconfig())
    if not operator_env.operator.running():
        # Down since an exit the check has reported (it failed the test it happened in), or reports now.
        _fail_on_crash(request.node, "setup", failed=False)
        operator_env.operator.start()
    try:
        yield PeeringCase(operator_env, namespace, liqo_standin)
    finally:
        try:
            # Before anything of the test is removed: the credentials it made, the Events and status it left.
            leak_scan.collect({"consumer": peerings.api, "provider": operator_env.provider_api})
        finally:  # and whatever that raised, the next test finds none of this one's peerings
            operator_env.lc.ensure_installed()
            peerings.put_kubeconfig_secret(namespace, SECRET, operator_env.provider_kubeconfig())
            for item in peerings.in_namespace(namespace):
                peerings.delete(namespace, item["metadata"]["name"])
            for item in peerings.in_namespace(namespace):
                try:
                    peerings.wait_gone(namespace, item["metadata"]["name"], timeout=60)
                except AssertionError:
                    # Leave no finalizer behind for the next test: release it by hand.
                    peerings.patch(namespace, item["metadata"]["name"], {"metadata": {"finalizers": None}})
                    raise
            peerings.core.delete_namespace(namespace)

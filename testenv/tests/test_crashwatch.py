"""A crash is a failure (testenv.crashwatch): a watched operator that exits, restarts or logs a traceback the
test did not cause fails the test in which it happened; one the test stops or kills through the API does not.

The operator here is a small Python process (FAKE) run by OperatorProcess; the suites that show it are run by
pytester in a pytest of their own, with the harness's plugin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testenv import crashwatch
from testenv.crashwatch import PodWatch

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]

HEADER = '''
import os, signal, sys
import pytest
from testenv.operator_support import OperatorProcess
from testenv.wait import wait_for

# A stand-in for the operator: "ready" once it runs; SIGUSR1 crashes it (an uncaught exception, exit code 1);
# SIGTERM stops it cleanly (exit code 0), but for mode "bad-exit", whose shutdown raises.
FAKE = """
import json, signal, sys
mode = sys.argv[1]
def crash(*_):
    raise RuntimeError("the fake operator crashed")
def term(*_):
    if mode == "bad-exit":
        raise RuntimeError("the fake operator failed to shut down")
    sys.exit(0)
signal.signal(signal.SIGUSR1, crash)
signal.signal(signal.SIGTERM, term)
if mode == "traceback":
    exception = chr(10).join(["Traceback (most recent call last):", "  File x", "ValueError: boom"])
    print(json.dumps({"level": "error", "event": "Handler failed with an exception", "exception": exception}))
print("Initial authentication has finished.")  # as kopf once its signal handlers are set up
print("ready", flush=True)
while True:
    signal.pause()
"""


class Fake(OperatorProcess):
    def __init__(self, log_dir, mode):
        super().__init__(log_dir / "kubeconfig", log_dir)
        self.mode = mode

    def command(self):
        return [sys.executable, "-c", FAKE, self.mode]

    def start(self):
        started = self.log().count("ready")
        super().start()
        wait_for("the fake operator to run", lambda: self.log().count("ready") > started, timeout=30)
        return self


def crash(op):
    os.kill(op.proc.pid, signal.SIGUSR1)
    op.proc.wait()
'''


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest('pytest_plugins = ["testenv.pytest_plugin"]\n')
    return pytester


def run(suite: pytest.Pytester, body: str) -> pytest.RunResult:
    suite.makepyfile(test_suite=HEADER + body)
    return suite.runpytest_subprocess("-p", "no:cacheprovider", "-rA")


def test_an_exit_the_test_did_not_ask_for_fails_that_test_and_no_other(suite: pytest.Pytester) -> None:
    result = run(
        suite,
        """
@pytest.fixture(scope="module")
def operator(tmp_path_factory):
    op = Fake(tmp_path_factory.mktemp("op"), "quiet").start()
    yield op
    op.stop()


@pytest.fixture
def running(operator):
    # As the harness's `case` fixture: a new start of an operator that is down, after the check.
    if not operator.running():
        operator.start()
    return operator


def test_a_dies(running):
    crash(running)


def test_b_after_it(running):
    assert running.running()


def test_c_killed_through_the_api(running):
    running.kill()


def test_d_stopped_through_the_api(running):
    running.stop()


def test_e_dies_before_the_test_stops_it(running):
    crash(running)
    running.stop()  # too late: the exit was not the test's
""",
    )
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*PASSED test_suite.py::test_b_after_it*",
            "*PASSED test_suite.py::test_c_killed_through_the_api*",
            "*PASSED test_suite.py::test_d_stopped_through_the_api*",
            "*FAILED test_suite.py::test_a_dies*",
            "*FAILED test_suite.py::test_e_dies_before_the_test_stops_it*",
        ]
    )
    out = result.stdout.str()
    # The message quotes the exit code and the traceback's first lines.
    assert "exited with code 1, which the test did not ask for" in out
    assert "Traceback (most recent call last)" in out and "RuntimeError: the fake operator crashed" in out


def test_tracebacks_bad_exits_and_crashes_on_the_way_out_fail_their_test(suite: pytest.Pytester) -> None:
    result = run(
        suite,
        """
@pytest.fixture
def operator(tmp_path, request):
    op = Fake(tmp_path, "traceback")
    if request.node.name == "test_allowed":
        op.watch.allow("ValueError: boom")  # a traceback the test provokes on purpose, declared narrowly
    yield op.start()
    op.stop()


def test_logged(operator):
    pass


def test_allowed(operator):
    pass


def test_bad_shutdown(tmp_path):
    Fake(tmp_path, "bad-exit").start().stop()


@pytest.fixture
def crashes_on_the_way_out(tmp_path):
    op = Fake(tmp_path, "quiet").start()
    yield op
    crash(op)


def test_crashes_on_the_way_out(crashes_on_the_way_out):
    pass


def test_fails_and_crashes(tmp_path):
    op = Fake(tmp_path, "quiet").start()
    crash(op)
    assert False, "the test's own failure"


def test_last(tmp_path):
    pass
""",
    )
    result.assert_outcomes(passed=3, failed=2, errors=2)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*PASSED test_suite.py::test_allowed*",
            "*PASSED test_suite.py::test_crashes_on_the_way_out*",  # its call; its teardown errs
            "*PASSED test_suite.py::test_last*",
        ]
    )
    # Logged as it started, in the fixture: the setup fails, with the traceback unfolded from its JSON line.
    assert "ERROR test_suite.py::test_logged" in out and "ERROR at setup of test_logged" in out
    assert "Handler failed with an exception" in out and "ValueError: boom" in out
    assert "FAILED test_suite.py::test_bad_shutdown" in out and "exited with code 1 after SIGTERM, not 0" in out
    assert "RuntimeError: the fake operator failed to shut down" in out
    assert "ERROR at teardown of test_crashes_on_the_way_out" in out
    # A test that fails on its own still shows the crash.
    assert "FAILED test_suite.py::test_fails_and_crashes" in out and "the test's own failure" in out
    section = out[out.index("_ test_fails_and_crashes _") :]
    assert "exited with code 1, which the test did not ask for" in section


# The chart's Pods (PodWatch), with their states as the API gives them.


class Pods:
    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}
        self.logs: dict[tuple[str, bool], str] = {}

    def set(self, name: str, restarts: int = 0, state: str = "running", exit_code: int = 137) -> None:
        last = {"terminated": {"exitCode": exit_code, "reason": "Error"}} if restarts else {}
        status = {"name": "operator", "restartCount": restarts, "state": {state: {}}, "lastState": last}
        if state == "terminated":
            status["state"] = {"terminated": {"exitCode": exit_code, "reason": "Error"}}
        self.pods[name] = {"metadata": {"name": name, "uid": f"uid-{name}"}, "status": {"containerStatuses": [status]}}

    def list(self) -> list[dict[str, Any]]:
        return list(self.pods.values())

    def log(self, name: str, previous: bool) -> str:
        return self.logs.get((name, previous), "")


@pytest.fixture
def pods() -> Any:
    pods = Pods()
    watch = PodWatch("release lpo", pods.list, pods.log)
    yield pods, watch
    crashwatch._watched.remove(watch)


def test_a_pod_restart_the_test_did_not_cause_is_a_violation(pods: tuple[Pods, PodWatch]) -> None:
    fake, watch = pods
    fake.set("a")
    assert watch.violations() == []
    fake.set("a", restarts=1)
    fake.logs[("a", True)] = "Traceback (most recent call last):\n  File x\nKeyError: 'spec'\n"
    (problem,) = watch.violations()
    assert "Pod a's container restarted 1 time(s)" in problem and "last exit code 137" in problem
    assert "KeyError: 'spec'" in problem
    assert watch.violations() == []  # reported once


def test_a_restart_the_test_caused_is_none(pods: tuple[Pods, PodWatch]) -> None:
    fake, watch = pods
    fake.set("a")
    assert watch.violations() == []
    watch.expect_restart("a")
    fake.set("a", state="terminated")  # killed, not restarted yet
    assert watch.violations() == []
    fake.set("a", restarts=1)
    assert watch.violations() == []
    fake.set("a", restarts=2)  # a second one was not the test's
    assert len(watch.violations()) == 1


def test_a_terminated_container_and_a_logged_traceback_are_violations(pods: tuple[Pods, PodWatch]) -> None:
    fake, watch = pods
    fake.set("a", state="terminated", exit_code=1)
    (problem,) = watch.violations()
    assert "terminated (exit code 1" in problem
    fake.set("a", restarts=0)
    fake.logs[("a", False)] = json.dumps({"level": "error", "event": "Unhandled exception in the watcher"}) + "\n"
    (problem,) = watch.violations()
    assert "Unhandled exception in the watcher" in problem
    assert watch.violations() == []  # the log is read on from where the last check stopped


def test_excerpts_unfold_structlogs_exception_and_cut_raw_tracebacks() -> None:
    raw = "\n".join(["ok", "Traceback (most recent call last):", *[f"  line {i}" for i in range(30)]])
    (excerpt,) = crashwatch.excerpts(raw)
    assert excerpt.splitlines()[0] == "Traceback (most recent call last):"
    assert len(excerpt.splitlines()) == crashwatch.QUOTED_LINES
    line = json.dumps({"level": "error", "event": "boom", "exception": "Traceback (most recent call last):\n  X"})
    assert crashwatch.excerpts(line) == ["error boom\nTraceback (most recent call last):\n  X"]
    assert crashwatch.excerpts(line, allowed=["boom"]) == []
    # A long one keeps its end too, where the exception is named.
    frames = "\n".join(["Traceback (most recent call last):", *[f"  frame {i}" for i in range(30)], "KeyError: 'x'"])
    (long,) = crashwatch.excerpts(json.dumps({"level": "error", "event": "boom", "exception": frames}))
    assert len(long.splitlines()) == crashwatch.QUOTED_LINES
    assert long.splitlines()[:2] == ["error boom", "Traceback (most recent call last):"]
    assert long.splitlines()[-1] == "KeyError: 'x'"

"""A crash is a failure: every operator the tests start is watched, and an exit, restart or traceback that the
test did not cause fails the test in which it happened (docs/development/testing.md, "A crash is a failure").

What is watched registers itself: an operator process (testenv.operator_support.OperatorProcess) as it starts,
a release of the chart (testenv.operator_release.Release) as it is made. The plugin (testenv.pytest_plugin)
calls `check()` at the end of each phase of each test (setup, call, teardown); each check covers what happened
since the previous one, and reports it once:

- a process that exited, unless the test asked for it (`ProcessWatch.stopping`, which OperatorProcess.stop and
  kill call) and it then exited as asked (0 after SIGTERM, killed after SIGKILL);
- a container of a Pod that restarted or terminated, unless the test caused it (`PodWatch.expect_restart`,
  which Handover.signal calls); a Pod deleted (evicted, drained, replaced by a rollout) is no crash: it is gone
  through the API, and its replacement is a Pod of its own, watched from its start;
- a `Traceback (most recent call last)`, or kopf's "Unhandled exception" / "failed with an exception", in a log
  since the previous check, unless the test declared that very line (`allow`).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import urllib3

MARKS = ("Traceback (most recent call last)", "Unhandled exception", "failed with an exception")
QUOTED_LINES = 12  # of each traceback, in a failure's message
QUOTED_TAIL = 6  # of them from a structlog traceback's end, where the exception is named
QUOTED_TRACEBACKS = 3
# The exit a requested stop must end in: SIGTERM is a clean shutdown (exit code 0); SIGKILL ends it at once.
EXPECTED_EXIT = {signal.SIGTERM: 0, signal.SIGKILL: -signal.SIGKILL}


class Watched(Protocol):
    def violations(self) -> list[str]:
        """What went wrong since the previous call, each once."""
        ...

    def finished(self) -> bool:
        """Nothing left to watch: it leaves the registry until it registers again."""
        ...

    def after_test(self) -> None:
        """The test has ended: what it allowed in the logs is allowed no longer."""
        ...


_watched: list[Watched] = []
_allowing: list[Watched] = []  # those allowing log lines until the test ends, watched still or not


def watch(what: Watched) -> None:
    if not any(w is what for w in _watched):
        _watched.append(what)


def watched() -> list[Watched]:
    return list(_watched)


def check() -> str | None:
    """Every watched operator's violations since the previous check, as one message; None if there are none."""
    problems: list[str] = []
    for what in list(_watched):
        problems += what.violations()
        if what.finished():
            _watched[:] = [w for w in _watched if w is not what]
    return "\n\n".join(problems) or None


def after_test() -> None:
    for what in _allowing:
        what.after_test()
    _allowing.clear()


def excerpts(text: str, allowed: list[str] | None = None) -> list[str]:
    """Each traceback (or kopf's report of an unhandled exception) in a log's text, cut to QUOTED_LINES: raw
    lines from the first, or the JSON lines of structlog with their `exception` field unfolded, its first
    lines and its last QUOTED_TAIL (the exception itself). A line holding a string of `allowed` is left out."""
    lines = text.splitlines()
    found: list[str] = []
    skip_until = -1
    for i, line in enumerate(lines):
        if i < skip_until or not any(mark in line for mark in MARKS):
            continue
        if any(a in line for a in allowed or []):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict):
            head = " ".join(str(record.get(k, "")) for k in ("level", "logger", "event") if record.get(k))
            unfolded = [head, *str(record.get("exception") or "").splitlines()]
            if len(unfolded) > QUOTED_LINES:
                unfolded = [*unfolded[: QUOTED_LINES - QUOTED_TAIL - 1], "  ...", *unfolded[-QUOTED_TAIL:]]
            found.append("\n".join(unfolded))
        else:
            found.append("\n".join(lines[i : i + QUOTED_LINES]))
            skip_until = i + QUOTED_LINES  # a raw traceback spans many lines: one excerpt for it
    return found


def quote(what: str, text: str, allowed: list[str] | None = None) -> str | None:
    found = excerpts(text, allowed)
    if not found:
        return None
    more = f"\n(and {len(found) - QUOTED_TRACEBACKS} more)" if len(found) > QUOTED_TRACEBACKS else ""
    return f"{what}:\n" + "\n--\n".join(found[:QUOTED_TRACEBACKS]) + more


class LogScan:
    """A log file read on from where the previous read stopped (a line still being written waits)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def new_text(self) -> str:
        if not self.path.exists():
            return ""
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        complete = data.rfind(b"\n") + 1
        self.offset += complete
        return data[:complete].decode(errors="replace")

    def tail(self, chars: int = 2000) -> str:
        return self.path.read_text(errors="replace")[-chars:] if self.path.exists() else ""


@dataclass
class Run:
    """One start of a process; `asked`: the signal the test stopped it with, None while it did not."""

    proc: subprocess.Popen[bytes]
    asked: int | None = None
    waited_out: bool = False  # it outlived the grace after `asked`, and was SIGKILLed


class ProcessWatch:
    """The runs of one restartable operator process, and its log file."""

    def __init__(self, name: str, log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self.log = LogScan(log_path)  # what it held before is not this watch's
        self.runs: list[Run] = []
        self.allowed: list[str] = []

    def started(self, proc: subprocess.Popen[bytes]) -> None:
        self.runs.append(Run(proc))
        watch(self)

    def stopping(self, proc: subprocess.Popen[bytes], sig: int) -> None:
        """The test stops the run of `proc` with `sig`: its exit is expected (0 after SIGTERM)."""
        for run in self.runs:
            if run.proc is proc and run.asked is None:
                run.asked = sig

    def waited_out(self, proc: subprocess.Popen[bytes]) -> None:
        for run in self.runs:
            if run.proc is proc:
                run.waited_out = True

    def allow(self, text: str) -> None:
        """A log line holding `text` is one the test provokes on purpose: no violation (until the test ends)."""
        self.allowed.append(text)
        _allowing.append(self)

    def exit_problem(self, run: Run, code: int) -> str | None:
        pid = run.proc.pid
        if run.asked is None:
            return f"{self.name} (pid {pid}) exited with code {code}, which the test did not ask for"
        asked = signal.Signals(run.asked).name
        if run.waited_out:
            return f"{self.name} (pid {pid}) did not stop after {asked}: SIGKILLed after the grace (exit code {code})"
        expected = EXPECTED_EXIT.get(signal.Signals(run.asked))
        if expected is not None and code != expected:
            return f"{self.name} (pid {pid}) exited with code {code} after {asked}, not {expected}"
        return None

    def violations(self) -> list[str]:
        problems: list[str] = []
        alive: list[Run] = []
        for run in self.runs:
            code = run.proc.poll()
            if code is None:
                alive.append(run)
            elif (problem := self.exit_problem(run, code)) is not None:
                problems.append(problem)
        self.runs = alive
        text = self.log.new_text()
        logged = quote(f"{self.name} logged ({self.log_path})", text, self.allowed)
        if problems:
            tail = self.log.tail()
            return ["\n".join(problems) + "\n" + (logged or f"its log ({self.log_path}) ends:\n{tail}")]
        return [logged] if logged else []

    def after_test(self) -> None:
        self.allowed.clear()

    def finished(self) -> bool:
        return not self.runs


@dataclass
class PodWatch:
    """The operator Pods of a release: `list_pods()` all of them (those being deleted too); `pod_log(name,
    previous)` a container's log, "" if there is none."""

    name: str
    list_pods: Callable[[], list[dict[str, Any]]]
    pod_log: Callable[[str, bool], str]
    restarts: dict[tuple[str, str], int] = field(default_factory=dict)  # (Pod uid, container): restartCount
    expected: dict[str, int] = field(default_factory=dict)  # Pod name: restarts the test caused
    offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)  # log read up to, per container run
    terminated: set[tuple[str, str, int]] = field(default_factory=set)  # reported as terminated
    allowed: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        watch(self)

    def expect_restart(self, pod: str) -> None:
        """The test kills (or freezes, for the liveness probe to restart) the container of Pod `pod`: its next
        restart is the test's."""
        self.expected[pod] = self.expected.get(pod, 0) + 1

    def allow(self, text: str) -> None:
        """As ProcessWatch.allow."""
        self.allowed.append(text)
        _allowing.append(self)

    def after_test(self) -> None:
        self.allowed.clear()

    def _new_log(self, pod: str, key: tuple[str, str, int], previous: bool) -> str:
        text = self.pod_log(pod, previous)
        start = self.offsets.get(key, 0)
        self.offsets[key] = max(start, len(text))
        return text[start:]

    def violations(self) -> list[str]:
        try:
            pods = self.list_pods()
        except (
            OSError,
            urllib3.exceptions.HTTPError,
        ) as exc:  # the cluster is gone (its fixture tore it down): nothing left to watch
            sys.stderr.write(f"\n--- {self.name}: no longer watched, its cluster does not answer: {exc}\n")
            self.list_pods = list
            return []
        problems: list[str] = []
        for pod in pods:
            meta, status = pod["metadata"], pod.get("status") or {}
            name, uid, deleting = meta["name"], meta["uid"], bool(meta.get("deletionTimestamp"))
            for container in status.get("containerStatuses") or []:
                key = (uid, container["name"])
                count, before = int(container.get("restartCount") or 0), self.restarts.get(key, 0)
                self.restarts[key] = count
                last = (container.get("lastState") or {}).get("terminated") or {}
                problem = None
                if count > before:
                    caused = min(self.expected.get(name, 0), count - before)
                    self.expected[name] = self.expected.get(name, 0) - caused
                    if count - before > caused:
                        problem = (
                            f"{self.name}: Pod {name}'s container restarted {count - before - caused} time(s) the test"
                            f" did not cause (restartCount {count}; last exit code {last.get('exitCode')},"
                            f" reason {last.get('reason')})"
                        )
                        logged = quote("its previous container logged", self._new_log(name, (*key, count - 1), True))
                        problem += "\n" + (logged or self.pod_log(name, True)[-2000:])
                ended = (container.get("state") or {}).get("terminated")
                if ended and not deleting and (*key, count) not in self.terminated and not self.expected.get(name):
                    self.terminated.add((*key, count))
                    problem = (problem or "") + (
                        f"{self.name}: Pod {name}'s container terminated (exit code {ended.get('exitCode')},"
                        f" reason {ended.get('reason')}), which the test did not cause"
                    )
                if problem:
                    problems.append(problem)
                logged = quote(
                    f"{self.name}: Pod {name} logged", self._new_log(name, (*key, count), False), self.allowed
                )
                if logged:
                    problems.append(logged)
        return problems

    def finished(self) -> bool:
        return False


_pod_watches: dict[str, PodWatch] = {}


def pod_watch(
    name: str, list_pods: Callable[[], list[dict[str, Any]]], pod_log: Callable[[str, bool], str]
) -> PodWatch:
    """The one PodWatch of the release `name`: tests that make several Release objects of one release share it,
    so that a restart one of them declares is declared for all, and each restart is counted once."""
    found = _pod_watches.get(name)
    if found is None:
        found = _pod_watches[name] = PodWatch(name, list_pods, pod_log)
    else:
        found.list_pods, found.pod_log = list_pods, pod_log
        watch(found)
    return found

"""An object whose pass killed the operator twice in a row is put aside after the restart, and never stops the
others: against real API servers and the stand-in, with the operator as a process and its pass markers in a
directory of the test's (the chart's emptyDir, which outlives a container restart).

The pass that dies is made from outside the operator: a LiqoPeering whose provider is a listener on loopback
that accepts connections and never answers, so that its pass stays in flight, and the test SIGKILLs the
operator while it is (the listener has its connection and the pass's marker is there), twice in a row. After
the next restart that peering is put aside (PassCrashed) without its pass running, while a peering Ready
before the kills is deleted, a new one becomes Ready and is deleted, and the put-aside one is deleted with
the force-delete annotation (a plain delete waits for its backoff).
"""

from __future__ import annotations

import socket
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from liqo_peering.engine.passmarkers import file_name, parse
from liqo_peering.liqo import naming
from testenv.operator_support import OperatorProcess, PeeringCase, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.standin]  # kills its operator: a tier of its own beside main

SPEC = {"remoteKubeconfigSecretRef": {"name": "provider-kubeconfig"}, "timeout": "5m"}
HUNG_SECRET = "hung-kubeconfig"
HUNG, READY, LATER = "hung", "ready-before", "created-after"


class Silent:
    """A listener on loopback that accepts every connection and never reads nor answers: a provider whose
    API server hangs. ``connections`` counts them, so that the test knows a pass is waiting on it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.where = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self.connections = 0
        self._guard = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            with self._guard:
                self.held.append(conn)
                self.connections += 1

    def count(self) -> int:
        with self._guard:
            return self.connections

    def close(self) -> None:
        self.sock.close()
        with self._guard:
            for conn in self.held:
                conn.close()
            self.held.clear()


@pytest.fixture
def silent() -> Iterator[Silent]:
    listener = Silent()
    try:
        yield listener
    finally:
        listener.close()


@pytest.fixture
def marked(case: PeeringCase, tmp_path: Path) -> Iterator[tuple[OperatorProcess, Path]]:
    """The case's operator restarted with its pass markers in a directory of the test's; an object put aside for
    an hour (none of the test's steps depends on how long they take); resyncs an hour apart, so that at rest no
    pass of a Ready peering is in flight when the test kills the operator."""
    operator, markers = case.env.operator, tmp_path / "pass-markers"
    saved = operator.extra_args
    operator.stop()
    operator.extra_args = [
        *saved,
        *("--pass-markers-dir", str(markers), "--put-aside-backoff", "3600", "--resync-interval", "3600"),
    ]
    operator.start()
    try:
        yield operator, markers
    finally:
        operator.stop()
        operator.extra_args = saved
        operator.start()


def in_flight(markers: Path, namespace: str) -> set[str]:
    """The LiqoPeerings whose pass is in flight now, by their markers."""
    names = set()
    for name in (HUNG, READY, LATER):
        path = markers / file_name(("LiqoPeering", namespace, name))
        found = parse(path.read_text()) if path.exists() else None
        if found is not None and found[1]:
            names.add(name)
    return names


def kill_in_hung_pass(operator: OperatorProcess, silent: Silent, markers: Path, namespace: str) -> bool:
    """Wait until the hung peering's pass, and only it, is in flight, waiting on the listener; then SIGKILL.
    Whether the kill came while it was (its marker, which the kill leaves as it was, says so): the pass may
    end (the provider found unreachable) between the look and the kill."""
    seen = silent.count()
    wait_for(
        "the hung peering's pass in flight on the listener, alone",
        lambda: silent.count() > seen and in_flight(markers, namespace) == {HUNG},
        timeout=90,
    )
    operator.kill()
    return HUNG in in_flight(markers, namespace)


def put_aside_gauge(operator: OperatorProcess) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{operator.metrics_port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith('liqo_peering_put_aside_objects{kind="LiqoPeering"}'):
            return float(line.split()[-1])
    return None


def hung_kubeconfig(case: PeeringCase, silent: Silent) -> bytes:
    config: dict[str, Any] = yaml.safe_load(case.env.provider_kubeconfig())
    config["clusters"][0]["cluster"]["server"] = f"https://{silent.where}"
    return yaml.safe_dump(config).encode()


def test_a_peering_whose_pass_kills_the_operator_twice_is_put_aside_and_the_others_go_on(
    case: PeeringCase, marked: tuple[OperatorProcess, Path], silent: Silent
) -> None:
    operator, markers = marked
    ns, peerings = case.namespace, case.peerings
    peerings.create(ns, READY, SPEC)
    peerings.wait_status(ns, READY, "ready")

    peerings.put_kubeconfig_secret(ns, HUNG_SECRET, hung_kubeconfig(case, silent))
    peerings.create(ns, HUNG, {**SPEC, "remoteKubeconfigSecretRef": {"name": HUNG_SECRET}})
    # The first death is a kill as in a rollout: the pass resumes at once after the restart, and dies again.
    deaths, rounds = 0, 0
    while deaths < 2:
        rounds += 1
        assert rounds <= 6, "no kill came while the hung peering's pass was in flight"
        deaths = deaths + 1 if kill_in_hung_pass(operator, silent, markers, ns) else 0
        operator.start()

    cond = peerings.wait_reason(ns, HUNG, "PassCrashed", timeout=90)
    assert cond["status"] == "False" and "died 2 times in a row" in cond["message"], cond
    assert "put aside for 60 min" in cond["message"], cond
    wait_for(
        "a Warning Event PassCrashed",
        lambda: any(e.type == "Warning" and e.reason == "PassCrashed" for e in peerings.events(ns, HUNG)),
        timeout=30,
    )
    assert wait_for("the put-aside gauge at 1", lambda: put_aside_gauge(operator) == 1.0, timeout=30)
    connections = silent.count()  # from here, the hung peering's pass does not run: the listener sees nothing

    # The others are reconciled and deleted: the one Ready before the kills unpeers, a new one becomes Ready.
    peerings.delete(ns, READY)
    peerings.wait_gone(ns, READY)
    peerings.create(ns, LATER, SPEC)
    peerings.wait_status(ns, LATER, "ready")
    peerings.delete(ns, LATER)
    peerings.wait_gone(ns, LATER)

    # A plain delete of the put-aside one waits for its backoff, and says how to delete it now.
    peerings.delete(ns, HUNG)
    wait_for(
        "the put-aside peering's deletion refused",
        lambda: "cannot unpeer" in (peerings.condition(ns, HUNG, "Ready") or {}).get("message", ""),
        timeout=60,
    )
    cond = peerings.condition(ns, HUNG, "Ready") or {}
    assert cond["reason"] == "PassCrashed" and naming.FORCE_DELETE in cond["message"], cond
    assert silent.count() == connections, "a pass of the put-aside peering ran"
    peerings.patch(ns, HUNG, {"metadata": {"annotations": {naming.FORCE_DELETE: "true"}}})
    peerings.wait_gone(ns, HUNG)
    assert wait_for("the put-aside gauge back to 0", lambda: put_aside_gauge(operator) == 0.0, timeout=30)
    assert not list(markers.iterdir()), "a marker outlived its object"

"""Every log line about a peering names it and its remote cluster ID, kopf's own lines included."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import pytest
import structlog
import yaml

from liqo_peering import logs
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.events import EventRecorder
from liqo_peering.engine import stagerunner
from liqo_peering.engine.direction import PeeringRun
from liqo_peering.engine.discovery import KubeconfigPolicy
from liqo_peering.engine.kinds import Peerings
from liqo_peering.engine.reconcile import Reconciler
from liqo_peering.engine.runner import ObjectKey, Runner
from liqo_peering.engine.unpeering import Unpeerer
from liqo_peering.engine.wakeups import Wakeups
from liqo_peering.health import TrackedPool
from liqo_peering.kubeconfig import RemoteKubeconfig
from liqo_peering.liqo import resources as r
from liqo_peering.metrics import Metrics
from liqo_peering.stages import StageResult
from unit.fakes import EventsClient, FakeClusterClient, Hub
from unit.test_stage_steps import liqo_installed


class JsonLog:
    """The operator's JSON log, written to a buffer of its own: a thread an earlier test left running (an
    informer retrying its watch) may log, or fail to log into a closed capture, while this test runs."""

    def __init__(self) -> None:
        self.ids = logs.RemoteClusterIds(kept=2)
        self.buffer = io.StringIO()

    def start(self, *threads: str, scrub: Callable[[str], str] = str) -> None:
        """Keep the lines of the threads whose names start so (this test's own by default)."""
        prefixes = threads or ("MainThread",)

        class Threads(logging.Filter):
            def filter(self, record: logging.LogRecord) -> bool:
                return (record.threadName or "").startswith(prefixes)

        logs.configure("json", scrub=scrub, remote_ids=self.ids)
        (handler,) = logging.getLogger().handlers
        assert isinstance(handler, logging.StreamHandler)
        handler.addFilter(Threads())
        handler.setStream(self.buffer)  # filtered from here on: what came before is not read

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.buffer.getvalue().splitlines() if line.strip()]


@pytest.fixture
def log() -> Iterator[JsonLog]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    structlog.contextvars.clear_contextvars()
    yield JsonLog()
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def test_engine_lines_carry_the_peering_and_its_remote_cluster_id(log: JsonLog) -> None:
    log.start()
    log.ids.bind("team-a", "to-provider", "provider-id")
    structlog.get_logger("liqo_peering").info("waiting for the gateway client")
    (line,) = log.lines()
    assert (line["peering"], line["remote_cluster_id"]) == ("team-a/to-provider", "provider-id")


def test_kopf_object_lines_carry_the_peering_and_its_remote_cluster_id(log: JsonLog) -> None:
    log.start()
    log.ids.bind("team-a", "to-provider", "provider-id")
    log.ids.bind("team-b", "other", "other-id")  # this thread's context is another peering now
    ref = {"namespace": "team-a", "name": "to-provider", "kind": "LiqoPeering"}
    # kopf's ObjectLogger passes the object's reference as the `k8s_ref` extra.
    logging.getLogger("kopf.objects").error("Handler 'unpeer' failed temporarily", extra={"k8s_ref": ref})
    logging.getLogger("kopf.objects").info("unknown peering", extra={"k8s_ref": {"namespace": "x", "name": "y"}})
    first, second = log.lines()
    assert (first["peering"], first["remote_cluster_id"]) == ("team-a/to-provider", "provider-id")
    assert second["peering"] == "x/y" and "remote_cluster_id" not in second


def test_a_peering_without_a_known_remote_drops_a_stale_one(log: JsonLog) -> None:
    log.start()
    log.ids.bind("team-c", "first", "first-id")
    log.ids.bind("team-c", "second")
    structlog.get_logger("liqo_peering").info("reading the kubeconfig Secret")
    (line,) = log.lines()
    assert line["peering"] == "team-c/second" and "remote_cluster_id" not in line


def test_a_forgotten_peerings_id_stays_until_enough_others_are_forgotten(log: JsonLog) -> None:
    """kopf logs a deleted peering's last lines after its last handler: its ID outlives it, but not for ever."""
    ids = log.ids  # keeps the last two forgotten
    for name in ("a", "b", "c"):
        ids.bind("team-d", name, f"{name}-id")
    ids.forget("team-d", "a")
    ids.forget("team-d", "b")
    assert (ids.get("team-d/a"), ids.get("team-d/b")) == ("a-id", "b-id")
    ids.forget("team-d", "c")
    assert (ids.get("team-d/a"), ids.get("team-d/b"), ids.get("team-d/c")) == (None, "b-id", "c-id")
    ids.bind("team-d", "b", "b-id")  # made again under the same name: no longer forgotten
    ids.forget("team-d", "x")  # never known: nothing to forget
    ids.bind("team-d", "e", "e-id")
    ids.forget("team-d", "e")
    ids.forget("team-d", "e")  # forgotten once only
    assert (ids.get("team-d/b"), ids.get("team-d/c"), ids.get("team-d/e")) == ("b-id", "c-id", "e-id")


def test_a_released_peering_is_forgotten() -> None:
    ids = logs.RemoteClusterIds(kept=0)
    local, events = FakeClusterClient("consumer"), EventRecorder(cast(ClusterClient, EventsClient()))
    reconciler = Reconciler(local, events, Metrics(), KubeconfigPolicy(), remote_ids=ids)
    unpeerer = Unpeerer(local, events, Metrics(), KubeconfigPolicy(), remote_ids=ids)
    for forget in (reconciler.forget, unpeerer.forget):
        ids.bind("team-e", "gone", "gone-id")
        forget("team-e", "gone")
        assert ids.get("team-e/gone") is None


def test_a_traceback_is_in_the_json_line_and_scrubbed(log: JsonLog) -> None:
    """A crash logs its traceback (the JSON renderer drops exc_info unless it is formatted), credentials
    in the quoted exception message removed."""
    log.start(scrub=lambda text: text.replace("s3cr3t", "[REDACTED]"))
    try:
        raise RuntimeError("token s3cr3t refused")
    except RuntimeError:
        structlog.get_logger("t").exception("reconcile crashed; retrying")
    line = log.lines()[-1]
    assert "Traceback" in line["exception"] and "RuntimeError: token [REDACTED] refused" in line["exception"]
    assert "s3cr3t" not in json.dumps(line)


# -- one pass, one peering's context --------------------------------------------------------------------------
PORTS = {"first": 6443, "second": 6444}  # each peering's provider, told apart by its kubeconfig's server


def _kubeconfig(port: int) -> str:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "p", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "p", "context": {"cluster": "p", "user": "u"}}],
        "current-context": "p",
    }
    return base64.b64encode(yaml.safe_dump(config).encode()).decode()


class _Providers:
    def __init__(self) -> None:
        self.clients: dict[str, FakeClusterClient] = {}
        for name, port in PORTS.items():
            self.clients[str(port)] = client = FakeClusterClient("provider")
            liqo_installed(client, f"{name}-provider-id", pod_cidrs=("10.2.0.0/16",), external="10.3.0.0/16")

    def get(self, key: Any, kubeconfig: RemoteKubeconfig) -> FakeClusterClient:
        return self.clients[kubeconfig.server.rsplit(":", 1)[1]]


def _stage(stage: str) -> Any:
    """A stage that only logs, with the peering whose run it is."""

    def run(run: PeeringRun, *_: Any) -> StageResult:
        structlog.get_logger("liqo_peering.stage").info(f"{stage} checked", run_of=run.ctx.peering_name)
        return StageResult.ready(stage, "ok")

    return run


def test_each_line_of_a_pass_carries_its_peering_on_every_thread_and_none_outlives_it(
    log: JsonLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two passes on one pool thread, a line logged on it in between: every line of a pass (authentication's
    from a thread of its own) names that pass's peering and its provider, the one in between none, and no
    line of the second names the first."""
    for stage in ("networking", "authentication", "offloading"):
        monkeypatch.setattr(getattr(stagerunner, stage), "reconcile", _stage(stage))
    local = FakeClusterClient("consumer")
    liqo_installed(local, "consumer-id", pod_cidrs=("10.0.0.0/16",), external="10.1.0.0/16")
    for name, port in PORTS.items():
        secret = {"metadata": {"name": f"kc-{name}", "namespace": "team-a"}, "data": {"kubeconfig": _kubeconfig(port)}}
        local.add(r.SECRET, secret)
        spec = {"remoteKubeconfigSecretRef": {"name": f"kc-{name}"}}
        local.add(r.LIQOPEERING, {"metadata": {"name": name, "namespace": "team-a"}, "spec": spec})
    events, metrics = EventRecorder(cast(ClusterClient, EventsClient())), Metrics()
    calls = TrackedPool(2, "test-logs-calls")
    svc = Reconciler(local, events, metrics, KubeconfigPolicy(), remotes=cast(Any, _Providers()), calls=calls)
    unpeerer = Unpeerer(local, events, metrics, KubeconfigPolicy())
    runner = Runner([Peerings(svc, unpeerer, resync_interval=60.0)], cast(Any, Hub()), Wakeups(), calls=calls)
    runner.pool.shutdown()
    # One pool thread: both passes run on it.
    runner.pool = cast(Any, ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-logs-passes"))
    other = structlog.get_logger("liqo_peering.other")

    async def scenario() -> None:
        await runner.in_thread(runner.one_pass, ObjectKey("LiqoPeering", "team-a", "first"))
        await runner.in_thread(lambda: other.info("between the passes"))
        await runner.in_thread(runner.one_pass, ObjectKey("LiqoPeering", "team-a", "second"))

    log.start("test-logs-", "MainThread")
    try:
        asyncio.run(scenario())
    finally:
        runner.pool.shutdown()
        calls.shutdown()
    lines = log.lines()
    between = next(i for i, line in enumerate(lines) if line["event"] == "between the passes")
    assert "peering" not in lines[between] and "remote_cluster_id" not in lines[between]
    for name, part in (("first", lines[:between]), ("second", lines[between + 1 :])):
        staged = {line["event"] for line in part if "run_of" in line}
        assert staged == {"networking checked", "authentication checked", "offloading checked"}, part
        for line in part:
            assert line["peering"] == f"team-a/{name}", line
            assert line.get("remote_cluster_id") in (None, f"{name}-provider-id"), line
        assert all(line["remote_cluster_id"] == f"{name}-provider-id" for line in part if "run_of" in line)
    assert not any("first" in json.dumps(line) for line in lines[between + 1 :])

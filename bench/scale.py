"""Scale: N concurrent peerings from one consumer to N distinct providers, N = 1, 10, 25, 50; and the same
N made by one LiqoPeeringSet instead of N LiqoPeerings (``via_set``, the fleet row). The memory and pass-cost
rows run one peering on this setup (bench.clutter, bench.passcost).

The consumer is a full local cluster (testenv.localk8s); the providers are light API servers on one etcd
(testenv.lightk8s), each with the Liqo stand-in as its Liqo (testenv.standin.fleet). Every level starts from fresh
clusters. The operator runs as a process, with its production resync interval.
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from testenv import audit, procstat
from testenv import kube as k
from testenv.kube import Kube
from testenv.lightk8s import LightCluster, LightProviders, install_liqo_on_providers, start_light_providers
from testenv.liqo_env import install_liqo
from testenv.localk8s import LocalCluster, start_clusters
from testenv.operator_support import Peerings, api_client, install_crd
from testenv.reactions import NONCE_SECRET, OPERATOR_AGENT, SIGNED_NONCE_SECRET, Step, Target, peering_steps, reactions
from testenv.standin.fleet import USER_AGENT as STANDIN_AGENT

from . import clutter as clutter_objects
from . import passcost, requests
from .clutter import Clutter
from .common import LIQOPEERING, operator_version, start_operator
from .passcost import PassCost
from .procs import Spawned, log, quietly, save_logs
from .tracker import Kind, Predicate, State, Tracker, condition

CONSUMER_ID = "scale-consumer-id"
# The operator's user on the consumer, so that bench.requests counts its requests there (the light
# providers run without API Priority and Fairness, so only their audit logs tell, and only of writes).
OPERATOR_USER = "bench-operator"
NAMESPACE = "scale"
SET_NAME = "fleet"
FLEET_LABEL = "bench-fleet"
LIQOPEERINGSET = k.Res("peering.liqo-operator.io", "v1alpha1", "liqopeeringsets")
STANDINS_PER_PROCESS = 5  # Python threads share one core per process
SETTLE_SECONDS = 15.0
# Shorter than kube-controller-manager's node grace period (50 s): without the stand-in's heartbeats it
# would then mark the virtual Nodes unknown.
STILL_SECONDS = 30.0  # after the last Ready, before the quiet window: Liqo's (the stand-in's) follow-ups
REPO = Path(__file__).resolve().parents[1]


@dataclass
class ScaleRun:
    peerings: int
    via: str = "LiqoPeerings"  # how they were made: N LiqoPeerings, or one LiqoPeeringSet
    operator_version: str = ""  # common.operator_version() when the level started
    all_ready: float = 0.0  # seconds from the first create to the last peering Ready
    ready_times: list[float] = field(default_factory=list)  # each peering's, sorted
    busy_cpu_seconds: float = 0.0  # the operator's CPU time while establishing
    busy_cpu_percent: float = 0.0  # ... as a share of one core over that time
    at_ready: dict[str, Any] = field(default_factory=dict)  # procstat.Sample when all were Ready
    idle_seconds: float = 0.0
    idle_cpu_percent: float = 0.0  # the operator's CPU over the quiet window, share of one core
    at_rest: dict[str, Any] = field(default_factory=dict)  # procstat.Sample at the end of the quiet window
    writes_at_rest: dict[str, int] = field(default_factory=dict)  # the operator's, "side verb resource"
    reactions: list[float] = field(default_factory=list)  # every step of every peering (testenv.reactions)
    standin_turns: list[float] = field(default_factory=list)  # the stand-in's answers to the operator's writes
    others_writes_at_rest: dict[str, int] = field(default_factory=dict)  # everyone else's on the consumer
    requests_establishing: dict[str, int] = field(default_factory=dict)  # the operator's on the consumer, by verb
    requests_at_rest: dict[str, int] = field(default_factory=dict)
    # The same with the stand-ins stopped (SIGSTOP): nothing changes on any cluster, what is left is the
    # operator's own cost at rest.
    still_seconds: float = 0.0
    still_cpu_percent: float = 0.0
    requests_still: dict[str, int] = field(default_factory=dict)
    cpu_while_establishing: dict[str, float] = field(default_factory=dict)  # CPU seconds per component
    # The memory row: objects no peering concerns in the consumer (bench.clutter), and the bytes the operator
    # read from its start (started and settled) to the end of the quiet window: its lists and watches.
    clutter: dict[str, int] = field(default_factory=dict)
    operator_read_mb: float = 0.0
    machine_busy_percent: dict[str, float] = field(default_factory=dict)  # all cores, establishing/quiet
    # The pass-cost row: LiqoPeerings only the duplicate check's informer holds (bench.passcost), and the full
    # passes of the peering, each a passcost.FullPass.
    others: int = 0
    full_passes: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _ready_count(state: State) -> int:
    return sum(1 for obj in state.get("consumer/liqopeerings", {}).values() if condition(obj, "Ready") == "True")


def _is_ready(key: str) -> Predicate:
    return lambda state: condition(state["consumer/liqopeerings"].get(key) or {}, "Ready") == "True"


def _start_standins(
    consumer: LocalCluster, providers: LightProviders, ids: dict[str, str], work: Path
) -> list[Spawned]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = []
    clusters = providers.clusters
    for first in range(0, len(clusters), STANDINS_PER_PROCESS):
        group = clusters[first : first + STANDINS_PER_PROCESS]
        argv = [
            sys.executable,
            "-m",
            "testenv.standin.fleet",
            "--consumer-kubeconfig",
            str(consumer.kubeconfig),
            "--consumer-id",
            CONSUMER_ID,
            "--ca-dir",
            str(providers.clusters[0].pki.dir),
        ]
        for cluster in group:
            argv += ["--provider", f"{cluster.kubeconfig}={ids[cluster.name]}"]
        procs.append(Spawned("standins", argv, work / f"standins-{first // STANDINS_PER_PROCESS}.log", env))
    return procs


def _operator_writes(logs: dict[str, Path], start: float, end: float) -> dict[str, int]:
    since, until = datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)
    out: dict[str, int] = {}
    for side, path in logs.items():
        for e in audit.writes(path, since=since, user_agent_prefix=OPERATOR_AGENT):
            if e.received <= until:
                key = f"{side} {e.verb} {e.resource}"
                out[key] = out.get(key, 0) + 1
    return out


def standin_steps(consumer_id: str, provider_id: str) -> list[Step]:
    """The other half of a peering: what Liqo (here the stand-in) writes in answer to the operator."""
    c, p = "consumer", "provider"
    answers = [
        ("Configuration accepted", Target(c, "configurations/status", provider_id), "configurations"),
        ("Configuration accepted", Target(p, "configurations/status", consumer_id), "configurations"),
        ("GatewayServer endpoint", Target(p, "gatewayservers/status", consumer_id), "gatewayservers"),
        ("nonce filled", Target(p, "secrets", NONCE_SECRET), "secrets"),
        ("nonce signed", Target(c, "secrets", SIGNED_NONCE_SECRET), "secrets"),
        ("Tenant credentials", Target(p, "tenants/status", consumer_id), "tenants"),
        ("Identity kubeconfig", Target(c, "identities/status", f"controlplane-{provider_id}"), "identities"),
        ("ResourceSlice accepted", Target(c, "resourceslices/status", provider_id), "resourceslices"),
    ]
    return [Step(name, answer, (Target(answer.side, asked, answer.name),)) for name, answer, asked in answers]


def _turns(
    consumer: Path, providers: list[LightCluster], ids: dict[str, str], start: float
) -> tuple[list[float], list[float]]:
    """Every peering's steps against their prerequisites, both ways: the operator's reactions to the
    stand-in, and the stand-in's to the operator. The consumer holds every peering's objects, some under
    the same name (liqo-signed-nonce): each peering is judged on its own tenant namespace there."""
    since = datetime.fromtimestamp(start, UTC)
    on_consumer = audit.writes(consumer, since=since)
    operator, standin = [], []
    for cluster in providers:
        provider_id = ids[cluster.name]
        tenant = f"liqo-tenant-{provider_id}"
        events = {
            "consumer": [e for e in on_consumer if e.namespace == tenant],
            "provider": audit.writes(cluster.audit_log, since=since),
        }
        operator += [r.seconds for r in reactions(events, peering_steps(CONSUMER_ID, provider_id))]
        steps = standin_steps(CONSUMER_ID, provider_id)
        standin += [r.seconds for r in reactions(events, steps, operator_agent=STANDIN_AGENT)]
    return operator, standin


def run_level(
    count: int,
    base_dir: Path,
    idle_seconds: float,
    keep_logs: bool = False,
    via_set: bool = False,
    clutter: Clutter = clutter_objects.NONE,
    pass_cost: PassCost | None = None,
) -> ScaleRun:
    """One level: ``count`` peerings, made as ``count`` LiqoPeerings or (``via_set``) by one LiqoPeeringSet
    selecting ``count`` labelled Secrets; everything else the same. ``clutter``: Deployments and Secrets no
    peering concerns, in the consumer before the operator starts (the memory row). ``pass_cost``: other
    LiqoPeerings in a namespace the operator, then watching NAMESPACE only, does not reconcile; once all are
    Ready, full passes timed (the pass-cost row)."""
    result = ScaleRun(count, "LiqoPeeringSet" if via_set else "LiqoPeerings", operator_version())
    result.clutter = {"deployments": clutter.deployments, "secrets": clutter.secrets}
    result.others = pass_cost.others if pass_cost is not None else 0
    suffix = ("-set" if via_set else "") + ("" if clutter.empty else f"-clutter-{clutter.deployments}")
    suffix += f"-passcost-{pass_cost.others}" if pass_cost is not None else ""
    work = base_dir / f"scale-{count}{suffix}"
    work.mkdir(parents=True)
    log(f"scale {count} ({result.via}): starting a consumer and {count} light providers")
    with contextlib.ExitStack() as stack:
        consumer = start_clusters(["sc-consumer"], work / "consumer")["sc-consumer"]
        stack.callback(quietly, consumer.stop, "the consumer cluster")
        providers = start_light_providers(count, work / "providers")
        stack.callback(quietly, providers.stop, "the providers")
        ids = {c.name: f"{c.name}-cluster-id" for c in providers.clusters}
        install_liqo(consumer, CONSUMER_ID, "10.90.0.0/16", "10.91.0.0/16")
        started = time.monotonic()
        install_liqo_on_providers(providers.clusters, ids)
        log(f"scale {count}: Liqo's objects installed on the providers in {time.monotonic() - started:.0f}s")
        standins = _start_standins(consumer, providers, ids, work)
        for proc in standins:
            stack.callback(quietly, proc.stop, "a stand-in process")

        consumer_kube = Kube(consumer.api_client())
        requests.install_counters(consumer_kube, OPERATOR_USER)
        admin = api_client(consumer.kubeconfig)
        install_crd(admin)
        peerings = Peerings(admin)
        peerings.make_namespace(NAMESPACE)
        for cluster in providers.clusters:
            peerings.put_kubeconfig_secret(NAMESPACE, f"{cluster.name}-kubeconfig", cluster.kubeconfig.read_bytes())
        if not clutter.empty:
            started = time.monotonic()
            clutter_objects.create(consumer.api_client(), clutter, NAMESPACE)
            log(f"scale {count}: {clutter} created in the consumer in {time.monotonic() - started:.0f}s")
        if pass_cost is not None and pass_cost.others:
            started = time.monotonic()
            passcost.create_others(consumer_kube, pass_cost.others)
            log(f"scale {count}: {pass_cost.others} other LiqoPeerings created in {time.monotonic() - started:.0f}s")
        # The LiqoPeerings' names: the set names its own <set>-<secret>.
        names = {c.name: f"{SET_NAME}-{c.name}-kubeconfig" if via_set else c.name for c in providers.clusters}
        # The pass-cost row, with or without others: kopf reconciles NAMESPACE only, in both runs alike.
        watched = ["--namespace", NAMESPACE] if pass_cost is not None else []
        operator = start_operator(consumer.user_kubeconfig(OPERATOR_USER), work, watched)
        stack.callback(quietly, operator.stop, "the operator")
        assert operator.proc is not None
        pid = operator.proc.pid
        read0 = procstat.read_bytes(pid)

        tracker = Tracker({"consumer": consumer_kube}, [Kind("consumer", LIQOPEERING)]).start()
        stack.callback(tracker.stop)
        tracker.expect("all", lambda state: _ready_count(state) >= count)
        for cluster in providers.clusters:
            key = f"{NAMESPACE}/{names[cluster.name]}"
            tracker.expect(key, _is_ready(key))
        components = {
            "operator": [pid],
            "stand-ins": [p.pid for p in standins],
            "consumer control plane": list(consumer.recorded_pids().values()),
            "provider API servers": [c.proc.pid for c in providers.clusters if c.proc],
            "providers' etcd": [providers.etcd.proc.pid] if providers.etcd.proc else [],
        }
        cpu0 = {name: procstat.total_cpu(pids) for name, pids in components.items()}
        machine0 = procstat.machine_busy_seconds()
        counted = requests.counts(consumer_kube, OPERATOR_USER)
        start = time.time()
        if via_set:
            _create_fleet(consumer_kube, providers.clusters)
        else:
            for cluster in providers.clusters:
                spec = {"remoteKubeconfigSecretRef": {"name": f"{cluster.name}-kubeconfig"}, "timeout": "30m"}
                peerings.create(NAMESPACE, cluster.name, spec)
        done = tracker.wait(["all"], max(600.0, 30.0 * count))["all"]
        elapsed = time.time() - start
        result.all_ready = done - start
        reached = [tracker.reached(f"{NAMESPACE}/{names[c.name]}") or done for c in providers.clusters]
        result.ready_times = sorted(t - start for t in reached)
        cpu1 = {name: procstat.total_cpu(pids) for name, pids in components.items()}
        result.requests_establishing = dict(requests.counts(consumer_kube, OPERATOR_USER) - counted)
        result.cpu_while_establishing = {name: round(cpu1[name] - cpu0[name], 2) for name in components}
        result.machine_busy_percent["establishing"] = 100 * (procstat.machine_busy_seconds() - machine0) / elapsed
        result.busy_cpu_seconds = cpu1["operator"] - cpu0["operator"]
        result.busy_cpu_percent = 100 * result.busy_cpu_seconds / elapsed
        result.at_ready = procstat.sample(pid).to_json()
        median = statistics.median(result.ready_times)
        log(f"scale {count}: all Ready after {result.all_ready:.1f}s (median {median:.1f}s)")

        result.reactions, result.standin_turns = _turns(consumer.audit_log, providers.clusters, ids, start)
        time.sleep(SETTLE_SECONDS)
        if pass_cost is not None:
            result.full_passes = _full_passes(
                pass_cost, consumer_kube, tracker, names[providers.clusters[0].name], pid, standins
            )
        cpu_before, machine_before = procstat.cpu_seconds(pid), procstat.machine_busy_seconds()
        counted = requests.counts(consumer_kube, OPERATOR_USER)
        quiet_start = time.time()
        time.sleep(idle_seconds)
        quiet_end = time.time()
        result.requests_at_rest = dict(requests.counts(consumer_kube, OPERATOR_USER) - counted)
        result.idle_seconds = quiet_end - quiet_start
        result.idle_cpu_percent = 100 * (procstat.cpu_seconds(pid) - cpu_before) / result.idle_seconds
        result.machine_busy_percent["quiet"] = (
            100 * (procstat.machine_busy_seconds() - machine_before) / result.idle_seconds
        )
        result.at_rest = procstat.sample(pid).to_json()
        result.operator_read_mb = (procstat.read_bytes(pid) - read0) / 2**20
        logs = {"consumer": consumer.audit_log} | {c.name: c.audit_log for c in providers.clusters}
        result.writes_at_rest = _operator_writes(logs, quiet_start, quiet_end)
        _still_window(result, standins, pid, consumer_kube)
        if keep_logs:
            save_logs({f"audit-{name}": path for name, path in logs.items()}, work / "logs")
        since, until = datetime.fromtimestamp(quiet_start, UTC), datetime.fromtimestamp(quiet_end, UTC)
        others = [
            e
            for e in audit.writes(consumer.audit_log, since=since)
            if e.received <= until and not e.user_agent.startswith(OPERATOR_AGENT)
        ]
        result.others_writes_at_rest = {
            str(key): n for key, n in audit.count_by(others, lambda e: f"{e.verb} {e.resource}").items()
        }
        log(
            f"scale {count}: quiet {result.idle_seconds:.0f}s: operator CPU {result.idle_cpu_percent:.2f}%, "
            f"RSS {result.at_rest['rss_mb']:.0f} MB, read {result.operator_read_mb:.1f} MB, "
            f"writes {sum(result.writes_at_rest.values())}"
        )
    return result


def _full_passes(
    pass_cost: PassCost, consumer: Kube, tracker: Tracker, name: str, pid: int, standins: list[Spawned]
) -> list[dict[str, Any]]:
    """The pass-cost row's passes of the LiqoPeering ``name``, the stand-ins stopped around each."""
    passes = passcost.measure(
        consumer,
        tracker,
        NAMESPACE,
        name,
        pass_cost.passes,
        count=lambda: requests.counts(consumer, OPERATOR_USER),
        cpu=lambda: procstat.cpu_seconds(pid),
        pause=lambda: passcost.stopped([p.pid for p in standins]),
    )
    times = sorted(p.seconds for p in passes)
    log(
        f"pass cost, {pass_cost.others} others: {len(passes)} full passes, median {statistics.median(times):.3f}s,"
        f" {sum(sum(p.requests.values()) for p in passes)} requests in all"
    )
    return [p.to_json() for p in passes]


def _create_fleet(consumer: Kube, clusters: list[LightCluster]) -> None:
    """Label every provider's Secret, then create the one LiqoPeeringSet that selects them all."""
    for cluster in clusters:
        consumer.patch(
            k.SECRET, f"{cluster.name}-kubeconfig", {"metadata": {"labels": {FLEET_LABEL: "yes"}}}, NAMESPACE
        )
    body = {
        "apiVersion": LIQOPEERINGSET.api_version,
        "kind": "LiqoPeeringSet",
        "metadata": {"name": SET_NAME, "namespace": NAMESPACE},
        "spec": {"selector": {"matchLabels": {FLEET_LABEL: "yes"}}, "template": {"timeout": "30m"}},
    }
    consumer.create(LIQOPEERINGSET, body, NAMESPACE)


def _still_window(result: ScaleRun, standins: list[Spawned], pid: int, consumer: Kube) -> None:
    """The operator's CPU and requests while no Liqo (stand-in) runs at all."""
    for proc in standins:
        os.killpg(proc.pid, signal.SIGSTOP)
    try:
        cpu_before, counted = procstat.cpu_seconds(pid), requests.counts(consumer, OPERATOR_USER)
        started = time.time()
        time.sleep(STILL_SECONDS)
        result.still_seconds = time.time() - started
        result.still_cpu_percent = 100 * (procstat.cpu_seconds(pid) - cpu_before) / result.still_seconds
        result.requests_still = dict(requests.counts(consumer, OPERATOR_USER) - counted)
    finally:
        for proc in standins:
            os.killpg(proc.pid, signal.SIGCONT)


def run_all(levels: list[int], base_dir: Path, idle_seconds: float, keep_logs: bool = False) -> Iterator[ScaleRun]:
    for count in levels:
        yield run_level(count, base_dir, idle_seconds, keep_logs)


def run_pass_cost(others: int, base_dir: Path, idle_seconds: float, keep_logs: bool = False) -> Iterator[ScaleRun]:
    """The pass-cost row: one peering with no other LiqoPeering in the consumer, then with ``others`` of them."""
    for each in (0, others):
        yield run_level(1, base_dir, idle_seconds, keep_logs, pass_cost=PassCost(each))


def run_memory(clutter: Clutter, base_dir: Path, idle_seconds: float, keep_logs: bool = False) -> Iterator[ScaleRun]:
    """The memory row: one peering on an empty consumer, then on one holding ``clutter``."""
    for each in (clutter_objects.NONE, clutter):
        yield run_level(1, base_dir, idle_seconds, keep_logs, clutter=each)

"""Operator vs `liqoctl peer` against Liqo's real control plane, each on fresh clusters.

Per run: a fresh pair of local clusters with Liqo v1.2.0; the contender (the operator, or liqoctl) acts as
a user of its own (bench.requests counts its requests); watches (bench.tracker) time the milestones; the
audit logs give its writes and the operator's reaction latencies (testenv.reactions).

Two installations of Liqo (`INSTALLS`), the same measurement on each:
- `processes` (the default): Liqo's controllers as local processes, a data-plane stand-in
  (testenv.liqo_real).
- `chart`: `helm install liqo` of Liqo's own chart on clusters with a real node each, real gateway Pods
  (WireGuard in userspace), the virtual kubelet a real Pod (testenv.liqo_chart). No load balancer there:
  both contenders expose the provider's gateway server as a NodePort.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from testenv import audit
from testenv import kube as k
from testenv.kube import Kube
from testenv.liqo_chart import LiqoChartPair, liqo_images
from testenv.liqo_real import RUNNABLE, liqo_binary, missing_binaries
from testenv.liqo_real.pytest_plugin import start_real_liqo_pair
from testenv.localk8s import LocalCluster
from testenv.operator_support import SECRET, Peerings, api_client, install_crd
from testenv.reactions import OPERATOR_AGENT, peering_steps, reactions

from . import requests
from .common import LIQOPEERING, load_average, operator_version, start_operator
from .procs import log, quietly, save_logs
from .tracker import Kind, Tracker, all_gone, any_with

CONTENDER = "bench-contender"  # the user both contenders act as (bench.requests counts its requests)
LIQOCTL_AGENT = "liqoctl"
NAMESPACE, NAME = "bench", "provider"
SIDES = ("consumer", "provider")
# The objects a peering is made of (what unpeering removes), on each side.
PEERING_KINDS = [
    Kind("consumer", k.RESOURCESLICE),
    Kind("consumer", k.VIRTUALNODE),
    Kind("consumer", k.NODE, "liqo.io/type=virtual-node"),
    Kind("consumer", k.IDENTITY),
    Kind("consumer", k.GATEWAYCLIENT),
    Kind("consumer", k.CONFIGURATION),
    Kind("provider", k.RESOURCESLICE),
    Kind("provider", k.TENANT),
    Kind("provider", k.GATEWAYSERVER),
    Kind("provider", k.CONFIGURATION),
]
# What Liqo's garbage collection removes after the objects above are deleted: gone too before a peering is
# gone (the operator deletes their owners in the foreground and waits; `liqoctl unpeer` returns before).
# The Identity's ControlPlane kubeconfig Secret (held by the CRD replicator until the Renews are gone on
# both sides), the Renews, and the RoleBindings that grant the consumer its rights on the provider.
DEPENDENT_KINDS = [
    Kind("consumer", k.SECRET, "liqo.io/identity-type=ControlPlane", owner="Identity"),
    Kind("consumer", k.RENEW),
    Kind("provider", k.RENEW),
    Kind("provider", k.ROLEBINDING, owner="Tenant"),
]
# The virtual kubelet's Pod: Liqo (and the operator) judge the virtual node by its readiness too.
VK_PODS = Kind("consumer", k.POD, "offloading.liqo.io/component=virtual-kubelet")
STAGES = ("NetworkReady", "AuthenticationReady", "OffloadingReady")
ESTABLISH_TIMEOUT = 600.0
# Unpeering that leaves something this long (Liqo's objects stuck) is recorded with what is left, and its
# deletion time as this bound, rather than failing the bench.
GONE_TIMEOUT = 120.0
CHART_AVAILABLE_TIMEOUT = 420.0  # every Liqo Deployment and DaemonSet of a fresh chart install available


@dataclass
class BenchPair:
    """What a run needs of a fresh cluster pair, whichever way Liqo was installed on it."""

    clusters: dict[str, LocalCluster]
    ids: dict[str, str]
    stop: Callable[[], None]
    liqoctl_peer_args: list[str] = field(default_factory=list)  # extra `liqoctl peer` flags
    peering_spec: dict[str, Any] = field(default_factory=dict)  # extra LiqoPeering spec, the same choices
    timings: dict[str, float] = field(default_factory=dict)  # how long bringing the pair up took, by step

    def __getitem__(self, side: str) -> LocalCluster:
        return self.clusters[side]


def processes_pair(work: Path, prefix: str) -> BenchPair:
    """Liqo's controllers as local processes, a data-plane stand-in (testenv.liqo_real)."""
    started = time.monotonic()
    pair = start_real_liqo_pair(work / "clusters", prefix=prefix)
    return BenchPair(pair.clusters, pair.ids, pair.stop, timings={"pair": time.monotonic() - started})


def chart_pair(work: Path, prefix: str) -> BenchPair:
    """`helm install liqo` on two clusters with a node each, every Liqo workload available
    (testenv.liqo_chart). The provider's gateway server is a NodePort Service: there is no load balancer."""
    # Short, outside `work`: a node's unix socket paths must fit 108 bytes.
    base = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    started = time.monotonic()
    try:
        pair = LiqoChartPair.up(base, timeout=CHART_AVAILABLE_TIMEOUT)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise

    def stop() -> None:
        try:
            pair.stop()
        finally:
            shutil.rmtree(base, ignore_errors=True)

    pair.timings["pair"] = time.monotonic() - started
    return BenchPair(
        pair.clusters,
        pair.ids,
        stop,
        liqoctl_peer_args=pair.liqoctl_peer_args,
        peering_spec={"networking": pair.peering_networking},
        timings=dict(pair.timings),
    )


INSTALLS: dict[str, Callable[[Path, str], BenchPair]] = {"processes": processes_pair, "chart": chart_pair}


@dataclass
class RealRun:
    contender: str
    run: int
    operator_version: str = ""  # common.operator_version() when the run started
    install: str = "processes"  # how Liqo was installed on the pair (INSTALLS)
    load_average: list[float] = field(default_factory=list)  # the machine's (1, 5, 15 min) as the peering started
    pair_timings: dict[str, float] = field(default_factory=dict)  # bringing the fresh pair up, by step
    m1: float | None = None  # ResourceSlice Authentication=Accepted (watch event), seconds from start
    m2: float | None = None  # virtual Node Ready (operator: event; liqoctl: 1 s polls after it returned)
    m2_event: float | None = None  # virtual Node Ready, watch event (both)
    m3: float | None = None  # LiqoPeering Ready (operator)
    returned: float | None = None  # liqoctl peer exited
    stages: dict[str, float] = field(default_factory=dict)  # operator: its stage conditions turning True
    delete: float | None = None  # delete -> every peering object gone on both sides (GONE_TIMEOUT: not all)
    left_after_delete: dict[str, list[str]] = field(default_factory=dict)  # what GONE_TIMEOUT found still there
    unpeer_returned: float | None = None
    vk_pod_ready: float | None = None  # the virtual kubelet's Pod Ready (written by testenv's runner)
    first_write: float | None = None  # the contender's first write
    gone: dict[str, float] = field(default_factory=dict)  # per kind, seconds after the delete
    timeline: list[str] = field(default_factory=list)  # the contender's writes: "+1.234s provider create tenants/x"
    delete_timeline: list[str] = field(default_factory=list)
    reactions: list[dict[str, Any]] = field(default_factory=list)
    requests: dict[str, dict[str, int]] = field(default_factory=dict)  # side -> verb -> count (establishing)
    delete_requests: dict[str, dict[str, int]] = field(default_factory=dict)
    writes: dict[str, dict[str, int]] = field(default_factory=dict)  # side -> "verb resource" -> count

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def check_binaries(install: str = "processes") -> None:
    missing = missing_binaries(tuple(sorted((RUNNABLE if install == "processes" else set()) | {"liqoctl"})))
    if missing:
        raise SystemExit(f"Liqo binaries missing: {', '.join(missing)}; run hack/build-liqo.sh")
    if install == "chart":
        liqo_images()  # raises with the fix (hack/build-liqo-images.sh) when they are not built


def _kubes(pair: BenchPair) -> dict[str, Kube]:
    return {side: Kube(pair[side].api_client()) for side in SIDES}


def _counts(kubes: dict[str, Kube]) -> dict[str, Counter[str]]:
    return {side: requests.counts(kc, CONTENDER) for side, kc in kubes.items()}


def _since(before: dict[str, Counter[str]], kubes: dict[str, Kube]) -> dict[str, dict[str, int]]:
    after = _counts(kubes)
    return {side: dict(after[side] - before[side]) for side in SIDES}


def _liqoctl(args: list[str], home: Path, log_path: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(liqo_binary("liqoctl")), *args],
        capture_output=True,
        text=True,
        timeout=ESTABLISH_TIMEOUT + 60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
    )
    with log_path.open("a") as f:
        f.write(f"$ liqoctl {' '.join(args)}\n{done.stdout}\n{done.stderr}\nexit {done.returncode}\n")
    if done.returncode != 0:
        raise RuntimeError(f"liqoctl {args[0]} failed (exit {done.returncode}), see {log_path}")
    return done


def _poll_node_ready(kc: Kube, start: float, timeout: float) -> float:
    """What a script after `liqoctl peer` would do: look for the Ready virtual node once a second."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in kc.list(k.NODE, selector="liqo.io/type=virtual-node"):
            conds = (node.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
                return time.time() - start
        time.sleep(1)
    raise TimeoutError("the virtual node did not turn Ready")


def _audit(pair: BenchPair, since: float) -> dict[str, list[audit.AuditEvent]]:
    when = datetime.fromtimestamp(since, UTC)
    return {side: audit.writes(pair[side].audit_log, since=when) for side in SIDES}


def _writes_by(events: dict[str, list[audit.AuditEvent]], until: float) -> dict[str, dict[str, int]]:
    end = datetime.fromtimestamp(until, UTC)
    out: dict[str, dict[str, int]] = {}
    for side, evs in events.items():
        mine = [e for e in evs if e.username == CONTENDER and e.received <= end]
        out[side] = {str(key): n for key, n in audit.count_by(mine, lambda e: f"{e.verb} {e.resource}").items()}
    return out


def _timeline(events: dict[str, list[audit.AuditEvent]], start: float, end: float) -> list[str]:
    since, until = datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)
    mine = sorted(
        ((e.received, side, e) for side, evs in events.items() for e in evs if e.username == CONTENDER),
        key=lambda x: x[0],
    )
    return [
        f"+{(at - since).total_seconds():.3f}s {side} {e.verb} {e.resource}/{e.name} ({e.code})"
        for at, side, e in mine
        if since <= at <= until
    ]


@contextlib.contextmanager
def audited_reads(user: str) -> Iterator[None]:
    """Clusters started inside also audit every request of `user`, reads included (testenv.audit's policy
    is read when an API server starts). For finding where the time goes, not for the headline numbers:
    each audited request costs a blocking write to the log."""
    rule = {"level": "Metadata", "users": [user], "omitStages": ["ResponseStarted"]}
    audit.POLICY["rules"].insert(0, rule)
    try:
        yield
    finally:
        audit.POLICY["rules"].remove(rule)


def _write_trace(pair: BenchPair, start: float, path: Path) -> None:
    """Every request of the contender and every write of the others, both clusters, from `start`."""
    since = datetime.fromtimestamp(start, UTC)
    rows = []
    for side in SIDES:
        for e in audit.read_events(pair[side].audit_log):
            if e.received >= since and (e.username == CONTENDER or e.verb in audit.WRITE_VERBS):
                who = "CONTENDER" if e.username == CONTENDER else e.user_agent.split(" ")[0]
                took = (e.completed - e.received).total_seconds() * 1000
                rows.append((e.received, f"{side:8} {who:40} {e.verb:6} {e.resource}/{e.name} {took:.0f}ms"))
    lines = [f"{(at - since).total_seconds():8.3f} {text}" for at, text in sorted(rows, key=lambda r: r[0])]
    path.write_text("\n".join(lines) + "\n")


def run_once(
    contender: str,
    index: int,
    base_dir: Path,
    keep_logs: bool = False,
    trace: bool = False,
    install: str = "processes",
) -> RealRun:
    result = RealRun(contender, index, operator_version(), install)
    work = Path(tempfile.mkdtemp(prefix=f"{contender}-{index}-", dir=base_dir))
    log(f"real Liqo ({install}), {contender} run {index}: starting a fresh cluster pair")
    with contextlib.ExitStack() as stack:
        with audited_reads(CONTENDER) if trace else contextlib.nullcontext():
            pair = INSTALLS[install](work, f"b{contender[0]}{index}")
        stack.callback(quietly, pair.stop, "the cluster pair")
        result.pair_timings = {step: round(seconds, 1) for step, seconds in pair.timings.items()}
        log(f"{contender} run {index}: pair up in {pair.timings.get('pair', 0):.0f}s")
        kubes = _kubes(pair)
        ids = pair.ids
        kubeconfigs = {}
        for side in SIDES:
            requests.install_counters(kubes[side], CONTENDER)
            kubeconfigs[side] = pair[side].user_kubeconfig(CONTENDER)
        kinds = [*PEERING_KINDS, *DEPENDENT_KINDS]
        peerings = None
        if contender == "operator":
            admin = api_client(pair["consumer"].kubeconfig)
            install_crd(admin)
            peerings = Peerings(admin)
            peerings.make_namespace(NAMESPACE)
            peerings.put_kubeconfig_secret(NAMESPACE, SECRET, kubeconfigs["provider"].read_bytes())
            operator = start_operator(kubeconfigs["consumer"], work)
            stack.callback(quietly, operator.stop, "the operator")
            kinds.append(Kind("consumer", LIQOPEERING))
        tracker = Tracker(kubes, [*kinds, VK_PODS]).start()
        stack.callback(tracker.stop)
        tracker.expect("m1", any_with("consumer/resourceslices", "Authentication", "Accepted"))
        tracker.expect("m2", any_with("consumer/nodes", "Ready", "True"))
        tracker.expect("vk_pod_ready", any_with(VK_PODS.key, "Ready", "True"))
        if peerings:
            tracker.expect("m3", any_with("consumer/liqopeerings", "Ready", "True"))
            for stage in STAGES:
                tracker.expect(stage, any_with("consumer/liqopeerings", stage, "True"))

        before = _counts(kubes)
        result.load_average = load_average()
        start = establishing = time.time()
        if peerings:
            spec = {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "10m", **pair.peering_spec}
            peerings.create(NAMESPACE, NAME, spec)
            times = tracker.wait(["m1", "m2", "m3", *STAGES], ESTABLISH_TIMEOUT)
            result.requests = _since(before, kubes)
            result.m3 = times["m3"] - start
            result.stages = {s: times[s] - start for s in STAGES}
            result.m2 = times["m2"] - start
        else:
            args = ["--kubeconfig", str(kubeconfigs["consumer"]), "--remote-kubeconfig", str(kubeconfigs["provider"])]
            _liqoctl(["peer", *args, *pair.liqoctl_peer_args, "--timeout", "10m"], work, work / "liqoctl.log")
            result.returned = time.time() - start
            result.requests = _since(before, kubes)
            result.m2 = _poll_node_ready(kubes["consumer"], start, ESTABLISH_TIMEOUT)
            times = tracker.wait(["m1", "m2"], 10)
        result.vk_pod_ready = tracker.wait(["vk_pod_ready"], 60)["vk_pod_ready"] - start
        result.m1 = times["m1"] - start
        result.m2_event = times["m2"] - start
        established = time.time()

        events = _audit(pair, start)
        agent = OPERATOR_AGENT if peerings else LIQOCTL_AGENT
        found = reactions(events, peering_steps(ids["consumer"], ids["provider"]), operator_agent=agent)
        result.reactions = [{"step": r.step, "seconds": r.seconds} for r in found]
        result.writes = _writes_by(events, established)
        result.timeline = _timeline(events, start, established)
        if result.timeline:
            result.first_write = float(result.timeline[0].split("s ", 1)[0].lstrip("+"))
        log(
            f"{contender} run {index}: M1 {result.m1:.1f}s, M2 {result.m2:.1f}s"
            + (f", M3 {result.m3:.1f}s" if result.m3 is not None else f", returned {result.returned:.1f}s")
        )

        time.sleep(5)  # let Liqo's own follow-up writes (ForeignCluster status) settle before unpeering
        tracker.expect("gone", all_gone([kind.key for kind in kinds]))
        for kind in kinds:
            tracker.expect(f"gone {kind.key}", all_gone([kind.key]))
        before = _counts(kubes)
        start = time.time()
        if peerings:
            peerings.delete(NAMESPACE, NAME)
        else:
            args = ["--kubeconfig", str(kubeconfigs["consumer"]), "--remote-kubeconfig", str(kubeconfigs["provider"])]
            _liqoctl(["unpeer", *args, "--timeout", "10m"], work, work / "liqoctl.log")
            result.unpeer_returned = time.time() - start
        try:
            gone = tracker.wait(["gone"], GONE_TIMEOUT + start - time.time())["gone"]
        except TimeoutError:
            gone = start + GONE_TIMEOUT
            state = tracker.snapshot()
            result.left_after_delete = {kind.key: sorted(state[kind.key]) for kind in kinds if state[kind.key]}
            log(f"{contender} run {index}: not all gone after {GONE_TIMEOUT:.0f}s: {result.left_after_delete}")
        result.delete_requests = _since(before, kubes)
        result.delete = gone - start
        result.gone = {kind.key: (tracker.reached(f"gone {kind.key}") or gone) - start for kind in kinds}
        result.delete_timeline = _timeline(_audit(pair, start), start, gone)
        if keep_logs:
            save_logs({f"audit-{side}": pair[side].audit_log for side in SIDES}, work / "logs")
        if trace:
            _write_trace(pair, establishing, work / "trace.txt")
            log(f"{contender} run {index}: trace in {work / 'trace.txt'}")
        log(f"{contender} run {index}: deletion {result.delete:.1f}s")
    return result


def run_all(
    runs: int, base_dir: Path, keep_logs: bool = False, trace: bool = False, install: str = "processes"
) -> Iterator[RealRun]:
    """Runs alternate between the contenders, so that other load on the host hits both alike."""
    check_binaries(install)
    for index in range(1, runs + 1):
        for contender in ("liqoctl", "operator"):
            yield run_once(contender, index, base_dir, keep_logs, trace, install)

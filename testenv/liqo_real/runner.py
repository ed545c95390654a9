"""A tiny "kubelet" for Liqo's control plane: runs Deployments' containers as local processes.

Every Deployment in the cluster whose (single) container's command is one of Liqo's control-plane
binaries (RUNNABLE) is run here: the chart's liqo-controller-manager, liqo-crd-replicator and liqo-ipam,
and the `vk-<name>` Deployments Liqo itself creates for each VirtualNode. Nothing is special-cased by
component beyond the mapping table below; the rest is what a kubelet does:

- one process per live Pod of the Deployment (kube-controller-manager's ReplicaSet controller creates the
  Pods; no scheduler or kubelet runs, so they are never bound to a node);
- command + args from the Pod spec with `$(VAR)` expanded from the container's env, and env resolved
  like the kubelet does: literal values, `fieldRef` (metadata.name -> the Pod's name, metadata.namespace,
  status.podIP / status.hostIP -> 127.0.0.1, spec.nodeName, spec.serviceAccountName), `configMapKeyRef`,
  `secretKeyRef`, `envFrom`;
- KUBECONFIG = the cluster's admin kubeconfig (instead of the Pod's service account token), HOME = a
  private directory;
- once the process has been up for READY_AFTER seconds the Pod's status is set Running/Ready with
  podIP 127.0.0.1, so the Deployment becomes Available; a process that exits is restarted with
  backoff (restartPolicy Always) and its Pod marked not ready; a Pod that is deleted stops its process
  and, through a finalizer (FINALIZER), goes away only once the process has exited, as with a kubelet
  (unbound Pods would otherwise vanish at once while their process still runs).

Mapping table (FLAG_MAP): flags that make a process listen on a port, or that name an in-cluster
Service, are rewritten (and listeners added when absent, since the binaries' default ports would
collide between two clusters on one machine). An unknown `--*-port` / `--*-address` flag fails loudly
instead of being passed through, so a new Liqo version cannot silently bind a fixed port.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from testenv import kube as k
from testenv.kube import Kube, KubeError, Obj
from testenv.localk8s.ports import free_port

from .binaries import liqo_binary
from .install import container_binary
from .loop import SyncLoop

# Liqo binaries this runner runs (hack/build-liqo.sh builds them).
RUNNABLE = frozenset({"liqo-controller-manager", "crd-replicator", "ipam", "virtual-kubelet", "webhook"})
READY_AFTER = 2.0
# A pass runs when a Deployment or Pod changes, when a process exits and when a process is due to be
# reported ready or restarted; this is the safety net.
POLL_INTERVAL = 5.0
# On the Pods whose process runs here: a deleted Pod stays until its process has stopped.
FINALIZER = "liqo-real.local/process"
LOCAL_IP = "127.0.0.1"

_LISTEN = "listen"  # -> 127.0.0.1:<free port>
_PORT = "port"  # -> <free port>
_IPAM_PORT = "ipam-port"  # -> the IPAM's port (same for the IPAM and its clients)
_IPAM_ADDR = "ipam-addr"  # -> 127.0.0.1:<IPAM port>

# binary -> {flag: rewrite}. Listener flags are added when absent.
FLAG_MAP: dict[str, dict[str, str]] = {
    "liqo-controller-manager": {
        "--metrics-address": _LISTEN,
        "--health-probe-address": _LISTEN,
        "--webhook-port": _PORT,
        "--ipam-server": _IPAM_ADDR,  # the chart gives the in-cluster Service liqo-ipam.<ns>:6000
    },
    "crd-replicator": {"--metrics-address": _LISTEN},
    "ipam": {"--port": _IPAM_PORT},
    "virtual-kubelet": {"--listen-port": _PORT, "--metrics-address": _LISTEN},
    # No API server calls it (see admission.py); its serving certificate goes to the hard-coded
    # /tmp/k8s-webhook-server/serving-certs (pkg/webhooks/secretcontroller), shared by both clusters' webhooks.
    "webhook": {"--webhook-port": _PORT, "--metrics-address": _LISTEN, "--health-probe-address": _LISTEN},
}
# Flags that look like listeners but are not (configuration handed to other components).
NOT_LISTENERS = frozenset({"--geneve-port", "--api-server-address-override", "--home-api-server-port"})
_LISTENER_LIKE = re.compile(r"^--[a-z0-9-]*(-port|-address|-addr)$")
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _log(msg: str) -> None:
    print(f"liqo_real: {msg}", flush=True)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: defined vars are replaced, `$$` is a literal `$`, others stay."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR.sub(sub, value)


class UnmappedFlagError(RuntimeError):
    """A container flag that looks like a listener is not in FLAG_MAP."""


def rewrite_args(binary: str, args: list[str], values: Callable[[str], str]) -> list[str]:
    """Apply FLAG_MAP to `--flag=value` / `--flag value` args; add missing listener flags."""
    table = FLAG_MAP.get(binary, {})
    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, _ = arg.partition("=")
        if name in table:
            seen.add(name)
            out.append(f"{name}={values(table[name])}")
            if not eq and i + 1 < len(args) and not args[i + 1].startswith("-"):
                i += 1  # "--flag value": drop the value
        else:
            if _LISTENER_LIKE.match(name) and name not in NOT_LISTENERS:
                raise UnmappedFlagError(f"{binary}: flag {name} is not in liqo_real.runner.FLAG_MAP")
            out.append(arg)
        i += 1
    for name, kind in table.items():
        if name not in seen and kind in (_LISTEN, _PORT, _IPAM_PORT):
            out.append(f"{name}={values(kind)}")
    return out


def resolve_env(kc: Kube, pod: Obj, container: Obj) -> dict[str, str]:
    """The container's environment as the kubelet computes it (see the module docstring)."""
    md, spec = pod["metadata"], pod.get("spec") or {}
    ns = md["namespace"]
    env: dict[str, str] = {}
    fields = {
        "metadata.name": md["name"],
        "metadata.namespace": ns,
        "metadata.uid": md.get("uid", ""),
        "spec.nodeName": spec.get("nodeName") or "",
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.podIP": LOCAL_IP,
        "status.hostIP": LOCAL_IP,
    }

    def data_of(res: k.Res, name: str) -> dict[str, str]:
        obj = kc.get(res, name, ns) or {}
        if res is k.SECRET:
            return {a: k.unb64(b).decode() for a, b in (obj.get("data") or {}).items()}
        return dict(obj.get("data") or {})

    for src in container.get("envFrom") or []:
        prefix = src.get("prefix", "")
        if "configMapRef" in src:
            env.update({prefix + a: b for a, b in data_of(k.CONFIGMAP, src["configMapRef"]["name"]).items()})
        if "secretRef" in src:
            env.update({prefix + a: b for a, b in data_of(k.SECRET, src["secretRef"]["name"]).items()})
    for e in container.get("env") or []:
        name = e["name"]
        if "value" in e:
            env[name] = expand(str(e["value"]), env)
            continue
        vf = e.get("valueFrom") or {}
        if "fieldRef" in vf:
            path = vf["fieldRef"]["fieldPath"]
            if path not in fields:
                raise UnmappedFlagError(f"env {name}: fieldRef {path} is not supported by liqo_real")
            env[name] = fields[path]
        elif "configMapKeyRef" in vf or "secretKeyRef" in vf:
            ref = vf.get("configMapKeyRef") or vf["secretKeyRef"]
            data = data_of(k.CONFIGMAP if "configMapKeyRef" in vf else k.SECRET, ref["name"])
            if ref["key"] in data:
                env[name] = data[ref["key"]]
            elif not ref.get("optional"):
                raise KeyError(f"env {name}: key {ref['key']} missing in {ref['name']}")
        else:
            raise UnmappedFlagError(f"env {name}: valueFrom {sorted(vf)} is not supported by liqo_real")
    return env


@dataclass
class Proc:
    """One container of one Pod, run as a local process."""

    key: str  # <namespace>/<pod>
    binary: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    pod_uid: str
    popen: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    restarts: int = 0
    next_start: float = 0.0
    ready_reported: bool | None = None
    history: list[str] = field(default_factory=list)

    def start(self, cwd: Path) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        try:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=cwd,
                start_new_session=True,
            )
        finally:
            log.close()
        self.started = time.monotonic()
        self.history.append(f"{now()} started pid {self.popen.pid}")

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, grace: float = 5.0) -> None:
        p = self.popen
        if p is None or p.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


class ComponentRunner(SyncLoop):
    """Runs the RUNNABLE Deployments of one cluster as local processes (a background thread)."""

    def __init__(self, name: str, kc: Kube, kubeconfig: Path, workdir: Path) -> None:
        super().__init__(name, POLL_INTERVAL)
        self.kc = kc
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.log_dir = workdir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.ipam_port = free_port()
        self.procs: dict[str, Proc] = {}
        self._lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------------------

    def stop(self) -> None:
        super().stop()
        # Virtual kubelets first, the IPAM (which the controller manager talks to) last.
        order = {"virtual-kubelet": 0, "webhook": 1, "crd-replicator": 1, "liqo-controller-manager": 2, "ipam": 3}
        with self._lock:
            for proc in sorted(self.procs.values(), key=lambda p: order.get(p.binary, 0)):
                proc.stop()
            self.procs.clear()

    def watched(self) -> list[tuple[Kube, k.Res, str | None]]:
        return [(self.kc, k.DEPLOYMENT, None), (self.kc, k.POD, None)]

    def record_error(self, message: str) -> None:
        msg = f"{self.name}: sync failed: {message}"
        if not self.errors or self.errors[-1] != msg:
            _log(msg)
        super().record_error(msg)

    # --- one pass --------------------------------------------------------------------------------------
    def sync(self) -> None:
        wanted: dict[str, tuple[Obj, str]] = {}
        terminating: list[Obj] = []
        for dep in self.kc.list(k.DEPLOYMENT):
            binary = container_binary(dep)
            if binary not in RUNNABLE:
                continue
            sel = ",".join(f"{a}={b}" for a, b in (dep["spec"]["selector"].get("matchLabels") or {}).items())
            for pod in self.kc.list(k.POD, dep["metadata"]["namespace"], sel):
                if pod["metadata"].get("deletionTimestamp"):
                    terminating.append(pod)
                elif not dep["metadata"].get("deletionTimestamp"):
                    key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                    wanted[key] = (pod, binary)
        # Pods whose Deployment is already gone (its ReplicaSet's garbage collection deletes them later).
        seen = {p["metadata"]["uid"] for p in terminating} | {p["metadata"]["uid"] for p, _ in wanted.values()}
        for pod in self.kc.list(k.POD):
            md = pod["metadata"]
            if FINALIZER in (md.get("finalizers") or []) and md.get("deletionTimestamp") and md["uid"] not in seen:
                terminating.append(pod)
        with self._lock:
            for key in list(self.procs):
                proc = self.procs[key]
                pod_uid = wanted[key][0]["metadata"]["uid"] if key in wanted else None
                if pod_uid != proc.pod_uid:
                    _log(f"{self.name}: pod {key} gone or terminating, stopping {proc.binary}")
                    proc.stop()
                    del self.procs[key]
            # Like a kubelet, a terminating Pod goes away only once its process has stopped: Liqo (e.g.
            # the virtual node deletion routine) waits for the Pods to be gone and must not race with a
            # process that is still running.
            for pod in terminating:
                self._release(pod)
            for key, (pod, binary) in wanted.items():
                if key not in self.procs:
                    self._hold(pod)
                    self.procs[key] = self._new_proc(key, pod, binary)
                self._tend(self.procs[key], pod)

    def _hold(self, pod: Obj) -> None:
        md = pod["metadata"]
        finalizers = md.get("finalizers") or []
        if FINALIZER not in finalizers:
            patch = {"metadata": {"finalizers": [*finalizers, FINALIZER], "resourceVersion": md["resourceVersion"]}}
            self.kc.patch(k.POD, md["name"], patch, md["namespace"])

    def _release(self, pod: Obj) -> None:
        md = pod["metadata"]
        finalizers = md.get("finalizers") or []
        if FINALIZER in finalizers:
            rest = [f for f in finalizers if f != FINALIZER]
            try:
                self.kc.patch(k.POD, md["name"], {"metadata": {"finalizers": rest or None}}, md["namespace"])
            except KubeError as e:
                if e.status != 404:
                    raise

    def _values(self, kind: str) -> str:
        if kind == _LISTEN:
            return f"{LOCAL_IP}:{free_port()}"
        if kind == _PORT:
            return str(free_port())
        if kind == _IPAM_PORT:
            return str(self.ipam_port)
        if kind == _IPAM_ADDR:
            return f"{LOCAL_IP}:{self.ipam_port}"
        raise ValueError(kind)

    def _new_proc(self, key: str, pod: Obj, binary: str) -> Proc:
        container = pod["spec"]["containers"][0]
        env = resolve_env(self.kc, pod, container)
        raw = [*container["command"][1:], *(container.get("args") or [])]
        args = rewrite_args(binary, [expand(a, env) for a in raw], self._values)
        home = self.workdir / "home" / pod["metadata"]["name"]
        home.mkdir(parents=True, exist_ok=True)
        full_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            **env,
            "KUBECONFIG": str(self.kubeconfig),
            **({"GOGC": os.environ["GOGC"]} if "GOGC" in os.environ else {}),  # as for the harness's other Go programs
        }
        log_path = self.log_dir / f"{pod['metadata']['namespace']}.{pod['metadata']['name']}.log"
        proc = Proc(key, binary, [str(liqo_binary(binary)), *args], full_env, log_path, pod["metadata"]["uid"])
        _log(f"{self.name}: running {binary} for pod {key}: {' '.join(proc.argv[1:])} (log {log_path})")
        return proc

    def _tend(self, proc: Proc, pod: Obj) -> None:
        t = time.monotonic()
        if not proc.alive():
            if proc.popen is not None:  # it ran and exited
                rc = proc.popen.returncode
                proc.history.append(f"{now()} exited with {rc}")
                _log(f"{self.name}: {proc.binary} ({proc.key}) exited with {rc}; see {proc.log_path}")
                proc.restarts += 1
                proc.popen = None
                proc.next_start = t + min(2 ** min(proc.restarts, 4), 10)
                self._report(proc, pod, ready=False)
            if t >= proc.next_start:
                proc.start(self.workdir)
                self._wake_on_exit(proc)
                self.due_in(READY_AFTER)
            else:
                self.due_in(proc.next_start - t)
            return
        up = t - proc.started
        if up < READY_AFTER:
            self.due_in(READY_AFTER - up)
        self._report(proc, pod, ready=up >= READY_AFTER)

    def _wake_on_exit(self, proc: Proc) -> None:
        """A pass as soon as the process exits (a kubelet sees its container die)."""
        popen = proc.popen

        def wait() -> None:
            if popen is not None:
                popen.wait()
                self.wake()

        threading.Thread(target=wait, name=f"exit-{proc.key}", daemon=True).start()

    def _report(self, proc: Proc, pod: Obj, ready: bool) -> None:
        """Pod status as a kubelet would write it."""
        if proc.ready_reported is ready:
            return
        md = pod["metadata"]
        t = now()
        flag = "True" if ready else "False"
        conds = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": t}]
        conds += [{"type": c, "status": flag, "lastTransitionTime": t} for c in ("Initialized", "ContainersReady")]
        conds.append({"type": "Ready", "status": flag, "lastTransitionTime": t})
        cname = pod["spec"]["containers"][0]["name"]
        state = {"running": {"startedAt": t}} if ready else {"waiting": {"reason": "CrashLoopBackOff"}}
        status = {
            "phase": "Running",
            "hostIP": LOCAL_IP,
            "podIP": LOCAL_IP,
            "podIPs": [{"ip": LOCAL_IP}],
            "startTime": (pod.get("status") or {}).get("startTime") or t,
            "conditions": conds,
            "containerStatuses": [
                {
                    "name": cname,
                    "ready": ready,
                    "started": ready,
                    "restartCount": proc.restarts,
                    "image": pod["spec"]["containers"][0].get("image", ""),
                    "imageID": "",
                    "state": state,
                }
            ],
        }
        try:
            self.kc.patch(k.POD, md["name"], {"status": status}, md["namespace"], sub="status")
            proc.ready_reported = ready
        except KubeError as e:
            if e.status != 404:
                raise

    # --- for tests -------------------------------------------------------------------------------------
    def processes(self, binary: str | None = None) -> list[Proc]:
        with self._lock:
            return [p for p in self.procs.values() if binary is None or p.binary == binary]

    def flag(self, binary: str, name: str) -> str | None:
        """The value a running process of `binary` was given for `name` (e.g. the webhook's port)."""
        for p in self.processes(binary):
            for arg in p.argv[1:]:
                flag, eq, value = arg.partition("=")
                if flag == name and eq:
                    return value
        return None

    def describe(self) -> str:
        lines = []
        for p in self.processes():
            lines.append(f"{p.binary} {p.key} alive={p.alive()} restarts={p.restarts} log={p.log_path}")
        return "\n".join(lines)

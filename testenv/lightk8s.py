"""Light provider clusters (the scale benchmark, the LiqoPeeringSet e2e test): one kube-apiserver each, all
storing in one etcd.

A provider only needs an API server: the Liqo stand-in plays its controllers, and one thing a
kube-controller-manager would do for it (sign the Tenant's CSR) is done by testenv.standin.fleet. Each API
server keeps its objects under its own `--etcd-prefix`, so fifty of them cost one etcd. They share one CA
and serving certificate (all listen on 127.0.0.1). Each writes an audit log (testenv.audit's policy).

Unpeering deletes the provider's Tenant in the foreground, which only a garbage collector completes: with
``garbage_collector=True`` each provider also runs a kube-controller-manager with that one controller.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import kubernetes.client
import yaml

from testenv import audit
from testenv.kube import Kube, KubeError, Obj
from testenv.liqo_env import install_liqo, render_chart
from testenv.localk8s import pki, tool_path
from testenv.localk8s.cluster import kubeconfig_dict
from testenv.localk8s.ports import free_port
from testenv.spawned import Spawned

START_TIMEOUT = 180.0


def log(msg: str) -> None:
    print(f"lightk8s: {msg}", file=sys.stderr, flush=True)


# One API server with Liqo's CRDs: ~490 MB by default, ~290 MB with these flags and GOGC=50
# (fifty must fit next to everything else). A GOMEMLIMIT below its live heap (~220 MB at 100MiB) made it
# collect garbage nonstop: 22 % of a core idle and three times slower to install Liqo's CRDs.
# No watch cache: watches are served from etcd.
LIGHT_FLAGS = ["--watch-cache=false", "--enable-priority-and-fairness=false"]
LIGHT_ENV = {"GOGC": "50"}


@dataclass(frozen=True)
class SharedPki:
    dir: Path

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.crt"

    def path(self, name: str) -> Path:
        return self.dir / name

    @classmethod
    def create(cls, dir: Path) -> SharedPki:
        dir.mkdir(parents=True)
        ca = pki.new_ca("bench-providers-ca")
        ca.write(dir / "ca.crt", dir / "ca.key")
        pki.new_serving_cert(ca, "kube-apiserver", ["localhost"], ["127.0.0.1"]).write(
            dir / "apiserver.crt", dir / "apiserver.key"
        )
        pki.new_client_cert(ca, "bench-admin", ["system:masters"]).write(dir / "admin.crt", dir / "admin.key")
        sa = pki.new_key()
        (dir / "sa.key").write_bytes(pki.key_pem(sa))
        (dir / "sa.pub").write_bytes(pki.public_key_pem(sa))
        return cls(dir)

    def ca(self) -> pki.CertKey:
        return pki.load_ca(self.dir / "ca.crt", self.dir / "ca.key")


class SharedEtcd:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.url = f"http://127.0.0.1:{free_port()}"
        self.proc: Spawned | None = None

    def start(self) -> SharedEtcd:
        self.workdir.mkdir(parents=True)
        peer = f"http://127.0.0.1:{free_port()}"
        self.proc = Spawned(
            "etcd",
            [
                str(tool_path("etcd")),
                "--name=bench",
                f"--data-dir={self.workdir / 'data'}",
                f"--listen-client-urls={self.url}",
                f"--advertise-client-urls={self.url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=bench={peer}",
                "--unsafe-no-fsync",  # throwaway data
                "--log-level=warn",
                # Fifty API servers' objects and watches: well within the defaults, but no need to keep history.
                "--auto-compaction-retention=5m",
            ],
            self.workdir / "etcd.log",
        )
        deadline = time.monotonic() + 60
        while not self._healthy():
            if not self.proc.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"shared etcd did not start:\n{self.proc.tail()}")
            time.sleep(0.2)
        return self

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                return bool(json.load(resp).get("health") == "true")
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc:
            self.proc.stop()


class LightCluster:
    """One kube-apiserver (no controller manager) under `/<name>` of a shared etcd."""

    def __init__(
        self, name: str, workdir: Path, shared: SharedPki, service_cidr: str, extra_flags: Sequence[str] = ()
    ) -> None:
        self.name = name
        self.extra_flags = list(extra_flags)  # more kube-apiserver flags, such as a webhook token authenticator
        self.workdir = workdir
        self.pki = shared
        self.service_cidr = service_cidr
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = workdir / "admin.kubeconfig"
        self.audit_log = workdir / "audit.log"
        self.proc: Spawned | None = None
        self.gc: Spawned | None = None  # kube-controller-manager running the garbage collector only

    def api_client(self) -> kubernetes.client.ApiClient:
        cfg = kubernetes.client.Configuration(
            host=self.server,
            ssl_ca_cert=str(self.pki.ca_cert),
            cert_file=str(self.pki.path("admin.crt")),
            key_file=str(self.pki.path("admin.key")),
        )
        return kubernetes.client.ApiClient(cfg)

    def start(self, etcd_url: str) -> None:
        self.workdir.mkdir(parents=True)
        p = self.pki.path
        cfg = kubeconfig_dict(
            self.name,
            self.server,
            p("ca.crt").read_bytes(),
            "bench-admin",
            p("admin.crt").read_bytes(),
            p("admin.key").read_bytes(),
        )
        self.kubeconfig.write_text(yaml.safe_dump(cfg, sort_keys=False))
        self.kubeconfig.chmod(0o600)
        policy = audit.write_policy(self.workdir / "audit-policy.yaml")
        self.proc = Spawned(
            "kube-apiserver",
            [
                str(tool_path("kube-apiserver")),
                f"--etcd-servers={etcd_url}",
                f"--etcd-prefix=/{self.name}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                f"--secure-port={self.port}",
                f"--cert-dir={self.workdir}",
                f"--tls-cert-file={p('apiserver.crt')}",
                f"--tls-private-key-file={p('apiserver.key')}",
                f"--client-ca-file={p('ca.crt')}",
                "--authorization-mode=Node,RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={p('sa.pub')}",
                f"--service-account-signing-key-file={p('sa.key')}",
                f"--service-cluster-ip-range={self.service_cidr}",
                "--allow-privileged=true",
                "--profiling=false",
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-mode=blocking",
                "--v=0",
                *LIGHT_FLAGS,
                *self.extra_flags,
            ],
            self.workdir / "kube-apiserver.log",
            env={**os.environ, **LIGHT_ENV},
        )

    def wait_ready(self, deadline: float) -> None:
        kc = Kube(self.api_client())
        while True:
            assert self.proc is not None
            if not self.proc.alive():
                raise RuntimeError(f"{self.name}: kube-apiserver exited:\n{self.proc.tail()}")
            try:
                kc.get_text("/readyz", timeout=2)
                return
            except Exception:  # refused while starting, 500 until the post-start hooks are done
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name}: not ready in time:\n{self.proc.tail()}") from None
                time.sleep(0.3)

    def start_garbage_collector(self) -> None:
        """kube-controller-manager with the garbage collector and the CSR signer alone (it waits for the API
        server itself): the signer issues the client certificates of approved CSRs, as a minted user needs."""
        self.gc = Spawned(
            "kube-controller-manager",
            [
                str(tool_path("kube-controller-manager")),
                f"--kubeconfig={self.kubeconfig}",
                "--controllers=garbagecollector,csrsigning",
                f"--cluster-signing-cert-file={self.pki.path('ca.crt')}",
                f"--cluster-signing-key-file={self.pki.path('ca.key')}",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=0",
            ],
            self.workdir / "kube-controller-manager.log",
            env={**os.environ, **LIGHT_ENV},
        )

    def stop(self) -> None:
        if self.gc:
            self.gc.stop(grace=0)
        if self.proc:
            self.proc.stop(grace=0)  # throwaway data: no graceful shutdown needed


@dataclass
class LightProviders:
    etcd: SharedEtcd
    clusters: list[LightCluster]
    base_dir: Path

    def stop(self) -> None:
        for cluster in self.clusters:
            cluster.stop()
        self.etcd.stop()
        shutil.rmtree(self.base_dir, ignore_errors=True)


def start_light_providers(
    count: int,
    base_dir: Path,
    parallel: int = 6,
    garbage_collector: bool = False,
    extra_flags: Sequence[str] = (),
) -> LightProviders:
    """`count` API servers named p1..pN on one etcd (each with a garbage collector if asked, and
    `extra_flags`); stopped again if any fails to start."""
    etcd = SharedEtcd(base_dir / "etcd")
    providers = LightProviders(etcd, [], base_dir)
    try:
        etcd.start()
        shared = SharedPki.create(base_dir / "pki")
        # Distinct service ranges, as localk8s gives its clusters.
        providers.clusters = [
            LightCluster(f"p{i}", base_dir / f"p{i}", shared, f"10.{(i // 250) + 20}.{i % 250}.0/24", extra_flags)
            for i in range(1, count + 1)
        ]
        started = time.monotonic()
        # In batches: fifty API servers starting at once on two cores would each miss their deadline.
        with ThreadPoolExecutor(max_workers=parallel) as pool:

            def start(cluster: LightCluster) -> None:
                cluster.start(etcd.url)
                cluster.wait_ready(time.monotonic() + START_TIMEOUT)
                if garbage_collector:
                    cluster.start_garbage_collector()

            list(pool.map(start, providers.clusters))
        log(f"{count} light provider API servers up in {time.monotonic() - started:.0f}s")
    except BaseException:
        providers.stop()
        raise
    return providers


PLACEHOLDER_ID = "bench-placeholder-cluster-id"
INSTALL_ATTEMPTS = 4


PROVIDER_POD_CIDR, PROVIDER_EXTERNAL_CIDR = "10.200.0.0/16", "10.210.0.0/16"


def render_provider_chart() -> list[Obj]:
    """Liqo's chart rendered once for every light provider (a placeholder where the cluster ID goes)."""
    return render_chart(PLACEHOLDER_ID, PROVIDER_POD_CIDR, PROVIDER_EXTERNAL_CIDR, "10.20.0.0/16")


def install_liqo_on_providers(
    clusters: list[LightCluster], ids: dict[str, str], rendered: list[Obj] | None = None
) -> None:
    """Liqo's objects on every provider, from one rendering of the chart (helm takes seconds each time;
    ``rendered``: render_provider_chart's, made meanwhile).

    The providers differ in their cluster ID, which the chart puts in one ConfigMap only; they share pod
    and external CIDRs, which nothing here remaps or routes."""
    pod, external = PROVIDER_POD_CIDR, PROVIDER_EXTERNAL_CIDR
    rendered = rendered if rendered is not None else render_provider_chart()

    def install(cluster: LightCluster) -> None:
        docs = copy.deepcopy(rendered)
        cluster_id_maps = [d for d in docs if (d.get("data") or {}).get("CLUSTER_ID") == PLACEHOLDER_ID]
        if len(cluster_id_maps) != 1:
            raise RuntimeError("Liqo's chart no longer renders the cluster ID into exactly one ConfigMap")
        cluster_id_maps[0]["data"]["CLUSTER_ID"] = ids[cluster.name]
        kc = Kube(cluster.api_client())
        for attempt in range(1, INSTALL_ATTEMPTS + 1):
            try:
                install_liqo(kc, ids[cluster.name], pod, external, service_cidr=cluster.service_cidr, rendered=docs)
                return
            except KubeError as e:
                # Fifty API servers on one etcd, on a busy host: "etcdserver: request timed out" happens.
                # Applying again is safe (server-side apply).
                if e.status < 500 or attempt == INSTALL_ATTEMPTS:
                    raise
                log(f"{cluster.name}: installing Liqo's objects failed ({e}); again")
                time.sleep(5)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(install, clusters))

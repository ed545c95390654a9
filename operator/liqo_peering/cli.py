"""`liqo-peering-operator run`: the operator process."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import time
from functools import partial
from pathlib import Path

import kopf
import structlog
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from liqo_peering import __version__, handlers, logs
from liqo_peering.clients.cluster import ClusterClient
from liqo_peering.clients.connect import pooled, with_user_agent
from liqo_peering.clients.events import EventRecorder
from liqo_peering.clients.informer import Scope, SharedInformers
from liqo_peering.clients.remotes import RemoteClients
from liqo_peering.clusterprofile import (
    MAX_FILE_BYTES,
    PROVIDER_FILE_FLAG,
    AccessProviders,
    ProviderFileError,
    load_provider_file,
)
from liqo_peering.engine.discovery import KubeconfigPolicy, TenantAccess, VersionCache
from liqo_peering.engine.kinds import Peerings, PeeringSets
from liqo_peering.engine.passmarkers import FIRST_BACKOFF, MAX_BACKOFF, PassMarkers
from liqo_peering.engine.peeringset import SetService
from liqo_peering.engine.reconcile import Reconciler
from liqo_peering.engine.runner import MAX_CALLS, ObjectKey, Runner, Wakeups
from liqo_peering.engine.statuswriter import STATUS_DUE
from liqo_peering.engine.sweep import ProtectionSweep
from liqo_peering.engine.unpeering import Unpeerer
from liqo_peering.engine.watches import WatchHub, consumer_scopes
from liqo_peering.health import DEFAULT_STALL_SECONDS, Health, TrackedPool
from liqo_peering.kubeconfig import EXEC_FLAG, TLS_FLAG
from liqo_peering.liqo import resources as r
from liqo_peering.metrics import Metrics
from liqo_peering.redact import redact

log = structlog.get_logger("liqo_peering")
# Flags other modules name in their messages are spelled where those messages live, and used from there.
TENANT_ACCESS_FLAG = "--tenant-access-role"
SERVICE_ACCOUNT_FLAG = "--service-account"
PEERING_NAME_FLAG = "--peering-name"
PEERING_LIFETIME_FLAG = "--peering-lifetime"
PASS_MARKERS_FLAG = "--pass-markers-dir"
PUT_ASIDE_BACKOFF_FLAG = "--put-aside-backoff"
# kopf's keep-alive re-announces a replica 5-10 s (at random) before its entry expires (kopf/_core/engines/
# peering.py, keepalive): above 10 s the interval is always positive; at 10 s or less kopf clamps it to 1 s,
# a write per replica every second with a shrinking margin before expiry.
MIN_PEERING_LIFETIME = 11


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="liqo-peering-operator", description="Declarative Liqo peerings.")
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the operator")
    run.add_argument("--kubeconfig", help="kubeconfig of the LOCAL (consumer) cluster; default: in-cluster")
    run.add_argument("--context", help="context in --kubeconfig")
    run.add_argument(
        "--namespace",
        action="append",
        default=[],
        dest="namespaces",
        help="watch this namespace (repeatable); default: all namespaces",
    )
    run.add_argument(
        EXEC_FLAG,
        action="store_true",
        help="allow exec and auth-provider plugins in remote kubeconfigs",
    )
    run.add_argument(TLS_FLAG, action="store_true", help="allow insecure-skip-tls-verify in remote kubeconfigs")
    run.add_argument(
        PROVIDER_FILE_FLAG,
        type=Path,
        default=None,
        metavar="PATH",
        help="JSON file of the access providers (KEP-5339: a name and an exec plugin each) through which"
        " LiqoPeerings with spec.remoteClusterProfileRef reach the ClusterProfile's cluster, the first one a"
        " ClusterProfile offers in file order; default: none, such LiqoPeerings report NoAccessProvider",
    )
    run.add_argument(
        "--log-format", choices=["json", "console"], default="json", help="json (for log collectors) or console"
    )
    run.add_argument(
        "--log-level", choices=["debug", "info", "warning"], default="info", help="the lowest level logged"
    )
    run.add_argument("--metrics-port", type=int, default=8080, help="Prometheus /metrics port (0: off)")
    run.add_argument(
        "--health-port",
        type=int,
        default=8081,
        help="probe endpoints port: GET /livez (also /healthz), /readyz; 0: off",
    )
    run.add_argument(
        "--stall-timeout",
        type=float,
        default=DEFAULT_STALL_SECONDS,
        metavar="SECONDS",
        help="/livez fails once the event loop, or a worker pool with work waiting, has made no progress for this long",
    )
    run.add_argument(
        "--resync-interval",
        type=float,
        default=60.0,
        help="seconds between full reconciles of a peering (drift repair)",
    )
    run.add_argument(
        TENANT_ACCESS_FLAG,
        default=None,
        help="ClusterRole (Secret access) the operator binds to its own ServiceAccount in each tenant namespace,"
        f" instead of reading Secrets cluster-wide; needs {SERVICE_ACCOUNT_FLAG}",
    )
    run.add_argument(
        SERVICE_ACCOUNT_FLAG,
        default=None,
        help=f"NAMESPACE/NAME of the operator's ServiceAccount, for {TENANT_ACCESS_FLAG}",
    )
    run.add_argument(
        "--kubeconfig-secret-protection",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep a kubeconfig Secret (finalizer) while a LiqoPeering uses it, so that deleting both at once"
        " (kubectl delete -f, a namespace, GitOps pruning) still unpeers; needs patch on those Secrets",
    )
    run.add_argument(
        "--restart-liqo-on-renewal",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="on a cluster running Liqo v1.0 or v1.1, whose controller manager and virtual kubelets read an"
        " identity's kubeconfig only when they start: restart their Pods once a certificate is renewed; needs list"
        " and delete on those Pods",
    )
    run.add_argument(
        "--priority",
        type=int,
        default=None,
        help="kopf peering priority of this replica (HA); default: by start time, the replica that started first"
        " outranks the others, so that a new replica stands by rather than take over from the acting one",
    )
    run.add_argument(
        PEERING_NAME_FLAG, default=None, help="kopf peering object for HA (several replicas); default: standalone"
    )
    run.add_argument(
        PEERING_LIFETIME_FLAG,
        type=peering_lifetime,
        default=None,
        metavar="SECONDS",
        help="how long this replica's entry in the kopf peering object stays valid without a keep-alive: a replica"
        " that dies without withdrawing (SIGKILL, a lost node) holds the others paused up to this long;"
        f" at least {MIN_PEERING_LIFETIME}; needs {PEERING_NAME_FLAG}; default: kopf's (60)",
    )
    run.add_argument(
        PASS_MARKERS_FLAG,
        type=Path,
        default=None,
        metavar="DIR",
        help="where each pass in flight leaves a marker, so that an object whose passes killed the operator twice"
        " in a row (out of memory, a crash) is put aside after the restart (PassCrashed) instead of killing it"
        " again; a directory that outlives the container (the chart's emptyDir); default: none, nothing is put"
        " aside",
    )
    run.add_argument(
        PUT_ASIDE_BACKOFF_FLAG,
        type=float,
        default=FIRST_BACKOFF,
        metavar="SECONDS",
        help=f"how long an object is put aside at first (with {PASS_MARKERS_FLAG}); doubled at each further death"
        f" up to {int(MAX_BACKOFF)} s, or this if longer",
    )
    return parser


def access_providers(path: Path | None) -> AccessProviders:
    """The provider file's access providers, read within bounds at start; a file that cannot be used stops the
    operator with the reason."""
    if path is None:
        return AccessProviders()
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise SystemExit(f"{PROVIDER_FILE_FLAG} {path}: cannot be read ({exc.strerror})") from None
    try:
        return load_provider_file(raw, f"{PROVIDER_FILE_FLAG} {path}")
    except ProviderFileError as exc:
        raise SystemExit(str(exc)) from None


def peering_lifetime(text: str) -> int:
    """--peering-lifetime's value: whole seconds (kopf stores an integer), long enough to be kept alive."""
    try:
        seconds = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
    if seconds < MIN_PEERING_LIFETIME:
        raise argparse.ArgumentTypeError(
            f"{seconds} s is too short: kopf re-announces a replica 5-10 s before its entry"
            f" expires, which needs at least {MIN_PEERING_LIFETIME} s (kopf's default is 60)"
        )
    return seconds


def kopf_settings(args: argparse.Namespace) -> kopf.OperatorSettings:
    """The kopf settings the flags decide, before the startup handler adds the fixed ones (handlers.configure)."""
    if args.peering_lifetime is not None and args.peering_name is None:
        raise SystemExit(
            f"{PEERING_LIFETIME_FLAG} needs {PEERING_NAME_FLAG}: without a peering object the operator runs"
            " standalone and has no peering entry to keep alive"
        )
    settings = kopf.OperatorSettings()
    if args.peering_lifetime is not None:
        settings.peering.lifetime = args.peering_lifetime
    return settings


def local_configuration(kubeconfig: str | None, context: str | None) -> k8s_client.Configuration:
    cfg = k8s_client.Configuration()
    if kubeconfig or context:
        k8s_config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    else:
        k8s_config.load_incluster_config(client_configuration=cfg)
    return pooled(cfg)


def connection_info(cfg: k8s_client.Configuration) -> kopf.ConnectionInfo:
    token = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
    scheme = None
    if token and " " in token:
        scheme, token = token.split(" ", 1)
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        scheme=scheme or ("Bearer" if token else None),
        token=token,
    )


def peering_identity() -> str:
    """This replica's name in kopf peering: its Pod's (the chart sets POD_NAME), else host and process.

    kopf's default asks the password database for the user's name, which has no entry for the image's
    uid 65532: getpwuid() raises and the operator exits at start-up."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


class PeeringPauses(logging.Handler):
    """Follows kopf peering's pause and resume: kopf says so only in these log lines (its toggles are
    internal), and the metric liqo_peering_operator_active is what an alert on "no active replica" reads."""

    def __init__(self, metrics: Metrics) -> None:
        super().__init__(level=logging.INFO)
        self.metrics = metrics

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(("Pausing operations", "Pausing all operators")):
            self.metrics.set_active(False)
        elif message.startswith("Resuming operations"):
            self.metrics.set_active(True)


KOPF_PEERING_LOGGER = "kopf._core.engines.peering"


def start_priority(started: float | None = None) -> int:
    """This replica's kopf peering priority: the earlier it started, the higher (minus its start time in
    microseconds). kopf pauses every replica below the top live peer, and every one that shares the top
    priority, so each replica needs its own. Ranking by start time means that a replica joining during a
    rolling update or a drain stands by and the acting one keeps acting until it withdraws (SIGTERM) or its
    entry expires; and a container restarted in place ranks below the replica that took over from it, so
    that one goes on. Clocks of different nodes may differ: the order is then another one, still total.
    Negative, so that `kopf run` on a workstation (priority 0) outranks the cluster's replicas, as kopf
    intends for debugging."""
    return -int((time.time() if started is None else started) * 1_000_000)


def run(args: argparse.Namespace) -> None:
    tenant_access = None
    if args.tenant_access_role:
        sa_namespace, _, sa_name = (args.service_account or "").partition("/")
        if not sa_namespace or not sa_name:
            raise SystemExit(f"{TENANT_ACCESS_FLAG} needs {SERVICE_ACCOUNT_FLAG} NAMESPACE/NAME")
        tenant_access = TenantAccess(args.tenant_access_role, sa_namespace, sa_name)
    settings = kopf_settings(args)
    remote_ids = logs.RemoteClusterIds()  # the engine learns them, kopf's lines about a peering carry them
    logs.configure(args.log_format, getattr(logging, args.log_level.upper()), scrub=redact, remote_ids=remote_ids)
    cfg = local_configuration(args.kubeconfig, args.context)
    in_cluster = not (args.kubeconfig or args.context)
    local = ClusterClient(with_user_agent(k8s_client.ApiClient(cfg)), "consumer", cfg.host)
    metrics = Metrics()
    # Standalone, this replica is the only one; with kopf peering it starts paused until kopf resumes it.
    metrics.set_active(args.peering_name is None)
    kopf_peering_log = logging.getLogger(KOPF_PEERING_LOGGER)
    kopf_peering_log.addHandler(PeeringPauses(metrics))
    kopf_peering_log.setLevel(min(kopf_peering_log.getEffectiveLevel(), logging.INFO))
    if args.metrics_port:
        metrics.serve(args.metrics_port)
    policy = KubeconfigPolicy(
        allow_exec=args.insecure_kubeconfig_exec,
        allow_insecure_tls=args.insecure_kubeconfig_tls,
        access_providers=access_providers(args.clusterprofile_provider_file),
    )
    # One watch hub for LiqoPeerings and LiqoPeeringSets: a namespace's Secrets are watched once for both.
    wakeups = Wakeups()
    hub = WatchHub(wakeups)
    hub.pin(local, consumer_scopes(namespaced_tenant_reads=tenant_access is not None))
    # The passes wait on their sub-calls in a pool of their own: none waits for a thread another pass holds.
    calls = TrackedPool(MAX_CALLS, "calls")
    remotes = RemoteClients(on_close=hub.forget_client)  # no informer outlives its provider client
    events = EventRecorder(local)
    # One informer per cluster, resource and namespace: watching all namespaces, the sweep's LiqoPeerings are
    # those the duplicate check reads (cluster-wide in any case: a duplicate may be in any namespace).
    informers = SharedInformers()
    informers.of(local, Scope(r.LIQOPEERING)).start()

    def peering(namespace: str, name: str) -> ObjectKey:
        return ObjectKey(r.LIQOPEERING.kind, namespace, name)

    peerings = Peerings(
        Reconciler(
            local,
            events,
            metrics,
            policy,
            tenant_access=tenant_access,
            remotes=remotes,
            protect_secrets=args.kubeconfig_secret_protection,
            restart_liqo=args.restart_liqo_on_renewal,
            calls=calls,
            remote_ids=remote_ids,
            versions=VersionCache(),
            informers=informers,
            superseded=lambda namespace, name: wakeups.due(peering(namespace, name)),
            hold=lambda namespace, name, delay: wakeups.later(peering(namespace, name), STATUS_DUE, delay),
            listen=lambda namespace, name: partial(wakeups.listening, peering(namespace, name)),
        ),
        Unpeerer(
            local,
            events,
            metrics,
            policy,
            remotes=remotes,
            calls=calls,
            remote_ids=remote_ids,
            namespaced_tenant_reads=tenant_access is not None,
        ),
        args.resync_interval,
        namespaced_tenant_reads=tenant_access is not None,
        hub=hub,
    )
    kinds = (peerings, PeeringSets(SetService(local, events, metrics=metrics), args.resync_interval))
    markers = PassMarkers(args.pass_markers_dir, on_aside=metrics.set_put_aside, first_backoff=args.put_aside_backoff)
    markers.recover()  # before any pass: the markers left in flight are the deaths of the last run
    runner = Runner(kinds, hub, wakeups, markers, calls)
    # Releases the protection of the Secrets no LiqoPeering needs any more, at start and as LiqoPeerings go.
    sweep = ProtectionSweep(local, args.namespaces, informers) if args.kubeconfig_secret_protection else None
    health = Health(args.stall_timeout)
    health.pools.extend((runner.pool, calls))
    health.readiness.append(lambda: hub.unsynced(local.side))
    if sweep is not None:
        health.readiness.append(sweep.unsynced)
    if args.health_port:
        health.serve(args.health_port)
    log.info("starting", version=__version__, namespaces=args.namespaces or "all", local=cfg.host)
    kopf.run(
        registry=handlers.registry,
        settings=settings,
        clusterwide=not args.namespaces,
        namespaces=args.namespaces,
        standalone=args.peering_name is None,
        peering_name=args.peering_name,
        identity=peering_identity(),  # type: ignore[arg-type]  # kopf's Identity: a NewType of str it does not export
        priority=args.priority if args.priority is not None else start_priority(),
        ready_flag=health.started,
        memo=kopf.Memo(
            peerings=peerings,
            runner=runner,
            health=health,
            sweep=sweep,
            connection=None if in_cluster else connection_info(cfg),
        ),
    )


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        run(args)


if __name__ == "__main__":
    main()

"""The provider's kubeconfig Secret rotated under a Ready peering (tests/e2e/test_real_liqo.py), for any pair
of clusters the operator peers.

New valid credentials (a ServiceAccount's token with cluster-admin on the provider, as a platform team would
rotate to; then the admin kubeconfig again; then the token again) take effect without restarting the
operator: the new identity writes on the provider (its audit log), and the old client's connections go
(testenv.procstat). Broken credentials are reported (Ready False, ProviderUnauthorized, no credential in the
status) and nothing of the peering is touched (the same uids); the Secret restored, it is Ready again.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml
from kubernetes import client as k8s

from testenv import audit, procstat
from testenv.operator_support import SECRET, OperatorProcess, Peerings, custom, items, tenant_ns, wait_for
from testenv.reactions import OPERATOR_AGENT

if TYPE_CHECKING:
    from testenv.localk8s.cluster import LocalCluster

BROKEN_TOKEN = "not-a-token"
ROTATIONS = 3  # to the token, back to the admin's certificate, to the token again


def token_kubeconfig(admin: bytes, token: str) -> bytes:
    """The provider's admin kubeconfig with its user swapped for a bearer token."""
    config = yaml.safe_load(admin)
    config["users"][0]["user"] = {"token": token}
    return yaml.safe_dump(config).encode()


@contextlib.contextmanager
def admin_service_account(api: k8s.ApiClient, name: str) -> Iterator[tuple[str, str]]:
    """A ServiceAccount `default/<name>` bound to cluster-admin, and a token of it (1 h): yields its user name
    and the token; both are removed afterwards."""
    core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
    account: Any = {"metadata": {"name": name}}
    core.create_namespaced_service_account("default", account)
    binding: Any = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}],
    }
    rbac.create_cluster_role_binding(binding)
    try:
        request: Any = {"spec": {"expirationSeconds": 3600}}
        issued: Any = core.create_namespaced_service_account_token(name, "default", request)
        yield f"system:serviceaccount:default:{name}", str(issued.status.token)
    finally:
        rbac.delete_cluster_role_binding(name)
        core.delete_namespaced_service_account(name, "default")


class PeeringEnv(Protocol):
    """What the stand-in suite's and the real-Liqo suite's environments both have."""

    peerings: Peerings
    provider_api: k8s.ApiClient  # admin
    operator: OperatorProcess

    @property
    def consumer_id(self) -> str: ...


@dataclass
class Rotation:
    """A Ready peering whose kubeconfig Secret gets rotated, and where to see what the operator does."""

    env: PeeringEnv
    namespace: str
    name: str
    provider: LocalCluster  # its audit log and admin kubeconfig
    uids: Callable[[], dict[str, str]]  # every object of the peering on both clusters (key -> uid): they stay
    report: Callable[[str], None]  # prints the text of a BENCH line
    ready_timeout: float = 60.0
    secret: str = SECRET

    def run(self) -> None:
        objects = self.uids()
        assert self.env.operator.proc is not None
        pid = self.env.operator.proc.pid
        admin = Path(self.provider.kubeconfig).read_bytes()
        port = int(str(yaml.safe_load(admin)["clusters"][0]["cluster"]["server"]).rsplit(":", 1)[1])
        baseline = procstat.established_to(pid, port)
        assert baseline > 0
        with admin_service_account(self.env.provider_api, f"rotated-{self.namespace}"[:60]) as (user, token):
            for rotation in range(ROTATIONS):
                to_token = rotation % 2 == 0
                self._rotate(rotation, token_kubeconfig(admin, token) if to_token else admin, user, to_token)
                # The old client is closed: its connections go, they do not pile up rotation after rotation.
                wait_for(
                    f"the operator's connections to the provider to settle (rotation {rotation})",
                    lambda: procstat.established_to(pid, port) <= baseline + 1,
                    timeout=30,
                )
            assert self.env.operator.proc.pid == pid and self.env.operator.proc.poll() is None  # never restarted
            assert self.env.peerings.status(self.namespace, self.name)["peerStatus"] == "ready"
            self._broken_then_restored(admin, objects, secrets=[token])

    def _configuration_writes(self, since: datetime) -> list[audit.AuditEvent]:
        """The operator's patches and updates of Configurations on the provider since `since`."""
        return [
            e
            for e in audit.writes(self.provider.audit_log, since=since, user_agent_prefix=OPERATOR_AGENT)
            if e.resource == "configurations" and e.verb in ("patch", "update")
        ]

    def _provoke(self, rotation: int) -> None:
        """Make the operator write on the provider: drop one of its labels from the provider's Configuration,
        and wait until it has put it back."""
        p_ns = tenant_ns(self.env.provider_api, self.env.consumer_id)
        conf = items(self.env.provider_api, "networking.liqo.io", "configurations", p_ns)[0]
        label = next(k for k in conf["metadata"]["labels"] if k.startswith("peering.liqo-operator.io/"))
        custom(self.env.provider_api).patch_namespaced_custom_object(
            "networking.liqo.io", "v1beta1", p_ns, "configurations", conf["metadata"]["name"],
            {"metadata": {"labels": {label: None}}},
        )  # fmt: skip

        def restored() -> bool:
            conf = items(self.env.provider_api, "networking.liqo.io", "configurations", p_ns)[0]
            return label in conf["metadata"]["labels"]

        wait_for(f"the operator to restore label {label} (rotation {rotation})", restored, timeout=30)

    def _rotate(self, rotation: int, kubeconfig: bytes, user: str, to_token: bool) -> None:
        """Put `kubeconfig` in the Secret, then provoke writes until the new identity makes one: from then on
        the old one starts none."""

        def new_identity(username: str) -> bool:
            return (username == user) if to_token else (username != user)

        since = datetime.now().astimezone()
        self.env.peerings.put_kubeconfig_secret(self.namespace, self.secret, kubeconfig)
        # The Secret's change reaches the operator through its watch a moment after the put, so a write
        # provoked at once may rightly still come from the old client.
        for provocation in range(1, 11):  # noqa: B007 - reported after the loop
            started = datetime.now().astimezone()
            self._provoke(rotation)
            if any(new_identity(e.username) for e in self._configuration_writes(started)):
                break
        writes = self._configuration_writes(since)
        seen = [(e.received, e.completed, e.username) for e in writes]
        first = min((e.received for e in writes if new_identity(e.username)), default=None)
        assert first is not None, (rotation, provocation, seen)
        # Once the new identity has written, the old one never starts a write again (one the API server
        # received before may complete after: the log is in order of completion).
        assert all(new_identity(e.username) for e in writes if e.received > first), (rotation, seen)
        self.report(
            f"Secret rotation {rotation}: the new identity wrote on provocation {provocation},"
            f" {(first - since).total_seconds():.1f}s after the put"
        )

    def _broken_then_restored(self, admin: bytes, objects: dict[str, str], secrets: list[str]) -> None:
        """Broken credentials: reported, with no credential in the status, and nothing of the peering is
        touched; the admin kubeconfig put back: Ready again, with the same objects."""
        ns, name = self.namespace, self.name
        started = time.monotonic()
        self.env.peerings.put_kubeconfig_secret(ns, self.secret, token_kubeconfig(admin, BROKEN_TOKEN))
        status = self.env.peerings.wait_status(ns, name, "error", timeout=60)
        detected = time.monotonic() - started
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert ready["reason"] == "ProviderUnauthorized", ready
        client_key = yaml.safe_load(admin)["users"][0]["user"]["client-key-data"]
        shown = json.dumps(status)
        assert not [s for s in (BROKEN_TOKEN, client_key[:40], *secrets) if s in shown], "a credential in the status"
        assert self.uids() == objects, "an object of the peering was re-created or removed"
        restored = time.monotonic()
        self.env.peerings.put_kubeconfig_secret(ns, self.secret, admin)
        self.env.peerings.wait_status(ns, name, "ready", timeout=self.ready_timeout)
        self.report(
            f"Secret with broken credentials -> ProviderUnauthorized: {detected:.1f}s;"
            f" restored -> Ready: {time.monotonic() - restored:.1f}s"
        )
        assert self.uids() == objects, "an object of the peering was re-created or removed"

"""What the GitOps e2e tests (test_flux.py, test_argocd.py) share: the Git server, the repository a user
would commit (examples/gitops/ for the case's namespace), the check that a peering is unpeered on both
sides."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes import client as k8s

from testenv.gitops import example_repo
from testenv.gitserver import GitServer
from testenv.operator_support import PeeringCase, items, tenant_ns

# The Liqo objects of a peering, where they live: none may be left once it is unpeered.
PEERING_OBJECTS = (
    ("consumer", "authentication.liqo.io", "resourceslices"),
    ("consumer", "offloading.liqo.io", "virtualnodes"),
    ("consumer", "authentication.liqo.io", "identities"),
    ("provider", "authentication.liqo.io", "tenants"),
    ("consumer", "networking.liqo.io", "gatewayclients"),
    ("provider", "networking.liqo.io", "gatewayservers"),
    ("consumer", "networking.liqo.io", "configurations"),
    ("provider", "networking.liqo.io", "configurations"),
)


def commit_example(git: GitServer, repo: str, case: PeeringCase, kubeconfig: bytes | None = None) -> str:
    """Commit examples/gitops/ for the case's namespace, with the provider's kubeconfig (or `kubeconfig`)."""
    text = (kubeconfig if kubeconfig is not None else case.env.provider_kubeconfig()).decode()
    return git.write_repo(repo, example_repo(case.namespace, text), message=f"peering for {case.namespace}")


def tenant_namespaces(case: PeeringCase) -> tuple[str, str]:
    env = case.env
    return tenant_ns(env.peerings.api, env.provider_id), tenant_ns(env.provider_api, env.consumer_id)


def peering_objects_left(case: PeeringCase, consumer_ns: str, provider_ns: str) -> list[str]:
    return liqo_objects(case.env.peerings.api, case.env.provider_api, consumer_ns, provider_ns)


def liqo_objects(consumer: k8s.ApiClient, provider: k8s.ApiClient, consumer_ns: str, provider_ns: str) -> list[str]:
    """The Liqo objects of a peering in its tenant namespaces on both sides ("consumer virtualnodes/x")."""
    found = []
    for side, group, plural in PEERING_OBJECTS:
        api, where = (consumer, consumer_ns) if side == "consumer" else (provider, provider_ns)
        found += [f"{side} {plural}/{o['metadata']['name']}" for o in items(api, group, plural, where)]
    return found


@dataclass
class Timeline:
    """What a test saw, polling two things together: (seconds since start, GitOps verdict, peering status)."""

    start: float = field(default_factory=time.monotonic)
    seen: list[tuple[float, str, str]] = field(default_factory=list)

    def observe(self, gitops: str, peering: str) -> None:
        if not self.seen or self.seen[-1][1:] != (gitops, peering):
            self.seen.append((round(time.monotonic() - self.start, 1), gitops, peering))

    def until(
        self, what: str, probe: Callable[[], tuple[str, str]], done: Callable[[str, str], bool], timeout: float
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            gitops, peering = probe()
            self.observe(gitops, peering)
            if done(gitops, peering):
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; seen: {self.seen}")

    def report(self, title: str, second: str = "LiqoPeering") -> None:
        print(f"\n{title}:")
        for at, gitops, peering in self.seen:
            print(f"  {at:6.1f}s  {gitops:<50} {second} {peering}")


def peering_summary(obj: dict[str, Any] | None) -> str:
    if obj is None:
        return "absent"
    status = obj.get("status") or {}
    ready: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    return f"{status.get('peerStatus', '-')}/{ready.get('status', '-')}/{ready.get('reason', '-')}"


def dump(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False)

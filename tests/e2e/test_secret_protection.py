"""Kubeconfig Secret protection under many deletions at once and an operator killed before the release.

LiqoPeerings deleted together (their namespace deleted) each finish their unpeering while the others are
still there: the finalizer kubeconfig-in-use still goes from every Secret, so the namespace's deletion
completes. An operator killed between the last unpeering and the release (an admission webhook refuses the
release until then) finds the finalizer at its next start and removes it (engine/sweep.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from liqo_peering.liqo import naming
from testenv.operator_support import PeeringCase, liqo_objects_left, tenant_ns, wait_for
from testenv.webhook import DenyingWebhook

pytestmark = pytest.mark.standin  # beside main, on a stand-in pair of its own

KEPT = naming.KUBECONFIG_IN_USE
SECRETS = ("provider-kubeconfig", "provider-kubeconfig-2")
HOOK = "secret-finalizers"


def peerings_on_two_secrets(case: PeeringCase, namespace: str, count: int) -> None:
    """A namespace of its own with ``count`` LiqoPeerings of the same provider, using the two Secrets in turn
    (one peers, the others are refused as duplicates: each protects its Secret all the same)."""
    case.peerings.make_namespace(namespace)
    for secret in SECRETS:
        case.peerings.put_kubeconfig_secret(namespace, secret, case.env.provider_kubeconfig())
    for i in range(count):
        spec = {"remoteKubeconfigSecretRef": {"name": SECRETS[i % 2]}, "timeout": "2m"}
        case.peerings.create(namespace, f"peering-{i}", spec)
    wait_for(
        "every LiqoPeering reconciled and both Secrets protected",
        lambda: (
            all(case.peerings.status(namespace, f"peering-{i}").get("peerStatus") for i in range(count))
            and all(KEPT in (case.peerings.secret_finalizers(namespace, secret) or []) for secret in SECRETS)
        ),
        timeout=180,
    )
    case.peerings.wait_status(namespace, "peering-0", "ready", timeout=120)


def namespace_gone(case: PeeringCase, namespace: str, timeout: float = 120) -> None:
    core = case.peerings.core
    wait_for(
        f"namespace {namespace} deleted",
        lambda: not core.list_namespace(field_selector=f"metadata.name={namespace}").items,
        timeout,
    )


def test_ten_peerings_deleted_together_leave_no_finalizer_and_their_namespace_goes(case: PeeringCase) -> None:
    env = case.env
    namespace = f"{case.namespace}-all"[:63]
    peerings_on_two_secrets(case, namespace, 10)
    c_ns, p_ns = tenant_ns(env.peerings.api, env.provider_id), tenant_ns(env.provider_api, env.consumer_id)

    case.peerings.core.delete_namespace(namespace)  # all ten at once, and their Secrets
    namespace_gone(case, namespace)
    assert liqo_objects_left(env, c_ns, p_ns) == []


@pytest.fixture
def frozen_secrets(case: PeeringCase, tmp_path: Path) -> Iterator[DenyingWebhook]:
    """An admission webhook that refuses updates of Secrets (their finalizers' release included) in a
    namespace, once ``freeze`` registers it; its configuration is removed by the test, or afterwards."""
    with DenyingWebhook(tmp_path, code=403, message="[secrets-frozen] Secrets may not change") as hook:
        try:
            yield hook
        finally:
            try:
                k8s.AdmissionregistrationV1Api(case.env.peerings.api).delete_validating_webhook_configuration(HOOK)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def freeze(case: PeeringCase, hook: DenyingWebhook, namespace: str) -> None:
    """Register the webhook for ``namespace``, and wait until the API server calls it (a dry-run update of
    one of its Secrets is refused)."""
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["secrets"]}]
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    config = hook.configuration(HOOK, rules, namespaceSelector=selector)
    k8s.AdmissionregistrationV1Api(case.env.peerings.api).create_validating_webhook_configuration(cast(Any, config))

    def refused() -> bool:
        try:
            case.peerings.core.patch_namespaced_secret(
                SECRETS[0], namespace, {"metadata": {"labels": {"e2e.example/probe": "x"}}}, dry_run="All"
            )
        except ApiException as exc:
            if exc.status == 403:
                return True
            raise
        return False

    wait_for("the webhook to refuse Secret updates", refused, timeout=30)


def test_an_operator_killed_before_the_release_releases_at_its_next_start(
    case: PeeringCase, frozen_secrets: DenyingWebhook
) -> None:
    env = case.env
    namespace = f"{case.namespace}-kill"[:63]
    peerings_on_two_secrets(case, namespace, 3)
    freeze(case, frozen_secrets, namespace)
    case.peerings.core.delete_namespace(namespace)
    # Every unpeering ends and every LiqoPeering goes; the release is refused, so the finalizers stay.
    wait_for("every LiqoPeering gone", lambda: not case.peerings.in_namespace(namespace), timeout=120)
    assert frozen_secrets.reviews >= 2  # the probe, then the release
    assert all(KEPT in (case.peerings.secret_finalizers(namespace, secret) or []) for secret in SECRETS)

    env.operator.kill()  # before it could release them
    k8s.AdmissionregistrationV1Api(env.peerings.api).delete_validating_webhook_configuration(HOOK)
    logged = len(env.operator.log())
    env.operator.start()
    namespace_gone(case, namespace)  # the sweep at start released both Secrets
    assert "released Secrets no LiqoPeering needs" in env.operator.log()[logged:]

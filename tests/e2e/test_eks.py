"""A LiqoPeering with spec.remoteCluster (provider aws): the operator reaches an EKS provider with its own AWS
identity, through EKS Pod Identity, its tokens made by AWS's SDK in the process; no kubeconfig, no credential
in a Secret, no exec plugin.

The consumer is the session's (the chart's rights, the operator as a process with the variables EKS sets in
a Pod with a Pod Identity association). The provider is a light API server whose webhook token authenticator
is aws-iam-authenticator's server, the verifier EKS runs, mapping the operator's role to a Kubernetes user;
Liqo on it is the stand-in, as in test_peeringset.py. AWS is stood in by testenv.aws: STS (SigV4 checked with
the keys it issued) and the Pod Identity agent (the ServiceAccount's token checked by TokenReview).

In order: Ready through the role's token, every write on the provider made by the mapped user; keys revoked
under the live peering, new ones fetched after the provider's 401, Ready still; a peering whose token is
for another cluster refused with ProviderUnauthorized; unpeering leaves nothing. Then, with credentials.mint,
the role mints the least-privilege peering user, the peering runs as it, and unpeering revokes it. Last, the
operator as with IRSA instead (a role on its ServiceAccount, STS's AssumeRoleWithWebIdentity stood in at its
own host name, which the operator's process resolves to the stand-in): Ready as the mapped user; a role whose
trust no longer names the ServiceAccount gives CloudIdentityFailed, and Ready again once it does.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest

from e2e.cloud_common import (
    LIQOPEERING,
    CloudCase,
    create,
    provider_writers,
    ready,
    status,
    tear_down,
    tenant,
    unpeer_leaving_nothing,
)
from e2e.test_peeringset import _start_standins
from liqo_peering.engine import protection
from liqo_peering.liqo import naming
from liqo_peering.liqo import peeringuser as pu
from testenv import chart_rbac
from testenv import kube as k
from testenv.aws import (
    WEB_IDENTITY_AUDIENCE,
    IamAuthenticator,
    PodIdentityAgent,
    Sts,
    WebIdentitySts,
    irsa_environment,
    pod_identity_token,
    sdk_environment,
)
from testenv.kube import Kube
from testenv.leakscan import LeakScan
from testenv.lightk8s import install_liqo_on_providers, render_provider_chart, start_light_providers
from testenv.localk8s import tool_path
from testenv.operator_support import OperatorEnv, OperatorProcess, wait_for
from testenv.spawned import Spawned

pytestmark = pytest.mark.standin  # stops the session's operator for its own, with AWS's variables

NS = "e2e-eks"
CLUSTER = "edge"  # the EKS cluster's name: aws-iam-authenticator's cluster ID
ROLE = "arn:aws:iam::111122223333:role/liqo-peering-operator"
MAPPED_USER = "liqo-peering-operator"  # the Kubernetes user the role maps to on the provider


@dataclass
class Eks(CloudCase):
    namespace: ClassVar[str] = NS
    sts: Sts
    agent: PodIdentityAgent
    operator: OperatorProcess
    chart: chart_rbac.ChartRelease
    work: Path
    leak_scan: LeakScan

    def spec(self, cluster: str = CLUSTER) -> dict[str, Any]:
        ca = base64.b64encode(self.provider.pki.ca_cert.read_bytes()).decode()
        return {
            "remoteCluster": {
                "provider": "aws",
                "cluster": f"arn:aws:eks:us-east-1:111122223333:cluster/{cluster}",
                "address": self.provider.server,
                "certificateAuthorityData": ca,
            },
            "timeout": "2m",
        }


@pytest.fixture(scope="module")
def eks(operator_env: OperatorEnv, tmp_path_factory: pytest.TempPathFactory, leak_scan: LeakScan) -> Iterator[Eks]:
    work = tmp_path_factory.mktemp("eks")
    consumer = Kube.from_kubeconfig(str(operator_env.lc["consumer"].kubeconfig))
    chart = chart_rbac.ChartRelease(
        Path(operator_env.lc["consumer"].kubeconfig), chart_rbac.RELEASE, chart_rbac.NAMESPACE
    )
    account = f"{chart_rbac.NAMESPACE}/{chart.service_account()}"
    sts = Sts(work / "sts")
    agent = PodIdentityAgent(sts, consumer, {account: ROLE})
    authenticator = IamAuthenticator(
        tool_path("aws-iam-authenticator"),
        work / "aws-iam-authenticator",
        CLUSTER,
        sts,
        [{"rolearn": ROLE, "username": MAPPED_USER, "groups": ["system:masters"]}],
    )
    standins: Spawned | None = None
    case: Eks | None = None
    stood_down = False
    authenticator.start()
    webhook = [
        f"--authentication-token-webhook-config-file={authenticator.webhook_kubeconfig}",
        # The API server keeps the webhook's verdict on a token for 2 minutes by default, and any token's for
        # 10 s more: here a revoked key is refused after those 10 s.
        "--authentication-token-webhook-cache-ttl=1s",
    ]
    providers = start_light_providers(1, work / "providers", garbage_collector=True, extra_flags=webhook)
    (provider,) = providers.clusters
    try:
        ids = {provider.name: "eks-edge-id"}
        install_liqo_on_providers(providers.clusters, ids, render_provider_chart())
        standins = _start_standins(operator_env, providers, ids, work)
        consumer.apply(k.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, "e2e")
        token = pod_identity_token(consumer, chart_rbac.NAMESPACE, chart.service_account(), work / "eks-token")
        operator_env.operator.stop()  # one operator at a time on the consumer
        stood_down = True
        operator = chart.operator(work, env=sdk_environment(agent, token)).start()
        leak_scan.add_log(operator.log_path)
        provider_kube = Kube(provider.api_client())
        case = Eks(
            operator_env,
            consumer,
            provider,
            provider_kube,
            ids[provider.name],
            sts,
            agent,
            operator,
            chart,
            work,
            leak_scan,
        )
        yield case
    finally:
        tear_down(
            NS,
            consumer,
            leak_scan,
            {"consumer": operator_env.peerings.api, provider.name: provider.api_client()},
            [
                case.operator.stop if case is not None else None,
                providers.stop,
                authenticator.stop,
                agent.stop,
                sts.stop,
            ],
            standins,
            "eks",
            operator_env.operator.start if stood_down else None,
        )


def test_a_peering_through_the_operators_aws_identity(eks: Eks) -> None:
    started = datetime.now(UTC)
    create(eks, "edge", eks.spec())
    found = wait_for("the peering through EKS Pod Identity to be Ready", lambda: ready(eks, "edge"), timeout=120)
    assert found["remoteClusterID"] == eks.provider_id
    # Every write on the provider came from the role's mapped user; STS vouched for the role, nothing else.
    assert provider_writers(eks, started) == {MAPPED_USER}
    assert eks.sts.answered and all("assumed-role/liqo-peering-operator/" in arn for arn in eks.sts.answered)
    # No credential is kept anywhere on the consumer: no Secret in the peering's namespace.
    assert eks.consumer.list(k.SECRET, NS) == []


def label_taken_off(eks: Eks, ns: str) -> str | None:
    """A write the operator must make on the provider, asked for: a label of its own taken off the Configuration
    (None: none is there to take off, the last one is not back yet)."""
    (conf,) = eks.provider_kube.list(k.CONFIGURATION, ns)
    label = next((key for key in conf["metadata"]["labels"] if key.startswith("peering.liqo-operator.io/")), None)
    if label is not None:
        patch = {"metadata": {"labels": {label: None}}}
        eks.provider_kube.patch(k.CONFIGURATION, conf["metadata"]["name"], patch, ns)
    return label


def rewritten(eks: Eks, ns: str) -> None:
    """A write the operator must make on the provider, made: a label of its own taken off the Configuration."""
    label = label_taken_off(eks, ns)
    assert label is not None

    def restored() -> bool:
        (conf,) = eks.provider_kube.list(k.CONFIGURATION, ns)
        return label in conf["metadata"]["labels"]

    wait_for(f"the operator to put label {label} back", restored, timeout=90)


def test_revoked_keys_are_replaced_under_the_live_peering(eks: Eks) -> None:
    handed = len(eks.agent.handed_out)
    for creds in list(eks.agent.handed_out):
        eks.sts.revoke(creds.access_key_id)
    revoked = datetime.now(UTC)
    ns = tenant(eks)
    assert ns is not None

    def provoke() -> bool:
        """A write the operator must make on the provider, done: once the API server no longer takes the old
        token (its cache of verdicts), that write is refused (401), and the operator makes a token with new keys."""
        rewritten(eks, ns)
        return len(eks.agent.handed_out) > handed

    wait_for("the operator to write with new keys after the old ones were refused", provoke, timeout=120, interval=2)
    assert any("unknown or revoked access key" in why for why in eks.sts.refused)
    assert provider_writers(eks, revoked) == {MAPPED_USER}
    wait_for("the peering to be Ready", lambda: ready(eks, "edge"), timeout=60)


def test_a_token_for_another_cluster_is_refused(eks: Eks) -> None:
    create(eks, "elsewhere", eks.spec(cluster="another-cluster"))

    def refused() -> dict[str, Any] | None:
        cond: dict[str, Any] = next(
            (c for c in status(eks, "elsewhere").get("conditions") or [] if c["type"] == "Ready"), {}
        )
        return cond if cond.get("reason") == "ProviderUnauthorized" else None

    cond = wait_for("the peering to report ProviderUnauthorized", refused, timeout=90)
    assert "signature does not match" in eks.sts.refused[-1]
    assert "k8s-aws-v1." not in cond["message"]  # the token is never shown
    eks.consumer.delete(LIQOPEERING, "elsewhere", NS)
    wait_for("elsewhere to go", lambda: eks.consumer.get(LIQOPEERING, "elsewhere", NS) is None, timeout=90)


def test_unpeering_leaves_nothing(eks: Eks) -> None:
    unpeer_leaving_nothing(eks, "edge")


def minted_objects(eks: Eks) -> list[str]:
    """What minting made on the provider for this consumer (its RBAC and CSRs)."""
    selector = f"{pu.USER_LABEL}={pu.user_name(eks.env.consumer_id)}"
    kinds = (k.ROLEBINDING, k.CLUSTERROLEBINDING, k.CLUSTERROLE, k.CSR)
    return [
        f"{res.plural}/{o['metadata']['name']}" for res in kinds for o in eks.provider_kube.list(res, None, selector)
    ]


def test_with_mint_the_role_only_mints_the_least_privilege_user(eks: Eks) -> None:
    """credentials.mint: the role mints Liqo's peering user (a client certificate the provider signs) and the
    peering then runs as that user; unpeering revokes it. The provider here signs client certificates. The
    endpoint and CA come from a Secret (remoteCluster.secretRef), kept while the peering needs it."""
    ca = eks.provider.pki.ca_cert.read_bytes()
    endpoint = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "edge-endpoint"}}
    endpoint["data"] = {
        "address": base64.b64encode(eks.provider.server.encode()).decode(),
        "ca.crt": base64.b64encode(ca).decode(),
    }
    eks.consumer.create(k.SECRET, endpoint, NS)
    spec = eks.spec()
    spec["remoteCluster"] = {key: spec["remoteCluster"][key] for key in ("provider", "cluster")}
    spec["remoteCluster"]["secretRef"] = {"name": "edge-endpoint"}
    create(eks, "minted", {**spec, "credentials": {"mint": True}})
    found = wait_for("the minted peering to be Ready", lambda: ready(eks, "minted"), timeout=180)
    cond = next(c for c in found["conditions"] if c["type"] == "CredentialsMinted")
    assert cond["status"] == "True" and cond["reason"] == "Minted", cond
    assert "cloud identity minted it" in cond["message"], cond
    user = found["credentials"]["user"]
    # The minted kubeconfig is the only credential on the consumer; the role's is in no Secret.
    secrets = {s["metadata"]["name"]: s for s in eks.consumer.list(k.SECRET, NS)}
    assert sorted(secrets) == sorted(["edge-endpoint", naming.minted_secret("minted")])
    assert protection.FINALIZER in secrets["edge-endpoint"]["metadata"].get("finalizers", [])
    since = datetime.now(UTC)
    ns = tenant(eks)
    assert ns is not None
    rewritten(eks, ns)
    assert provider_writers(eks, since) == {user}

    eks.consumer.delete(LIQOPEERING, "minted", NS)
    wait_for("minted to go", lambda: eks.consumer.get(LIQOPEERING, "minted", NS) is None, timeout=120)
    wait_for("the minted user revoked on the provider", lambda: minted_objects(eks) == [], timeout=60)
    (left,) = eks.consumer.list(k.SECRET, NS)
    assert left["metadata"]["name"] == "edge-endpoint" and not left["metadata"].get("finalizers"), left


def test_with_irsa_a_peering_through_the_roles_web_identity(eks: Eks) -> None:
    """IRSA: the SDK exchanges the ServiceAccount's projected token (audience sts.amazonaws.com) for the role's
    keys at STS's AssumeRoleWithWebIdentity; no Pod Identity agent is there to ask. A role whose trust no longer
    names the ServiceAccount gives CloudIdentityFailed once new keys are needed; trusted again, Ready again."""
    work = eks.work / "irsa"
    account = eks.chart.service_account()
    subject = f"system:serviceaccount:{chart_rbac.NAMESPACE}:{account}"
    token = pod_identity_token(
        eks.consumer, chart_rbac.NAMESPACE, account, eks.work / "irsa-token", audience=WEB_IDENTITY_AUDIENCE
    )
    web = WebIdentitySts(eks.sts, eks.consumer, {ROLE: subject})
    try:
        eks.operator.stop()
        handed = len(eks.agent.handed_out)
        eks.operator = eks.chart.operator(work, env=irsa_environment(ROLE, token), prefix=web.world_of(work)).start()
        eks.leak_scan.add_log(eks.operator.log_path)
        started = datetime.now(UTC)
        create(eks, "irsa", eks.spec())
        wait_for("the peering through IRSA to be Ready", lambda: ready(eks, "irsa"), timeout=120)
        assert provider_writers(eks, started) == {MAPPED_USER}
        assert web.handed_out and len(eks.agent.handed_out) == handed  # STS's keys, not the agent's
        assert eks.sts.answered[-1].startswith(ROLE.replace(":iam:", ":sts:").replace(":role/", ":assumed-role/"))

        web.trust[ROLE] = "system:serviceaccount:elsewhere:someone"
        for creds in list(web.handed_out):
            eks.sts.revoke(creds.access_key_id)
        ns = tenant(eks)
        assert ns is not None

        def failed() -> dict[str, Any] | None:
            # Writes that need a token the provider takes: once it no longer takes the old one (its cache of
            # verdicts), a write is refused (401) and the operator asks STS for new keys.
            label_taken_off(eks, ns)
            cond: dict[str, Any] = next(
                (c for c in status(eks, "irsa").get("conditions") or [] if c["type"] == "Ready"), {}
            )
            return cond if cond.get("reason") == "CloudIdentityFailed" else None

        cond = wait_for("the peering to report CloudIdentityFailed", failed, timeout=120, interval=2)
        assert "IRSA" in cond["message"], cond
        assert any("does not trust" in why for why in web.refused), web.refused
        web.trust[ROLE] = subject
        wait_for("the peering to be Ready again once the role trusts it", lambda: ready(eks, "irsa"), timeout=120)
        unpeer_leaving_nothing(eks, "irsa")
    finally:
        web.trust[ROLE] = subject
        if eks.consumer.get(LIQOPEERING, "irsa", NS) is not None:  # the test stopped half way: unpeer while STS answers
            eks.consumer.delete(LIQOPEERING, "irsa", NS)
            with contextlib.suppress(AssertionError):
                wait_for("irsa to go", lambda: eks.consumer.get(LIQOPEERING, "irsa", NS) is None, timeout=90)
        for creds in web.handed_out:
            eks.leak_scan.needles[creds.secret_access_key] = "an AWS secret access key from STS"
        eks.leak_scan.needles[token.read_text()] = "the ServiceAccount's projected token"
        web.stop()

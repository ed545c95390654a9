"""Stage 2: authentication (liqoctl authenticate), one non-blocking pass.

"Consumer" and "provider" below are the run's direction (its consumer and provider); in the reverse direction of a
bidirectional peering they are the provider and the consumer clusters, and the messages name the clusters
by their ``side``.
"""

from __future__ import annotations

import dataclasses

from liqo_peering.api.model import ApiServerSpec
from liqo_peering.engine import renewal
from liqo_peering.engine.direction import PeeringRun
from liqo_peering.errors import LiqoNotReady
from liqo_peering.fields import mapping_at, text_at
from liqo_peering.liqo import authentication as auth
from liqo_peering.liqo import certificates, naming
from liqo_peering.liqo import networking as net
from liqo_peering.liqo import resources as r
from liqo_peering.stages import StageResult

STAGE = "authentication"


def reconcile_in_band(p: PeeringRun, proxy_url: str | None, api_server: ApiServerSpec | None = None) -> StageResult:
    """In-band: the provider's API server is reached through the tunnel, via spec.authentication.proxyURL
    or, as liqoctl does, Liqo's API server proxy at its IP on the provider as remapped on the consumer."""
    if proxy_url:
        return reconcile(p, proxy_url, api_server)
    ctx = p.ctx
    ip = p.provider.get(r.IP, naming.API_SERVER_PROXY_IP, ctx.provider.liqo_namespace)
    address = text_at(ip, "status", "ip")
    conf = p.consumer.get(r.CONFIGURATION, ctx.provider.cluster_id, ctx.consumer_tenant_ns)
    if not address or conf is None:
        return StageResult.waiting(
            STAGE,
            "WaitingForProxyAddress",
            f"in-band: waiting for Liqo's IPAM on the {p.provider.side} to give IP {ctx.provider.liqo_namespace}/"
            f"{naming.API_SERVER_PROXY_IP} an address"
            + ("" if p.reverse else " (or set spec.authentication.proxyURL)"),
        )
    return reconcile(p, net.in_band_proxy_url(conf, address), api_server)


def reconcile(p: PeeringRun, proxy_url: str | None, api_server: ApiServerSpec | None = None) -> StageResult:
    ctx = p.ctx
    # 1. The provider's nonce: an empty Secret that Liqo fills.
    nonce_secret, _ = p.provider.create_or_relabel(r.SECRET, auth.nonce_secret(ctx), ctx.owner)
    nonce = auth.secret_field(nonce_secret, naming.NONCE_FIELD)
    if not nonce:
        return StageResult.waiting(
            STAGE, "WaitingForNonce", f"waiting for Liqo on the {p.provider.side} to create the nonce"
        )

    # 2. The consumer signs it: a Secret carrying the nonce that Liqo fills with the signature.
    signed_secret, _ = p.consumer.create_or_relabel(r.SECRET, auth.signed_nonce_secret(ctx, nonce), ctx.owner)
    if auth.secret_field(signed_secret, naming.NONCE_FIELD) != nonce:
        # A stale challenge (the provider's nonce changed): start it again.
        p.consumer.delete(r.SECRET, naming.SIGNED_NONCE_SECRET, ctx.consumer_tenant_ns)
        return StageResult.waiting(
            STAGE, "WaitingForSignedNonce", f"the {p.provider.side}'s nonce changed: signing it again"
        )
    signature = auth.secret_field(signed_secret, naming.SIGNED_NONCE_FIELD)
    if not signature:
        return StageResult.waiting(
            STAGE, "WaitingForSignedNonce", f"waiting for Liqo on the {p.consumer.side} to sign the nonce"
        )

    # 3. The Tenant on the provider. Created once and never rewritten: an existing one (ours or liqoctl's)
    # already carries a CSR Liqo has signed.
    tenant = p.provider.get(r.TENANT, ctx.consumer.cluster_id, ctx.provider_tenant_ns)
    if tenant is None:
        keys = p.consumer.get(r.SECRET, naming.AUTH_KEYS_SECRET, ctx.consumer.liqo_namespace)
        if keys is None:
            raise LiqoNotReady(
                f"Secret {ctx.consumer.liqo_namespace}/{naming.AUTH_KEYS_SECRET} is missing on the {p.consumer.side}"
                f" cluster: Liqo's controller manager creates it at start-up; check that Liqo runs there"
            )
        private_key, public_der = auth.load_cluster_keys(keys)
        csr = auth.control_plane_csr(private_key, ctx.consumer.cluster_id)
        tenant, _ = p.provider.create_if_absent(r.TENANT, auth.tenant(ctx, public_der, csr, signature, proxy_url))
    elif not auth.has_labels(tenant, ctx.owner):
        # Adopted (liqoctl's): label it as this peering's, so teardown finds it; its spec stays as it is.
        p.provider.merge_patch(
            r.TENANT, ctx.consumer.cluster_id, ctx.provider_tenant_ns, {"metadata": {"labels": ctx.owner}}
        )
    else:
        # Ours: only its common labels and annotations follow the spec (its spec stays as it is).
        tenant = p.provider.relabel(r.TENANT, tenant, auth.tenant_metadata(ctx), ctx.owner)
    if not auth.tenant_ready(tenant):
        return StageResult.waiting(
            STAGE,
            "WaitingForTenant",
            f"waiting for Liqo on the {p.provider.side} to accept the Tenant and issue credentials",
        )

    # 4. The ControlPlane Identity on the consumer, from the Tenant's status.
    identity = p.consumer.ensure(r.IDENTITY, auth.identity(ctx, tenant["status"], api_server))
    cert = certificates.of_auth_params(mapping_at(identity, "spec", "authParams"), p.consumer.side)
    renewal.reissue_if_due(p, cert)
    identity = renewal.restart_if_renewed(p, cert, identity, r.IDENTITY)
    if not auth.identity_ready(identity):
        result = StageResult.waiting(
            STAGE,
            "WaitingForIdentity",
            f"waiting for Liqo on the {p.consumer.side} to build the {p.provider.side}'s kubeconfig",
        )
    else:
        result = StageResult.ready(
            STAGE, f"the {p.consumer.side} holds a ControlPlane identity on the {p.provider.side}"
        )
    return dataclasses.replace(result, certificates=(cert,) if cert else ())

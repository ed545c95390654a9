"""Renewing an identity's certificate where the provider's Liqo does not (v1.0, v1.1).

Those providers answer a renewal with the certificate they stored when they first issued it (the Secret
liqo-remote-certificate of their tenant namespace, "-<slice>" for a ResourceSlice's), so a peering breaks at its
certificate's expiry. Once a certificate is due (two thirds into its lifetime, where Liqo's renewer asks), the
operator takes the path of the first peering again: the stored certificate goes, and a change of the Tenant
wakes Liqo's tenant and ResourceSlice controllers, which find none and have the CSR signed anew. The new
certificate reaches the consumer as the first one did: the Tenant's status (copied into the Identity by the
authentication stage), or the ResourceSlice's (Liqo replicates it back).

Those consumers' controller manager (its check of the provider's API server) and virtual kubelet read an
identity's kubeconfig only when they start. With --restart-liqo-on-renewal, once Liqo has written the new
certificate into the kubeconfig Secret, the operator deletes their Pods (their Deployments start them again):
the controller manager's for a ControlPlane certificate, the slice's virtual kubelet's for a ResourceSlice one.
The serial they were started with is kept on the peering's own Identity or ResourceSlice.

Both directions take the same steps on their own run: in the reverse one of a bidirectional peering the stored
certificate and the Tenant are on this cluster (the chart lets the operator delete only those Secrets, in tenant
namespaces), and what restarts runs on the provider cluster.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import structlog

from liqo_peering.engine.direction import PeeringRun
from liqo_peering.fields import mapping_at
from liqo_peering.liqo import certificates as certs
from liqo_peering.liqo import offloading
from liqo_peering.liqo import resources as r
from liqo_peering.liqo.peeringuser import CONTROLLER_MANAGER_SELECTOR
from liqo_peering.stages import IdentityCertificate
from liqo_peering.status.conditions import format_time

log = structlog.get_logger("liqo_peering")


def reissue_if_due(p: PeeringRun, cert: IdentityCertificate | None, now: datetime | None = None) -> bool:
    """Have the provider issue ``cert``'s identity a new certificate once it is due and the provider's Liqo
    would not; whether it asked in this pass. Idempotent: a pass killed half-way does the rest next time."""
    ctx = p.ctx
    if cert is None or not certs.renewal_broken(ctx.provider.liqo_version):
        return False
    if (now or datetime.now(UTC)) < cert.renew_at:
        return False
    tenant = p.provider.get(r.TENANT, ctx.consumer.cluster_id, ctx.provider_tenant_ns)
    if tenant is None:
        return False
    ns, name = ctx.provider_tenant_ns, certs.stored_certificate_secret(cert.resource_slice)
    stored = p.provider.get(r.SECRET, name, ns)
    deleted = False
    if stored is not None and certs.serial_of_stored(stored) == cert.serial:
        p.provider.delete(r.SECRET, name, ns)
        deleted = True
    asked = str(mapping_at(tenant, "metadata", "annotations").get(certs.REISSUE_ANNOTATION) or "").split(",")
    if cert.serial in asked:
        return deleted
    # Only the annotation: the rest of the Tenant is Liqo's (or liqoctl's), as the authentication stage leaves it.
    # It names the last few certificates asked for, so that the ControlPlane's and a slice's, due together, do
    # not take turns.
    value = ",".join([*(a for a in asked if a), cert.serial][-certs.REISSUES_KEPT :])
    patch = {"metadata": {"annotations": {certs.REISSUE_ANNOTATION: value}}}
    p.provider.merge_patch(r.TENANT, ctx.consumer.cluster_id, ns, patch)
    log.info(
        "certificate due for renewal: the provider's Liqo issues a new one",
        held_by=cert.held_by,
        identity=cert.identity_type,
        resource_slice=cert.resource_slice,
        not_after=cert.not_after.isoformat(),
    )
    return True


def restart_if_renewed(
    p: PeeringRun, cert: IdentityCertificate | None, holder: dict[str, Any], res: r.Resource
) -> dict[str, Any]:
    """With --restart-liqo-on-renewal, on a consumer whose Liqo reads the identity once: restart what read the
    previous certificate, once Liqo has written ``cert`` into the kubeconfig Secret. ``holder``: the peering's
    Identity (ControlPlane) or ResourceSlice, of kind ``res``, which keeps the serial they were started with;
    returned as it is after this (annotated when anything was noted)."""
    ctx = p.ctx
    if cert is None or not p.restart_liqo or not certs.loads_identity_once(ctx.consumer.liqo_version):
        return holder
    meta = holder.get("metadata") or {}
    loaded = mapping_at(holder, "metadata", "annotations").get(certs.LOADED_ANNOTATION)
    if loaded == cert.serial:
        return holder
    ns = ctx.consumer_tenant_ns
    restarted = False
    if loaded is not None:  # None: the first certificate, which they were started with
        secret = p.consumer.get(r.SECRET, certs.kubeconfig_secret(cert.resource_slice, ctx.provider.cluster_id), ns)
        if certs.serial_of_kubeconfig(secret) != cert.serial:
            return holder  # Liqo has not written it yet: the Secret's change wakes the peering
        for namespace, selector in _loaders(p, cert):
            for pod in p.consumer.find(r.POD, namespace, labels=selector):
                if not pod["metadata"].get("deletionTimestamp"):
                    p.consumer.delete(r.POD, pod["metadata"]["name"], namespace)
                    restarted = True
        if restarted:
            log.info(
                "restarted what reads the identity once: it holds a new certificate",
                held_by=cert.held_by,
                identity=cert.identity_type,
                resource_slice=cert.resource_slice,
            )
    annotations = {certs.LOADED_ANNOTATION: cert.serial}
    if restarted and cert.resource_slice is not None:
        annotations[certs.RESTARTED_ANNOTATION] = format_time(datetime.now(UTC))
    return p.consumer.merge_patch(res, meta["name"], ns, {"metadata": {"annotations": annotations}}) or holder


def _loaders(p: PeeringRun, cert: IdentityCertificate) -> list[tuple[str, str]]:
    """(namespace, Pod selector) of what read the identity once."""
    ctx = p.ctx
    if cert.resource_slice is None:
        return [(ctx.consumer.liqo_namespace, CONTROLLER_MANAGER_SELECTOR)]
    return [(ctx.consumer_tenant_ns, offloading.virtual_kubelet_selector(ctx.provider.cluster_id, cert.resource_slice))]

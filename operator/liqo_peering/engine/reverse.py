"""The reverse direction of a bidirectional peering (spec.bidirectional): the provider consumes this
cluster's resources too.

Liqo makes a bidirectional peering out of two peerings, one per direction, over one network: `liqoctl peer`
run from the other cluster finds the gateways in place and keeps them (pkg/liqoctl/network/handler.go,
RunConnect: "reverse networking already established"). So the reverse direction has no networking stage.
Its authentication and offloading are the forward stages' own code on a run with the clusters swapped
(``run_of``): the nonce and the Tenant on the consumer cluster, the signed nonce, the Identity, the
ResourceSlice and the VirtualNode on the provider cluster. Unpeering it keeps the network, which the
forward direction uses (teardown.run with ``reverse=True``).
"""

from __future__ import annotations

import dataclasses

from liqo_peering.engine import authentication, offloading, teardown
from liqo_peering.engine.direction import PeeringRun
from liqo_peering.errors import ApiError, PeeringError
from liqo_peering.health import TrackedPool
from liqo_peering.stages import REVERSE_OF, REVERSE_STAGES, StageResult


def run_of(p: PeeringRun) -> PeeringRun:
    """The reverse direction's run: the provider cluster is its consumer, this cluster its provider."""
    return PeeringRun(
        p.spec,
        consumer=p.provider,
        provider=p.consumer,
        ctx=p.ctx.reversed(),
        reverse=True,
        restart_liqo=p.restart_liqo,
    )


def _renamed(result: StageResult) -> StageResult:
    return dataclasses.replace(result, stage=REVERSE_OF[result.stage])


def _explained(rev: PeeringRun, exc: PeeringError) -> PeeringError:
    """An answer met in the reverse direction says so: a right the provider's kubeconfig lacks then names
    what the reverse direction needs (errors.REVERSE_FIX), not Liqo's peering-user."""
    if not isinstance(exc, ApiError):
        return exc
    return exc.in_reverse(rev.ctx.consumer.liqo_namespace)  # the reverse run's consumer: the provider


def authenticate(rev: PeeringRun, in_band: bool) -> StageResult:
    """The reverse direction's authentication. In-band, as the forward one: through the tunnel, to Liqo's API
    server proxy on this cluster (spec.authentication.proxyURL names a proxy to the provider: not used here)."""
    try:
        if in_band:
            return _renamed(authentication.reconcile_in_band(rev, None))
        return _renamed(authentication.reconcile(rev, None))
    except PeeringError as exc:
        raise _explained(rev, exc) from None


def offload(rev: PeeringRun) -> StageResult:
    """The reverse direction's ResourceSlice (spec.reverse.offloading) and virtual node, on the provider."""
    try:
        return _renamed(offloading.reconcile(rev))
    except PeeringError as exc:
        raise _explained(rev, exc) from None


def removal(left: list[str]) -> dict[str, StageResult]:
    """What the reverse stages report while spec.bidirectional is false: still being removed, or gone."""
    if not left:
        return {s: StageResult.disabled(s, "the reverse direction is off") for s in REVERSE_STAGES}
    message = f"spec.bidirectional is false: removing the reverse direction, waiting for {', '.join(left)} to go"
    return {s: StageResult.waiting(s, "Unpeering", message) for s in REVERSE_STAGES}


def remove(p: PeeringRun, calls: TrackedPool | None = None) -> dict[str, StageResult]:
    """Unpeer the reverse direction only (spec.bidirectional turned off): the forward one keeps the network.
    ``calls``: the pool of sub-calls its reads go to side by side."""
    left = teardown.run(p.consumer, p.provider, p.ctx, bidirectional=True, local_only=False, reverse=True, calls=calls)
    return removal(left)

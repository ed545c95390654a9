"""The operator SIGKILLed at every step, against the Liqo stand-in: each kill
point of testenv.killpoints. The peering must complete (or the unpeering finish), and on each cluster the
count of objects per kind must change exactly as in a run with no kill: nothing missing, duplicated or left
over.
"""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from testenv.killpoints import POINTS, Counts, Cycle
from testenv.operator_support import SECRET, PeeringCase

pytestmark = pytest.mark.standin  # beside main, on a stand-in pair of its own

# Six kills against the stand-in, each about 8 s of the suite: one per stage's first object and end, and
# one in teardown. The GatewayServer and the Tenant's deletion are steps of the same stages, left out to
# keep the suite short.
_no_kill: dict[str, tuple[Counts, Counts]] = {}


def _cycle(case: PeeringCase) -> Cycle:
    apis: dict[str, k8s.ApiClient] = {"consumer": case.peerings.api, "provider": case.env.provider_api}
    return Cycle(case.env, case.namespace, apis, {"remoteKubeconfigSecretRef": {"name": SECRET}, "timeout": "2m"})


@pytest.mark.parametrize("where", list(POINTS))
def test_killed_at(case: PeeringCase, where: str) -> None:
    """Killed at `where`, restarted: the peering completes, and unpeers, with nothing duplicated or left.
    (A short name: the case's namespace is made from it, parameter included, cut at 50 characters.)"""
    cycle = _cycle(case)
    cycle.run(POINTS[where], cycle.reference(_no_kill))

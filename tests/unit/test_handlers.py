"""The delete handlers: the runner's teardown outcome, and nothing else, decides what kopf is told (retry soon
while something is left, after TEARDOWN_RETRY_SECONDS with the status's message on a failure)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import kopf
import pytest

from liqo_peering import handlers
from liqo_peering.engine.runner import ObjectKey
from liqo_peering.engine.unpeering import Teardown

BODY = {"metadata": {"namespace": "ns", "name": "p"}}


class Runner:
    def __init__(self, outcome: Teardown) -> None:
        self.outcome = outcome
        self.unpeered: list[ObjectKey] = []

    async def unpeer(self, key: ObjectKey, body: dict[str, Any]) -> Teardown:
        self.unpeered.append(key)
        return self.outcome


def delete(handler: Any, outcome: Teardown) -> list[ObjectKey]:
    runner = Runner(outcome)
    asyncio.run(handler(body=kopf.Body(cast(Any, BODY)), namespace="ns", name="p", memo=kopf.Memo(runner=runner)))
    return runner.unpeered


@pytest.mark.parametrize(
    ("handler", "kind"), [(handlers.unpeer, "LiqoPeering"), (handlers.set_deleted, "LiqoPeeringSet")]
)
def test_a_deletion_that_leaves_nothing_ends(handler: Any, kind: str) -> None:
    assert delete(handler, Teardown()) == [ObjectKey(kind, "ns", "p")]


@pytest.mark.parametrize("handler", [handlers.unpeer, handlers.set_deleted])
def test_a_failed_teardown_is_retried_with_the_message_its_status_says(handler: Any) -> None:
    with pytest.raises(kopf.TemporaryError) as raised:
        delete(handler, Teardown(failure="cannot unpeer: the provider is unreachable"))
    assert str(raised.value) == "cannot unpeer: the provider is unreachable"
    assert raised.value.delay == handlers.TEARDOWN_RETRY_SECONDS


def test_what_is_left_is_waited_for_soon() -> None:
    with pytest.raises(kopf.TemporaryError) as raised:
        delete(handlers.unpeer, Teardown(("ResourceSlice t/p", "Tenant t/c")))
    assert str(raised.value) == "unpeering: waiting for ResourceSlice t/p, Tenant t/c to go"
    assert raised.value.delay == 1
    with pytest.raises(kopf.TemporaryError) as raised:
        delete(handlers.set_deleted, Teardown(tuple(f"edge-{i}" for i in range(7))))
    assert str(raised.value) == "waiting for LiqoPeerings edge-0, edge-1, edge-2, edge-3, edge-4"

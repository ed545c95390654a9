"""The loop of one object's daemon, which both runners run (controller-runtime's worker for one key): a pass,
then wait for an event or the delay the pass asked for, backing off while passes fail, until the object is
gone or the operator stops. The object's lock and what a pass does are the runner's."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from liqo_peering.errors import PeeringError


class PassOutcome(Protocol):
    @property
    def gone(self) -> bool: ...

    @property
    def transient_error(self) -> bool: ...


OutcomeT = TypeVar("OutcomeT", bound=PassOutcome)


async def keep_reconciling(
    one_pass: Callable[[], Awaitable[OutcomeT]],
    delay: Callable[[OutcomeT, int], float],
    trigger: asyncio.Event,
    stopped: Any,
    log: Any,
    who: dict[str, str],
    debounce: float,
    before_pass: Callable[[], None] | None = None,
    after_wait: Callable[[int], None] | None = None,
    restart_backoff: Callable[[], bool] | None = None,
) -> None:
    """``delay(outcome, failures)``: how long to wait for an event after a pass. ``who``: the log fields that
    name the object. ``after_wait(failures)``: once woken (and debounced), before the next pass.
    ``restart_backoff()``: once woken, whether what woke it is a new situation that the failures so far say
    nothing about (a provider back up): the backoff then starts over, so that the first pass failing in
    it (an API server just back still initialising its caches answers 429) is retried soon, not after the
    longest delay the outage built up."""
    failures = 0
    while not stopped:
        trigger.clear()
        if before_pass is not None:
            before_pass()
        try:
            outcome = await one_pass()
        except PeeringError as exc:  # the operator's own API server is unavailable (own_cluster_unavailable)
            failures += 1
            log.warning("pass put off: " + exc.message, reason=exc.reason, **who)
            await wait(trigger, stopped, min(2.0**failures, 30.0))
            continue
        except Exception:
            failures += 1
            log.exception("reconcile crashed; retrying", **who)
            await wait(trigger, stopped, min(2.0**failures, 60.0))
            continue
        if outcome.gone:
            return
        failures = failures + 1 if outcome.transient_error else 0
        await wait(trigger, stopped, delay(outcome, failures))
        await asyncio.sleep(debounce)  # events come in bursts (one write, several objects): one pass for them
        if after_wait is not None:
            after_wait(failures)
        if restart_backoff is not None and restart_backoff():
            failures = 0


async def wait(trigger: asyncio.Event, stopped: Any, timeout: float) -> None:
    """Until the trigger is set, the operator stops, or ``timeout`` seconds."""
    waiter = asyncio.ensure_future(trigger.wait())
    stopper = asyncio.ensure_future(stopped.wait())
    try:
        await asyncio.wait({waiter, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        stopper.cancel()

"""handlers.configure: kopf's settings as the operator runs with them."""

from __future__ import annotations

import asyncio

import kopf

from liqo_peering.handlers import configure


def test_kopf_posts_no_events_of_its_own() -> None:
    """A normal wait of an unpeering raises kopf.TemporaryError, which kopf would post as an Error Event
    (reason Logging): the operator's own Events are the only ones a user sees."""
    settings = kopf.OperatorSettings()

    async def run() -> None:
        await configure(settings=settings, memo=kopf.Memo())

    asyncio.run(run())
    assert settings.posting.enabled is False

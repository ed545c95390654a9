"""handlers.configure: kopf's settings as the operator runs with them."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from liqo_peering import handlers


def configured() -> kopf.OperatorSettings:
    """kopf's settings once the operator's startup handler has run."""
    settings = kopf.OperatorSettings()

    async def run() -> None:
        startup: Any = handlers.configure  # kopf's decorator types it as its handler protocol
        await startup(settings=settings, memo=kopf.Memo())

    asyncio.run(run())
    return settings


def test_kopf_posts_no_events_of_its_own() -> None:
    """A normal wait of an unpeering raises kopf.TemporaryError, which kopf would post as an Error Event
    (reason Logging): the operator's own Events are the only ones a user sees."""
    settings = configured()
    assert settings.posting.enabled is False


def test_kopfs_watches_end_on_the_client_side_after_the_server_should_have() -> None:
    """A watch connection that died without a word (NAT or conntrack state lost) gets no end from the server:
    kopf's would wait for events forever without a client timeout."""
    settings = configured()
    assert settings.watching.server_timeout is not None and settings.watching.client_timeout is not None
    assert settings.watching.server_timeout < settings.watching.client_timeout

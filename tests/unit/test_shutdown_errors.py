"""handlers.known_kopf_errors: the two harmless errors kopf leaves to the event loop's handler are one quiet line
each (connection errors a stop leaves unretrieved, only once stopping; kopf's cancel callback's assertion)."""

from __future__ import annotations

import asyncio
import gc
import inspect
from typing import Any

import aiohttp
import kopf
import pytest

from liqo_peering.handlers import KOPF_CANCEL_CALLBACK, known_kopf_errors


class Loop:
    """Records what reaches asyncio's own handler."""

    def __init__(self) -> None:
        self.passed_on: list[dict[str, Any]] = []

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self.passed_on.append(context)


def context(error: BaseException) -> dict[str, Any]:
    return {"message": "Task exception was never retrieved", "exception": error}


CUT_OFF = [aiohttp.ClientConnectionError("Connection closed"), aiohttp.ServerDisconnectedError()]


@pytest.mark.parametrize("error", CUT_OFF)
def test_once_stopping_a_connection_error_is_not_passed_on(error: BaseException) -> None:
    memo, loop = kopf.Memo(stopping=True), Loop()
    known_kopf_errors(memo)(loop, context(error))  # type: ignore[arg-type]
    assert loop.passed_on == []


def test_before_the_stop_it_is_passed_on() -> None:
    memo, loop = kopf.Memo(), Loop()
    known_kopf_errors(memo)(loop, context(aiohttp.ClientConnectionError()))  # type: ignore[arg-type]
    assert len(loop.passed_on) == 1


def test_any_other_error_is_passed_on_even_when_stopping() -> None:
    memo, loop = kopf.Memo(stopping=True), Loop()
    known_kopf_errors(memo)(loop, context(RuntimeError("a bug")))  # type: ignore[arg-type]
    known_kopf_errors(memo)(loop, {"message": "no exception at all"})  # type: ignore[arg-type]
    assert len(loop.passed_on) == 2


@pytest.mark.parametrize("stopping", [True, False])
def test_on_a_real_loop_an_unretrieved_error_of_the_shutdown_logs_no_traceback(
    stopping: bool, caplog: pytest.LogCaptureFixture
) -> None:
    async def fails() -> None:
        raise aiohttp.ClientConnectionError("Connection closed")

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(known_kopf_errors(kopf.Memo(stopping=stopping)))
        task = asyncio.ensure_future(fails())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert task.done()
        del task
        gc.collect()  # the unretrieved exception is reported as the task is collected

    asyncio.run(main())
    tracebacks = [r for r in caplog.records if r.name == "asyncio" and r.exc_info]
    assert len(tracebacks) == (0 if stopping else 1)  # before a stop, asyncio's own report with its traceback


def stream() -> Any:
    """Named as kopf's watch request names its callback (handlers.KOPF_CANCEL_CALLBACK)."""

    def request_cancel_callback(_: asyncio.Future[None]) -> None:
        task = asyncio.current_task()
        assert task is not None  # as kopf 1.45 asserts it, in a callback, where there is no current task

    return request_cancel_callback


@pytest.mark.parametrize("named_as_kopfs", [True, False])
def test_kopfs_cancel_callback_failing_its_assertion_logs_no_traceback(
    named_as_kopfs: bool, caplog: pytest.LogCaptureFixture
) -> None:
    def elsewhere(_: asyncio.Future[None]) -> None:
        raise AssertionError("some other callback's")

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(known_kopf_errors(kopf.Memo()))
        stopper: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        stopper.add_done_callback(stream() if named_as_kopfs else elsewhere)
        stopper.set_result(None)  # a pause: the callback runs from the loop, outside any task
        await asyncio.sleep(0)

    asyncio.run(main())
    tracebacks = [r for r in caplog.records if r.name == "asyncio" and r.exc_info]
    assert len(tracebacks) == (0 if named_as_kopfs else 1)


def test_kopfs_watch_request_still_names_its_cancel_callback_so() -> None:
    """A kopf upgrade that renames or fixes the callback shows here: the handler's case can then go."""
    from kopf._cogs.clients import api

    assert "def request_cancel_callback" in inspect.getsource(api.stream)
    assert KOPF_CANCEL_CALLBACK.startswith(api.stream.__name__ + ".<locals>.")

"""handlers.cut_off_by_shutdown: connection errors that a stop leaves unretrieved are one quiet line, only then."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import aiohttp
import kopf
import pytest

from liqo_peering.handlers import cut_off_by_shutdown


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
    cut_off_by_shutdown(memo)(loop, context(error))  # type: ignore[arg-type]
    assert loop.passed_on == []


def test_before_the_stop_it_is_passed_on() -> None:
    memo, loop = kopf.Memo(), Loop()
    cut_off_by_shutdown(memo)(loop, context(aiohttp.ClientConnectionError()))  # type: ignore[arg-type]
    assert len(loop.passed_on) == 1


def test_any_other_error_is_passed_on_even_when_stopping() -> None:
    memo, loop = kopf.Memo(stopping=True), Loop()
    cut_off_by_shutdown(memo)(loop, context(RuntimeError("a bug")))  # type: ignore[arg-type]
    cut_off_by_shutdown(memo)(loop, {"message": "no exception at all"})  # type: ignore[arg-type]
    assert len(loop.passed_on) == 2


@pytest.mark.parametrize("stopping", [True, False])
def test_on_a_real_loop_an_unretrieved_error_of_the_shutdown_logs_no_traceback(
    stopping: bool, caplog: pytest.LogCaptureFixture
) -> None:
    async def fails() -> None:
        raise aiohttp.ClientConnectionError("Connection closed")

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(cut_off_by_shutdown(kopf.Memo(stopping=stopping)))
        task = asyncio.ensure_future(fails())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert task.done()
        del task
        gc.collect()  # the unretrieved exception is reported as the task is collected

    asyncio.run(main())
    tracebacks = [r for r in caplog.records if r.name == "asyncio" and r.exc_info]
    assert len(tracebacks) == (0 if stopping else 1)  # before a stop, asyncio's own report with its traceback

"""Event loop error reports go through structlog; the known-benign late wake is dropped."""

from __future__ import annotations

import asyncio
import io

import orjson
import pytest

from rofmd.server.daemon import _route_loop_errors
from rofmd.server.logs import configure_logging


def test_late_wake_of_cancelled_wait_is_dropped_other_errors_logged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    configure_logging("json", "info", stream=out)

    async def main() -> None:
        _route_loop_errors()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        fut.cancel()
        loop.call_soon(fut.set_result, None)  # what a late socket reader does

        def boom() -> None:
            raise RuntimeError("a real loop error")

        loop.call_soon(boom)
        await asyncio.sleep(0.01)

    asyncio.run(main())
    records = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert [r["event"] for r in records] == ["event loop error"]
    assert "RuntimeError: a real loop error" in records[0]["exception"]
    assert "Exception in callback" not in capsys.readouterr().err

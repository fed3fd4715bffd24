"""A daemon of our own, in this process, for commands that need one for a moment.

`rofmd demo` and `rofmd replay` act as a host; without `--socket` they start a
daemon on a temporary socket and memory root, use it over the real protocol,
and shut it down gracefully when they are done.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from rofmd.host.client import RofmdClient
from rofmd.server.daemon import Daemon
from rofmd.server.settings import DaemonSettings


@asynccontextmanager
async def private_daemon(work: Path) -> AsyncIterator[DaemonSettings]:
    """Serve from `work/` (socket, config, memory, state) until the block exits."""
    settings = DaemonSettings(
        socket_path=work / "run" / "rofmd.sock",
        config_dir=work / "cfg",
        memory_root=work / "memory",
        state_dir=work / "state",
        sessions_dir=work / "sessions",  # never the user's own DSH session logs
        watch_config=False,
    )
    daemon = Daemon(settings, {"HOME": str(work)})
    async with anyio.create_task_group() as tg:
        tg.start_soon(daemon.run)
        with anyio.fail_after(20):
            while True:
                try:
                    async with RofmdClient.connect(settings.socket_path) as probe:
                        await probe.ping()
                    break
                except OSError:
                    await anyio.sleep(0.02)
        try:
            yield settings
        finally:
            daemon.request_shutdown()

"""An `App` for handler tests, built from one config layer over one directory with no
daemon process around it, and the request context a handler is called with."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from engine.config import build_config
from handlers.app import App, Paths
from handlers.config_state import ConfigState
from handlers.context import ConnectionState, RequestContext

T = TypeVar("T")


def count_hops(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The worker hops (`anyio.to_thread.run_sync`) taken from now on, as the functions
    handed to them (appended as they are taken)."""
    hops: list[object] = []
    real = anyio.to_thread.run_sync

    async def counted(func: Callable[..., T], *args: Any, **kw: Any) -> T:
        hops.append(func)
        return await real(func, *args, **kw)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    return hops


class NoProcess:
    """The daemon facts `status` reports: `snapshot`, as there is no process to ask."""

    def __init__(self, snapshot: dict[str, Any] | None = None) -> None:
        self.snapshot = snapshot or {}

    def status_snapshot(self) -> dict[str, Any]:
        return dict(self.snapshot)


def make_app(
    root: Path, tree: dict[str, Any] | None = None, *, info: dict[str, Any] | None = None
) -> App:
    """An app whose config is the engine defaults under `tree`; memory, config and run
    directories all `root`."""
    config = ConfigState(None, {}, build_config([("test", tree or {})]))
    return App(config, Paths(root, root, root), NoProcess(info))


def request_ctx(method: str, now_ms: int, session: str | None = "s") -> RequestContext:
    """Request r1 of `method` on connection 1, at `now_ms`."""
    return RequestContext("r1", method, session, ConnectionState(conn_id=1), now_ms=now_ms)

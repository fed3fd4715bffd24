"""Session-less methods: initialize, ping, status, config/reload (PROTOCOL.md §4)."""

from __future__ import annotations

from typing import Any

import anyio

from handlers.app import App
from handlers.context import RequestContext
from handlers.damage import damage_status
from handlers.errors import HandlerError
from handlers.forget import memory_control_status
from handlers.listeners import listeners
from handlers.metrics import CONTENT_TYPE
from handlers.params import InitializeParams, NoParams, OptionalSessionParams, SleepParams
from handlers.sections import section_specs
from handlers.tools import tool_schemas

PROTOCOL_VERSION = 1
SERVER_NAME = "rofmd"


async def initialize(app: App, params: InitializeParams, ctx: RequestContext) -> dict[str, Any]:
    """Record the connection's capabilities and tell the bridge what to register."""
    if params.protocolVersion != PROTOCOL_VERSION:
        raise HandlerError(
            -32602,
            f"unsupported protocolVersion {params.protocolVersion}",
            {
                "errors": [
                    {
                        "field": "protocolVersion",
                        "message": f"this daemon speaks protocol {PROTOCOL_VERSION}",
                    }
                ],
                "supported": [PROTOCOL_VERSION],
            },
        )
    conn = ctx.connection
    conn.initialized = True
    conn.host = dict(params.host)
    conn.capabilities = {
        "tokenMeter": params.capabilities.tokenMeter,
        "systemPrompt": params.capabilities.systemPrompt,
        "tools": params.capabilities.tools,
        "attachments": params.capabilities.attachments,
    }
    result: dict[str, Any] = {
        "protocolVersion": PROTOCOL_VERSION,
        "server": {"name": SERVER_NAME, "version": app.info.status_snapshot()["version"]},
        "enabled": app.enabled,
        "tools": [],
        "sections": [],
        "listeners": [],
    }
    if app.enabled:
        result["sections"] = section_specs(conn)
        result["tools"] = tool_schemas(app) if conn.capability("tools") else []
        result["listeners"] = listeners(app)
    return result


async def ping(app: App, params: OptionalSessionParams, ctx: RequestContext) -> dict[str, Any]:
    """Liveness; with a session it also proves that session's queue is moving."""
    return {"pong": True}


async def status(app: App, params: NoParams, ctx: RequestContext) -> dict[str, Any]:
    """The daemon's health at a glance (PROTOCOL.md §4 `status`)."""
    snap = dict(app.info.status_snapshot())
    # PROTOCOL.md's counters: the dispatcher's requests and errors, the product's events
    events = app.metrics.events
    snap["counters"] = {
        **(snap.get("counters") or {}),
        "archives": events["archives"],
        "passiveArchives": events["passive_archives"],
        "recalls": events["recalls"],
    }
    snap.update(
        {
            "enabled": app.enabled,
            "config": {
                "generation": app.config.generation,
                "lastReloadError": app.config.last_error,
                "dir": str(app.config.config_dir) if app.config.config_dir else None,
                "sources": list(app.config.build.sources),
                "warnings": list(app.config.build.warnings),
            },
            "memoryRoot": str(app.memory_root()),
            "compat": app.compat.status.to_json(),
            "sessionsLoaded": app.sessions.loaded(),
            # sessions unloaded since start: by `agent/disposed`, idle or over the cap
            # (rofmd.server.eviction); `remembered`: evicted ones whose residue is kept
            "sessionsReleased": {
                "disposed": app.sessions.released["disposed"],
                "idle": app.sessions.released["idle"],
                "lru": app.sessions.released["lru"],
                "remembered": app.sessions.residues(),
            },
            # telemetry that could not be written (the operations went on)
            **app.sessions.stats_health.status(),
        }
    )
    # per loaded session: what loads repaired, which folders cannot be read (until fixed)
    snap.update(await damage_status(app))
    # per loaded session: recall injection paused, memories suppressed (memory_control /
    # memory_forget); only sessions with either
    snap["memoryControl"] = memory_control_status(app)
    return snap


def _gauges(app: App, snap: dict[str, Any]) -> list[tuple[str, str, float, dict[str, str]]]:
    """What the daemon holds now, for `metrics` (read on the event loop: counts, and a
    sum over the loaded sessions' counters, never over folders)."""
    tailer = snap.get("tailer") or {}
    files = tailer.get("files") or []
    pending = sum(st.store.index_stats.unscored for st in app.sessions.loaded_states())
    rows: list[tuple[str, str, float, dict[str, str]]] = [
        (
            "rofmd_uptime_seconds",
            "Seconds since the daemon started.",
            snap.get("uptimeSeconds") or 0,
            {},
        ),
        ("rofmd_connections", "Open client connections.", snap.get("connections") or 0, {}),
        ("rofmd_requests_in_flight", "Requests queued or running.", snap.get("inFlight") or 0, {}),
        (
            "rofmd_requests_queued",
            "Requests waiting behind their session's running one.",
            sum((snap.get("queueDepths") or {}).values()),
            {},
        ),
        ("rofmd_sessions_loaded", "Sessions held in memory.", app.sessions.loaded(), {}),
        (
            "rofmd_pending_folders",
            "Folders of the loaded sessions waiting for memory_judge.",
            pending,
            {},
        ),
        (
            "rofmd_config_generation",
            "Config reloads applied (1: the start).",
            app.config.generation,
            {},
        ),
        (
            "rofmd_stats_write_failures",
            "Telemetry records that could not be written.",
            app.sessions.stats_health.failures,
            {},
        ),
        ("rofmd_tailer_logs", "Session logs the tailer follows.", len(files), {}),
        (
            "rofmd_tailer_lag_bytes",
            "Bytes of the followed session logs not read yet.",
            sum(int(f.get("lag") or 0) for f in files),
            {},
        ),
    ]
    return rows


async def metrics_exposition(app: App) -> dict[str, Any]:
    """The Prometheus text exposition (PROTOCOL.md §4 `metrics`), rendered in a worker
    thread from a copy of the counters: the exposition library's first import alone
    takes longer than the event loop may wait. Also what the metrics endpoint serves
    (`rofmd.server.metrics_http`)."""
    counted = app.metrics.snapshot()
    gauges = _gauges(app, dict(app.info.status_snapshot()))
    text = await anyio.to_thread.run_sync(lambda: counted.render(gauges))
    return {"contentType": CONTENT_TYPE, "text": text}


async def metrics(app: App, params: NoParams, ctx: RequestContext) -> dict[str, Any]:
    """`metrics`: the exposition over the protocol socket (`rofmd metrics`)."""
    return await metrics_exposition(app)


async def config_reload(app: App, params: NoParams, ctx: RequestContext) -> dict[str, Any]:
    """Same effect as SIGHUP or a file change: a bad file keeps the last good config."""
    result = await app.reload_config(ctx.now_ms)
    return result.to_json()


async def debug_sleep(app: App, params: SleepParams, ctx: RequestContext) -> dict[str, Any]:
    """A request of known duration, for exercising ordering, cancellation and timeouts."""
    await anyio.sleep(params.ms / 1000)
    return {"slept": params.ms}

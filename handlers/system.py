"""Session-less methods: initialize, ping, status, config/reload (PROTOCOL.md §4)."""

from __future__ import annotations

from typing import Any

import anyio

from handlers.app import App
from handlers.context import RequestContext
from handlers.damage import damage_status
from handlers.errors import HandlerError
from handlers.forget import memory_control_status
from handlers.params import InitializeParams, NoParams, OptionalSessionParams, SleepParams
from handlers.sections import section_specs

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
        from handlers.registry import listeners
        from handlers.tools import tool_schemas

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
            "sessionsLoaded": app.sessions.loaded(),
            # sessions unloaded since start: by `agent/disposed`, idle or over the cap
            # (rofmd.eviction); `remembered`: evicted ones whose residue is kept
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


async def config_reload(app: App, params: NoParams, ctx: RequestContext) -> dict[str, Any]:
    """Same effect as SIGHUP or a file change: a bad file keeps the last good config."""
    result = await app.config.reload()
    return result.to_json()


async def debug_sleep(app: App, params: SleepParams, ctx: RequestContext) -> dict[str, Any]:
    """A request of known duration, for exercising ordering, cancellation and timeouts."""
    await anyio.sleep(params.ms / 1000)
    return {"slept": params.ms}

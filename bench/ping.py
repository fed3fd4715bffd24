"""Ping round trips per second and latency percentiles, 1 and 50 concurrent clients.

The daemon runs as its own process on a real socket, like a host would see it;
the clients share this process's event loop, so the numbers include client
overhead and are a floor on what the daemon can do.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import anyio

from rofmd.host.client import RofmdClient


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of a non-empty list (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, round(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


async def _client_loop(path: Path, n: int, lat: list[float], session: str | None) -> None:
    async with RofmdClient.connect(path) as client:
        for _ in range(n):
            t0 = time.perf_counter()
            await client.ping(session)
            lat.append(time.perf_counter() - t0)


async def run_ping(
    path: Path, clients: int, per_client: int, *, session: bool = False
) -> dict[str, Any]:
    """Run `clients` connections × `per_client` sequential pings each."""
    lat: list[float] = []
    # warm-up, so imports and first allocations are not measured
    await _client_loop(path, 50, [], None)
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for c in range(clients):
            tg.start_soon(_client_loop, path, per_client, lat, f"bench-{c}" if session else None)
    wall = time.perf_counter() - t0
    return {
        "clients": clients,
        "requests": len(lat),
        "seconds": round(wall, 3),
        "rps": round(len(lat) / wall, 1),
        "p50_ms": round(statistics.median(lat) * 1000, 3),
        "p99_ms": round(percentile(lat, 99) * 1000, 3),
    }

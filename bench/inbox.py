"""`agent/inbox/inserted` on large sessions, as a ratio to `ping`, one daemon, one run.

The daemon serves 20 sessions of 10⁴ folders each (`bench.stores`: built once, cached),
on the packaged config (`ranked` recall). Every session is loaded and warmed first (its
first messages open the store and restore its relevance index from the snapshot), then
each repetition runs four phases back to back, on the same connections:

* ``ping``, 20 clients: each client pings with its own session (the per-session lane a
  request of that session takes), ``per_client`` times in a row, all at once;
* ``inbox``, 20 clients: each sends ``per_client`` user messages to its session, one
  after the other (a new message id each, the text a question in the session's words),
  each running a recall round: selection, reading the picked folders, the recall state
  written durably, telemetry, the three sections answered;
* the same two with one client.

The floor of a phase is the median ping of the phase before it (same clients, same
machine state). Reported per case: medians over the repetitions of the p50 and p99
latency (ms) and of their ratios to the ping p50, with the spread (smallest and
largest ratio of the repetitions), and what the daemon read from the device per round
(``disk_kB``, Linux ``/proc/<pid>/io``: 0 when the page cache held every file a round
read). Each round reads the folders it picks, most of them never read before, so whether
the stores were in the page cache moves the latency more than most changes do: this
column says which it was. The clients run on one event loop in this process and
share the two cores with the daemon, as in `bench.ping`.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import anyio
import orjson

from bench.ping import percentile
from bench.ranked import make_corpus
from bench.stores import StoreSpec, prepared_root
from rofmd.host.client import RofmdClient
from tests.e2e.harness import running_daemon

SESSIONS = 20
FOLDERS = 10_000
QUERIES = "queries.json"


def specs(sessions: int, folders: int) -> list[StoreSpec]:
    return [StoreSpec(f"bench-s{s:02d}", folders, 100 + s) for s in range(sessions)]


def _queries(base: Path, all_specs: list[StoreSpec]) -> dict[str, list[str]]:
    """Each session's questions (its corpus's queries), kept beside the cached stores."""
    path = base / QUERIES
    if path.is_file():
        doc: dict[str, list[str]] = orjson.loads(path.read_bytes())
        if set(doc) == {s.session_id for s in all_specs}:
            return doc
    doc = {s.session_id: make_corpus(s.folders, seed=s.seed)[2] for s in all_specs}
    path.write_bytes(orjson.dumps(doc))
    return doc


class _Session:
    """One client connection and the session it speaks for."""

    def __init__(self, client: RofmdClient, sid: str, queries: list[str], folders: int) -> None:
        self.client = client
        self.sid = sid
        self.queries = queries
        self.sent = 0
        self.time_ms = 1_780_000_000_000 + folders * 60_000

    def _params(self) -> dict[str, Any]:
        self.sent += 1
        self.time_ms += 5_000
        text = self.queries[self.sent % len(self.queries)]
        return {
            "session": {"id": self.sid},
            "message": {
                "id": f"bench-{self.sent}",
                "role": "user",
                "content": [{"type": "text", "text": text}],
                "source": {"kind": "user"},
            },
            "time": self.time_ms,
        }

    async def inbox(self, n: int, lat: list[float]) -> None:
        for _ in range(n):
            params = self._params()
            t0 = time.perf_counter()
            result = await self.client.call("agent/inbox/inserted", params)
            lat.append(time.perf_counter() - t0)
            assert isinstance(result.get("sections"), list), result

    async def ping(self, n: int, lat: list[float]) -> None:
        for _ in range(n):
            t0 = time.perf_counter()
            await self.client.ping(self.sid)
            lat.append(time.perf_counter() - t0)


async def _phase(sessions: list[_Session], what: str, n: int) -> list[float]:
    lat: list[float] = []
    async with anyio.create_task_group() as tg:
        for s in sessions:
            tg.start_soon(getattr(s, what), n, lat)
    return lat


def device_read_bytes(pid: int) -> int | None:
    """Bytes process `pid` has had read from the storage device so far (not from the page
    cache); None where `/proc/<pid>/io` does not tell."""
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            name, _, value = line.partition(":")
            if name == "read_bytes":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


async def _measure(
    path: Path,
    pid: int,
    queries: dict[str, list[str]],
    folders: int,
    reps: int,
    per_client: int,
) -> dict[str, list[tuple[float, float, float, float | None]]]:
    """Per case, per repetition: (ping p50, inbox p50, inbox p99) in seconds, and the
    bytes read from the device per round (None: not known)."""
    out: dict[str, list[tuple[float, float, float, float | None]]] = {"many": [], "one": []}
    async with anyio.create_task_group() as tg:
        sessions: list[_Session] = []
        connected, ready = anyio.Event(), anyio.Event()

        async def connect(sid: str) -> None:
            async with RofmdClient.connect(path) as client:
                await client.initialize()
                sessions.append(_Session(client, sid, queries[sid], folders))
                if len(sessions) == len(queries):
                    connected.set()
                await ready.wait()

        for sid in queries:
            tg.start_soon(connect, sid)
        await connected.wait()
        sessions.sort(key=lambda s: s.sid)
        for s in sessions:  # open each store (one at a time, as a restart would)
            await s.inbox(3, [])
        await _phase(sessions, "inbox", 3)
        per_one = per_client * len(sessions)
        for _ in range(reps):
            for case, group, n in (("many", sessions, per_client), ("one", sessions[:1], per_one)):
                pings = await _phase(group, "ping", n)
                before = device_read_bytes(pid)
                lat = await _phase(group, "inbox", n)
                after = device_read_bytes(pid)
                read = None if before is None or after is None else (after - before) / len(lat)
                out[case].append(
                    (statistics.median(pings), statistics.median(lat), percentile(lat, 99), read)
                )
        ready.set()
    return out


def _row(
    case: str, clients: int, runs: list[tuple[float, float, float, float | None]]
) -> dict[str, Any]:
    p50s = [r[1] / r[0] for r in runs]
    p99s = [r[2] / r[0] for r in runs]
    reads = [r[3] for r in runs if r[3] is not None]
    return {
        "case": case,
        "clients": clients,
        "reps": len(runs),
        "ping_p50": round(statistics.median(r[0] for r in runs) * 1000, 3),
        "p50_ms": round(statistics.median(r[1] for r in runs) * 1000, 2),
        "p99_ms": round(statistics.median(r[2] for r in runs) * 1000, 2),
        "p50/ping": round(statistics.median(p50s), 1),
        "p50_range": f"{min(p50s):.1f}-{max(p50s):.1f}",
        "p99/ping": round(statistics.median(p99s), 1),
        "p99_range": f"{min(p99s):.1f}-{max(p99s):.1f}",
        "disk_kB": round(statistics.median(reads) / 1000, 1) if reads else "-",
    }


def run_inbox(
    reps: int = 3,
    per_client: int = 10,
    *,
    sessions: int = SESSIONS,
    folders: int = FOLDERS,
) -> list[dict[str, Any]]:
    """Rows for the bench table (module docstring)."""
    all_specs = specs(sessions, folders)
    base = prepared_root(f"inbox-{sessions}x{folders}", all_specs)
    queries = _queries(base, all_specs)
    with running_daemon(base=base, args=["--log-level", "warning"]) as d:
        runs = anyio.run(
            _measure, d.socket_path, d.proc.pid, queries, folders, max(3, reps), per_client
        )
    label = f"{sessions} x {folders}"
    return [
        _row(f"{label}, concurrent", sessions, runs["many"]),
        _row(f"{label}, one client", 1, runs["one"]),
    ]

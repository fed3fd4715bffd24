"""`rofmd replay <session-log>`: a real DSH v4 session driven through the daemon.

The log (`session.v4.jsonl` or multi-frame `session.v4.jsonl.zstd`; a torn final
frame gives its complete lines) is replayed in order: surface events rebuild the
model-visible surface (`append`, and `replace` for compactions the original
host made), each real user message goes to `agent/inbox/inserted`, each model
step is preceded by `agent/pre-step` (whose compaction is applied and
committed), and the task block is answered by the scripted scorer unless
`--no-score`. The daemon sees what it would have seen live.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio

from engine.passive.events import message_of
from engine.sessionlog import LogChunk, read_log
from rofmd.cli.json_out import print_json
from rofmd.cli.progress import Progress
from rofmd.host.client import RofmdClient
from rofmd.host.hostsim import HostSim, Node, estimate_tokens

SURFACE_TYPES = frozenset(
    {"system/message", "developer/message", "user/message", "assistant/message", "tool/result"}
)
REAL_USER_SOURCES = frozenset({"user"})
CHECKPOINT_SEQ_BASE = 1 << 40


class ReplayError(Exception):
    """The log cannot be replayed (unreadable, not a v4 session log)."""


@dataclass
class ReplayReport:
    """What a replay did, for people and for `--json`."""

    session: dict[str, Any] = field(default_factory=dict)
    events: int = 0
    frames: int = 0
    torn: bool = False
    bad_lines: int = 0
    user_messages: int = 0
    model_steps: int = 0
    foreign_compactions: int = 0
    skipped_replacements: int = 0
    archives: list[dict[str, Any]] = field(default_factory=list)
    recalls: list[dict[str, Any]] = field(default_factory=list)
    judge_calls: int = 0
    scored: int = 0
    final_surface_nodes: int = 0
    final_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        """The report as JSON."""
        return {
            "session": self.session,
            "events": self.events,
            "frames": self.frames,
            "torn": self.torn,
            "badLines": self.bad_lines,
            "userMessages": self.user_messages,
            "modelSteps": self.model_steps,
            "foreignCompactions": self.foreign_compactions,
            "skippedReplacements": self.skipped_replacements,
            "archives": self.archives,
            "recalls": self.recalls,
            "judgeCalls": self.judge_calls,
            "scored": self.scored,
            "finalSurfaceNodes": self.final_surface_nodes,
            "finalTokens": self.final_tokens,
            "summary": {
                "archives": len(self.archives),
                "folders": sum(len(a["folders"]) for a in self.archives),
                "recalls": len(self.recalls),
            },
        }


def load_log(path: Path) -> LogChunk:
    """Read the whole log file (plain or zstd frames)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ReplayError(f"cannot read {path}: {exc.strerror or exc}") from None
    chunk = read_log(data)
    if not chunk.events:
        raise ReplayError(f"{path}: no events (not a DSH v4 session log?)")
    return chunk


def _header(events: list[dict[str, Any]]) -> dict[str, Any]:
    head = events[0]
    if head.get("type") != "session" or head.get("version") != 4:
        raise ReplayError("the first line is not a v4 session header")
    session = {"id": str(head.get("id") or "replay")}
    for key in ("origin", "delegationDepth", "agentPreset", "cwd"):
        if head.get(key) is not None:
            session[key] = head[key]
    return session


def _message(event: dict[str, Any]) -> dict[str, Any] | None:
    """The event's message (engine.passive.events.message_of), as the dict it was parsed
    into: the caller changes or forwards it."""
    message = message_of(event)
    return message if isinstance(message, dict) else None


async def replay(
    client: RofmdClient,
    chunk: LogChunk,
    *,
    window: int,
    score: bool,
    session_id: str | None = None,
    progress: Progress | None = None,
) -> ReplayReport:
    """Replay every event of `chunk` through `client` (``progress``: told after each)."""
    from rofmd.host.demo import scripted_scorer

    events = chunk.events
    session = _header(events)
    if session_id:
        session["id"] = session_id
    report = ReplayReport(
        session=session,
        events=len(events),
        frames=chunk.frames,
        torn=chunk.torn,
        bad_lines=len(chunk.bad_lines),
    )
    await client.initialize(host={"name": "rofmd-replay", "version": "1"})
    sim = HostSim(client, session, window, scorer=scripted_scorer if score else None)
    sim.checkpoint_seq_base = CHECKPOINT_SEQ_BASE
    for done, event in enumerate(events[1:], start=1):
        if progress is not None:
            progress.update(done, f"{len(report.archives)} archives, {len(report.recalls)} recalls")
        etype = event.get("type")
        op = event.get("surfaceOp")
        message = _message(event)
        if etype not in SURFACE_TYPES or op is None or message is None:
            continue
        seq = event.get("seq")
        when = int(event.get("time") or 0)
        if not isinstance(seq, int):
            continue
        if isinstance(op, dict) and op.get("op") == "replace":
            report.foreign_compactions += 1
            node = Node(seq, etype, when, sim.turn, message, estimate_tokens(message))
            if not sim.replace_span(int(op.get("startSeq", -1)), int(op.get("endSeq", -1)), node):
                report.skipped_replacements += 1  # our own archive already replaced it
                sim.surface.append(node)
            continue
        kind = (message.get("source") or {}).get("kind")
        if etype == "user/message" and kind in REAL_USER_SOURCES:
            report.user_messages += 1
            answer = await sim.user_message(message, when, seq=seq)
            if answer.get("recalled"):
                report.recalls.append({"turn": sim.turn, "ids": answer["recalled"]})
            continue
        if etype == "assistant/message":
            report.model_steps += 1
            step = await sim.pre_step(when)
            await sim.answer_tasks()
            if step.compaction:
                report.archives.append(
                    {
                        "turn": sim.turn,
                        "step": step.step,
                        "contextTokens": step.before_tokens,
                        "archivedTokens": step.compaction.get("shadowedTokenCount", 0),
                        "folders": step.compaction.get("folders", []),
                    }
                )
        sim.add(etype, message, when, seq=seq)
    report.judge_calls = len(sim.judges)
    report.scored = sum(len(j.ids) for j in sim.judges)
    report.final_surface_nodes = len(sim.surface)
    report.final_tokens = sim.total_tokens()
    return report


def render(report: ReplayReport, out: TextIO) -> None:
    """Human-readable replay report."""
    w = out.write
    w(f"replayed session {report.session.get('id')}: {report.events} events")
    w(f" in {report.frames} frame(s)" if report.frames else "")
    w(" (torn final frame: its complete lines only)" if report.torn else "")
    w("\n")
    for a in report.archives:
        w(
            f"[turn {a['turn']} step {a['step']}] context at {a['contextTokens']} tokens: "
            f"archived {a['archivedTokens']} tokens into {len(a['folders'])} folder(s)\n"
        )
    for r in report.recalls:
        w(f"[turn {r['turn']}] recalled {', '.join(r['ids'])}\n")
    j = report.to_json()["summary"]
    w(
        f"summary: {report.user_messages} user messages, {report.model_steps} model steps, "
        f"{j['archives']} archives ({j['folders']} folders), {report.scored} scored in "
        f"{report.judge_calls} memory_judge calls, {j['recalls']} recalls, "
        f"{report.foreign_compactions} foreign compactions, {report.bad_lines} bad lines; "
        f"final surface {report.final_surface_nodes} nodes / {report.final_tokens} tokens\n"
    )


async def run_replay(
    log_path: Path,
    *,
    socket: Path | None,
    window: int,
    score: bool,
    as_json: bool,
    out: TextIO = sys.stdout,
) -> int:
    """`rofmd replay`: against `socket`, or a private daemon started here."""
    from rofmd.host.private_daemon import private_daemon

    try:
        chunk = await anyio.to_thread.run_sync(load_log, log_path)
    except ReplayError as exc:
        print(f"rofmd replay: {exc}", file=sys.stderr)
        return 1
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="rofmd-replay-", dir="/tmp"))
    # a bar on a terminal, a plain line every 5 s otherwise (stderr: stdout is the result)
    progress = Progress(
        sys.stderr, max(1, len(chunk.events) - 1), "replay", unit="events", plain_interval=5.0
    )
    try:
        try:
            if socket is not None:
                async with RofmdClient.connect(socket) as client:
                    report = await replay(
                        client, chunk, window=window, score=score, progress=progress
                    )
            else:
                async with (
                    private_daemon(work) as settings,
                    RofmdClient.connect(settings.socket_path) as client,
                ):
                    report = await replay(
                        client, chunk, window=window, score=score, progress=progress
                    )
        except ReplayError as exc:
            print(f"rofmd replay: {exc}", file=sys.stderr)
            return 1
        finally:
            progress.close()
        result = report.to_json()
        result["seconds"] = round(time.monotonic() - started, 2)
        if as_json:
            print_json(result, out)
        else:
            render(report, out)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)

"""`rofmd demo`: the whole loop on a shipped conversation, over the real protocol.

It starts a daemon in this process on a temporary socket and memory root (or
uses a running one with `--socket`), plays the host (`rofmd.host.hostsim`), answers
the task block with a scripted scorer standing in for the model, then asks
questions whose answers were archived and shows the recall block the model
would see.
"""

from __future__ import annotations

import re
import shutil
import struct
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any, TextIO

from engine.heuristic import DEFAULT_WEIGHTS, heuristic_score
from engine.keywords import extract_keywords
from rofmd.cli.executable import rofmd_command
from rofmd.cli.json_out import print_json
from rofmd.host.client import RofmdClient
from rofmd.host.demo_script import MINUTE_MS, START_MS, Script, demo_script
from rofmd.host.hostsim import HostSim

DEMO_SESSION = "demo-session"


def scripted_scorer(folder_id: str, text: str, review: bool) -> dict[str, Any]:
    """What a cooperative model would submit: heuristic α, trusted β, content keywords."""
    if review:
        return {"id": folder_id, "keep": True, "reason": "仍然成立"}
    body = _item_body(text)
    score = heuristic_score(
        body,
        weights=DEFAULT_WEIGHTS,
        alpha_min=0.01,
        alpha_max=1.0,
        keywords_min=3,
        keywords_max=12,
    )
    keywords = list(score.keywords)
    for extra in extract_keywords(body, max_keywords=16):
        if len(keywords) >= 3:
            break
        if extra not in keywords:
            keywords.append(extra)
    for filler in ("对话", "记录", "demo"):
        if len(keywords) >= 3:
            break
        keywords.append(filler)
    return {
        "id": folder_id,
        "alpha": score.alpha,
        "beta": 3.0,
        "keywords": keywords,
        "reason": "scripted demo scorer: heuristic α, trusted β",
    }


_ROLE_PREFIX = re.compile(r"^\s*(?:user|assistant|tool|system)[:：]\s*", re.MULTILINE)
_ITEM_END = re.compile(r"\n(?:### |评分口径)")


def _item_body(segment: str) -> str:
    """The conversation text of one task-block item: up to the next heading, no role tags."""
    end = _ITEM_END.search(segment)
    segment = segment[: end.start()] if end else segment
    body = segment.split("原文", 1)[-1]
    return _ROLE_PREFIX.sub("", body)


def _png(width: int = 4, height: int = 4) -> bytes:
    """A tiny valid PNG, so the image path is real without shipping a binary."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    raw = b"".join(b"\x00" + b"\x80\x40\x20" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


async def play(
    client: RofmdClient, script: Script, media_dir: Path, session_id: str = DEMO_SESSION
) -> dict[str, Any]:
    """Play the script through `client` as session `session_id`; return what happened."""
    init = await client.initialize(host={"name": "rofmd-demo", "version": "1"})
    sim = HostSim(
        client,
        {"id": session_id, "cwd": "/home/dev/starport"},
        script.context_window,
        scorer=scripted_scorer,
    )
    now = START_MS
    timeline: list[dict[str, Any]] = []
    for turn in script.turns:
        now += 7 * MINUTE_MS
        if turn.pinned:
            sim.add(
                "developer/message",
                {
                    "id": f"ctx-{sim.next_seq}",
                    "role": "developer",
                    "content": [{"type": "text", "text": turn.pinned}],
                    "source": {"kind": "runtime-context"},
                },
                now,
            )
        recall = await sim.user_says(turn.user, now)
        if turn.image:
            path = media_dir / turn.image
            path.write_bytes(_png())
            sim.surface[-1].message["content"].append(
                {
                    "type": "image",
                    "attachment": {
                        "attachmentId": f"att-{turn.image}",
                        "mediaType": "image/png",
                        "bytes": path.stat().st_size,
                        "width": 4,
                        "height": 4,
                        "name": turn.image,
                        "hostPath": str(path),
                    },
                }
            )
        for step in turn.steps:
            now += MINUTE_MS
            report = await sim.assistant_says(step.text, now, tool_calls=step.tools)
            if report.compaction:
                timeline.append(
                    {
                        "event": "archive",
                        "turn": sim.turn,
                        "step": report.step,
                        "contextTokens": report.before_tokens,
                        "archivedTokens": report.compaction.get("shadowedTokenCount", 0),
                        "folders": report.compaction.get("folders", []),
                        "note": "".join(
                            c.get("text", "") for c in report.compaction["checkpoint"]["content"]
                        ),
                        "warnings": report.warnings,
                    }
                )
        if recall.get("recalled"):
            timeline.append({"event": "recall", "turn": sim.turn, "ids": recall["recalled"]})
    # one more step so the last archive's task block is answered
    now += MINUTE_MS
    await sim.pre_step(now)
    await sim.answer_tasks()
    answers = []
    for question in script.questions:
        now += 30 * MINUTE_MS
        answer = await sim.user_says(question.text, now)
        block = sim.sections.get("dsh-rofm:recall", "")
        answers.append(
            {
                "question": question.text,
                "expect": question.expect,
                "recalled": answer.get("recalled", []),
                "found": question.expect in block,
                "block": block,
            }
        )
        await sim.assistant_says("(demo model answers from the recalled memory)", now + MINUTE_MS)
    return {
        "server": init.get("server"),
        "timeline": timeline,
        "judges": [{"ids": j.ids, "text": j.text} for j in sim.judges],
        "archivedFolders": sim.archived_folders,
        "answers": answers,
        "summary": {
            "turns": len(script.turns),
            "archives": sum(1 for t in timeline if t["event"] == "archive"),
            "folders": len(sim.archived_folders),
            "judgeCalls": len(sim.judges),
            "scored": sum(len(j.ids) for j in sim.judges),
            "questions": len(answers),
            "answered": sum(1 for a in answers if a["found"]),
        },
    }


def render(result: dict[str, Any], out: TextIO) -> None:
    """The human-readable story of a demo run."""
    w = out.write
    w(f"rofmd demo — server {result['server']}\n\n")
    for item in result["timeline"]:
        if item["event"] == "archive":
            w(
                f"[turn {item['turn']}] context at {item['contextTokens']} tokens: archived "
                f"{item['archivedTokens']} tokens into {len(item['folders'])} folder(s)\n"
                f"    note: {item['note'][:120]}\n"
            )
            for warning in item["warnings"]:
                w(f"    warning: {warning}\n")
        else:
            w(f"[turn {item['turn']}] recalled {', '.join(item['ids'])}\n")
    for judge in result["judges"]:
        w(f"\nmemory_judge ({len(judge['ids'])} item(s)): {judge['text'][:160]}\n")
    for answer in result["answers"]:
        mark = "✓" if answer["found"] else "✗"
        w(f"\n{mark} Q: {answer['question']}  (expect {answer['expect']!r})\n")
        lines = answer["block"].splitlines()
        if not lines:
            w("  (no recall block)\n")
        w(
            f"  recall block the model sees ({len(lines)} lines; entry headings and matching lines):\n"
        )
        for line in lines[:1]:
            w(f"  │ {line}\n")
        shown = 0
        for line in lines[1:]:
            if line.startswith("### ") or (answer["expect"] in line and shown < 3):
                w(f"  │ {line[:160]}\n")
                shown += not line.startswith("### ")
    s = result["summary"]
    w(
        f"\nsummary: {s['turns']} turns, {s['archives']} archives, {s['folders']} folders, "
        f"{s['scored']} scored in {s['judgeCalls']} memory_judge calls, "
        f"{s['answered']}/{s['questions']} questions answered from memory\n"
    )


async def run_demo(socket: Path | None, *, as_json: bool, out: TextIO = sys.stdout) -> int:
    """Run the demo against `socket`, or against a private daemon started here."""
    work = Path(tempfile.mkdtemp(prefix="rofmd-demo-", dir="/tmp"))
    started = time.monotonic()
    try:
        media = work / "media"
        media.mkdir()
        if socket is not None:
            async with RofmdClient.connect(socket) as client:
                result = await play(client, demo_script(), media)
        else:
            result = await _with_private_daemon(work, media)
        result["seconds"] = round(time.monotonic() - started, 2)
        if as_json:
            print_json(result, out)
        else:
            render(result, out)
        return 0 if result["summary"]["answered"] == result["summary"]["questions"] else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def _with_private_daemon(work: Path, media: Path) -> dict[str, Any]:
    from rofmd.host.private_daemon import private_daemon

    async with (
        private_daemon(work) as settings,
        RofmdClient.connect(settings.socket_path) as client,
    ):
        result = await play(client, demo_script(), media)
    result["memoryRoot"] = str(settings.memory_root)
    return result


async def demo_on_running_daemon(socket: Path, out: TextIO = sys.stdout) -> None:
    """`rofmd serve --demo`: play the demo against the daemon that just started, print
    the story, and leave the daemon serving. A failing demo is reported, not fatal."""
    import structlog

    work = Path(tempfile.mkdtemp(prefix="rofmd-demo-", dir="/tmp"))
    try:
        media = work / "media"
        media.mkdir()
        # a fresh session each time, so a second `make run` tells the same story
        session_id = f"{DEMO_SESSION}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
        async with RofmdClient.connect(socket) as client:
            result = await play(client, demo_script(), media, session_id)
        render(result, out)
        out.write(
            f"\nthe daemon keeps serving on {socket}; try `{rofmd_command()} status` in another "
            "terminal, Ctrl-C to stop\n"
        )
        out.flush()
    except Exception:  # noqa: BLE001 - the demo must never take the daemon down
        structlog.get_logger("rofmd.demo").exception("demo failed; the daemon keeps serving")
    finally:
        shutil.rmtree(work, ignore_errors=True)

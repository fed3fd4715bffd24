"""DSH v4 events for the passive path: conversations and foreign compactions of them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

T0 = 1_793_610_000_000
TOPICS = (
    "我们决定把数据库迁移到 PostgreSQL 16,周五晚上停机两小时。",
    "The staging cluster lives in eu-west-3 and its bastion is bastion-7.",
    "我妹妹下个月在里斯本结婚,记得提醒我订机票。",
    "Use ruff for lint and keep the line length at 100 characters.",
    "报销单要在每月 25 号之前提交给财务的王老师。",
    "The nightly backup job writes to s3://acme-backups/nightly with 30 days retention.",
)


def header(session_id: str, **extra: Any) -> dict[str, Any]:
    """The first line of a session log."""
    return {"type": "session", "version": 4, "id": session_id, "createdAt": T0, **extra}


@dataclass
class SessionLog:
    """Events of one DSH session as the host would append them, seq by seq."""

    session_id: str
    events: list[dict[str, Any]] = field(default_factory=list)
    turn: int = 0
    compactions: int = 0

    @property
    def next_seq(self) -> int:
        return len(self.events)

    def _add(self, etype: str, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
        seq = self.next_seq
        event = {"type": etype, "seq": seq, "time": T0 + seq * 1000, "data": data, **extra}
        self.events.append(event)
        return event

    def exchange(self, text: str) -> list[dict[str, Any]]:
        """One turn: the user's message, an assistant step with a tool call, the tool's
        result and the assistant's answer (4 events; 2 of them archivable)."""
        self.turn += 1
        n, turn = self.next_seq, self.turn
        out = [
            self._add(
                "user/message",
                {
                    "id": f"{self.session_id}-u{n}",
                    "role": "user",
                    "source": {"kind": "user"},
                    "content": [{"type": "text", "text": text}],
                },
                surfaceOp="append",
            ),
            self._add(
                "assistant/message",
                {
                    "turn": turn,
                    "step": 1,
                    "message": {
                        "id": f"{self.session_id}-c{n}",
                        "role": "assistant",
                        "source": {"kind": "model"},
                        "content": [
                            {"type": "reasoning", "text": "thinking about it"},
                            {
                                "type": "tool-call",
                                "id": f"call{n}",
                                "name": "bash",
                                "arguments": "{}",
                            },
                        ],
                    },
                },
                surfaceOp="append",
            ),
            self._add(
                "tool/result",
                {
                    "turn": turn,
                    "step": 1,
                    "message": {
                        "id": f"{self.session_id}-t{n}",
                        "role": "tool",
                        "toolCallId": f"call{n}",
                        "source": {"kind": "tool"},
                        "content": [{"type": "text", "text": "exit 0\n" * 20}],
                    },
                },
                surfaceOp="append",
            ),
            self._add(
                "assistant/message",
                {
                    "turn": turn,
                    "step": 2,
                    "message": {
                        "id": f"{self.session_id}-a{n}",
                        "role": "assistant",
                        "source": {"kind": "model"},
                        "content": [{"type": "text", "text": f"好的,记下了: {text}"}],
                    },
                },
                surfaceOp="append",
            ),
        ]
        return out

    def compaction(
        self, shadowed: list[int], provider: str = "compact"
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The host's compaction transaction over ``shadowed`` (start, summary,
        checkpoint replacing the span, end): (the summary event, the four events)."""
        self.compactions += 1
        cid = f"{provider}-{self.compactions}"
        start = self._add("compaction/start", {"compactionId": cid, "turn": self.turn})
        summary = self._add(
            "compaction/summary",
            {
                "compactionId": cid,
                "summary": [{"type": "text", "text": "Earlier conversation, summarised."}],
                "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]},
                "shadowedSeqs": shadowed,
                "shadowedTokenCount": 100 * len(shadowed),
                "provider": provider,
                "model": "m",
                "turn": self.turn,
            },
        )
        ckpt = self._add(
            "user/message",
            {
                "id": f"ckpt-{cid}",
                "role": "user",
                "source": {"kind": "compact-checkpoint"},
                "content": [{"type": "text", "text": "Earlier conversation, summarised."}],
            },
            surfaceOp={"op": "replace", "startSeq": shadowed[0], "endSeq": shadowed[-1]},
        )
        end = self._add("compaction/end", {"compactionId": cid, "turn": self.turn})
        return summary, [start, summary, ckpt, end]

    def by_seq(self, seqs: Iterable[int]) -> list[dict[str, Any]]:
        wanted = set(seqs)
        return [e for e in self.events if e["seq"] in wanted]


def archivable_ids(events: Iterable[dict[str, Any]]) -> set[str]:
    """Message ids of the user and assistant messages with text (what passive keeps)."""
    out: set[str] = set()
    for e in events:
        if e["type"] == "user/message" and e["data"]["source"]["kind"] == "user":
            out.add(e["data"]["id"])
        elif e["type"] == "assistant/message":
            msg = e["data"]["message"]
            if any(b["type"] == "text" for b in msg["content"]):
                out.add(msg["id"])
    return out


def passive_messages(memory_root: Path) -> list[dict[str, Any]]:
    """Every message of every passive folder under a memory root (duplicates kept)."""
    out: list[dict[str, Any]] = []
    for meta_path in sorted(memory_root.glob("sessions/*/mem-*/meta.json")):
        meta = orjson.loads(meta_path.read_bytes())
        if meta.get("archivedFrom") != "passive":
            continue
        ctx = orjson.loads((meta_path.parent / "context.json").read_bytes())
        out.extend(ctx["messages"])
    return out


def passive_metas(memory_root: Path) -> list[dict[str, Any]]:
    """The metas of the passive folders under a memory root."""
    metas = [orjson.loads(p.read_bytes()) for p in memory_root.glob("sessions/*/mem-*/meta.json")]
    return [m for m in metas if m.get("archivedFrom") == "passive"]

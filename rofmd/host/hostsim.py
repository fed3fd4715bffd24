"""A host bridge in a box: plays the DSH side of PROTOCOL.md against a real daemon.

`rofmd demo` and `rofmd replay` both need something that behaves like DeepSeek
Harness with the bridge plugin: it keeps a model-visible surface of v4 nodes,
meters tokens, tells the daemon about user messages (`agent/inbox/inserted`),
asks before every model step (`agent/pre-step`), applies the compaction it is
answered with (the checkpoint replaces the archived span) and reports it
(`archive/commit`), keeps the system-prompt sections, and — standing in for the
model — answers the memory task block by calling `memory_judge`.

Token metering is an estimate (about 3 characters a token, as the daemon's own
estimator for unmeasured nodes), so the simulation is deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from rofmd.host.client import RofmdClient, RpcError

ID_RE = re.compile(r"id=(mem-\d{8}T\d{6}Z-\d{4,})")
REVIEW_HEADING = "### 待复核"


def estimate_tokens(message: dict[str, Any]) -> int:
    """The host meter stand-in: ~3 characters a token, at least 1."""
    chars = 0
    for block in message.get("content", []):
        if not isinstance(block, dict):
            continue
        for key in ("text", "arguments"):
            value = block.get(key)
            if isinstance(value, str):
                chars += len(value)
        if block.get("type") == "image":
            chars += 255 * 3
    return max(1, chars // 3)


@dataclass
class Node:
    """One surface node (PROTOCOL.md §4 `SurfaceNode`)."""

    seq: int
    type: str
    time: int
    turn: int
    message: dict[str, Any]
    tokens: int

    def wire(self) -> dict[str, Any]:
        """The node as the protocol sends it."""
        return {
            "seq": self.seq,
            "type": self.type,
            "time": self.time,
            "turn": self.turn,
            "message": self.message,
        }


@dataclass
class StepReport:
    """What one pre-step did."""

    turn: int
    step: int
    before_tokens: int
    after_tokens: int
    compaction: dict[str, Any] | None
    warnings: list[str]


@dataclass
class JudgeReport:
    """What one scripted scoring call did."""

    ids: list[str]
    result: dict[str, Any]
    text: str


Scorer = Callable[[str, str, bool], dict[str, Any]]
"""(folder id, item text from the task block, is re-review) → a memory_judge update."""


@dataclass
class HostSim:
    """The host side of one session."""

    client: RofmdClient
    session: dict[str, Any]
    context_window: int
    scorer: Scorer | None = None
    surface: list[Node] = field(default_factory=list)
    next_seq: int = 0
    turn: int = 0
    step: int = 0
    sections: dict[str, str] = field(default_factory=dict)
    steps: list[StepReport] = field(default_factory=list)
    recalls: list[dict[str, Any]] = field(default_factory=list)
    judges: list[JudgeReport] = field(default_factory=list)
    archived_folders: list[str] = field(default_factory=list)
    # Replaying a real log, node seqs come from the log; checkpoint nodes we create then
    # take seqs from this separate range so they can never collide with later events.
    checkpoint_seq_base: int | None = None
    _msg_counter: int = 0
    _checkpoints: int = 0

    # ---- surface ----------------------------------------------------------------

    def _next_id(self, prefix: str) -> str:
        self._msg_counter += 1
        return f"{prefix}-{self._msg_counter:05d}"

    def add(
        self, node_type: str, message: dict[str, Any], time_ms: int, *, seq: int | None = None
    ) -> Node:
        """Append a node to the surface (a `surfaceOp: "append"` event)."""
        if seq is None:
            seq = self.next_seq
        self.next_seq = max(self.next_seq, seq + 1)
        node = Node(seq, node_type, time_ms, self.turn, message, estimate_tokens(message))
        self.surface.append(node)
        return node

    def _checkpoint_seq(self) -> int:
        if self.checkpoint_seq_base is None:
            seq = self.next_seq
            self.next_seq += 1
            return seq
        self._checkpoints += 1
        return self.checkpoint_seq_base + self._checkpoints

    def replace_span(self, start: int, end: int, node: Node) -> bool:
        """Replace the surface span from seq `start` to seq `end` (by position) with `node`.

        Positions, not seq order: a checkpoint node carries a new seq but sits where
        the span it replaced was. False (nothing changed) when an end is not on the
        surface any more.
        """
        seqs = [n.seq for n in self.surface]
        if start not in seqs or end not in seqs:
            return False
        first, last = seqs.index(start), seqs.index(end)
        if last < first:
            return False
        self.surface = [*self.surface[:first], node, *self.surface[last + 1 :]]
        return True

    def total_tokens(self) -> int:
        """Metered context size: the surface plus the system-prompt sections."""
        section_tokens = sum(len(t) for t in self.sections.values()) // 3
        return sum(n.tokens for n in self.surface) + section_tokens

    def _apply_sections(self, answer: dict[str, Any]) -> None:
        for section in answer.get("sections", []):
            self.sections[section["name"]] = section.get("text", "")

    # ---- host events ------------------------------------------------------------

    async def user_says(self, text: str, time_ms: int, *, source: str = "user") -> dict[str, Any]:
        """A user message lands in the inbox: the daemon may recall before the model thinks."""
        message = {
            "id": self._next_id("u"),
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": source},
        }
        return await self.user_message(message, time_ms)

    async def user_message(
        self, message: dict[str, Any], time_ms: int, *, seq: int | None = None
    ) -> dict[str, Any]:
        """A user turn starts with `message`: append it and tell the daemon's inbox."""
        self.turn += 1
        self.step = 0
        self.add("user/message", message, time_ms, seq=seq)
        text = "".join(b.get("text", "") for b in message.get("content", []) if isinstance(b, dict))
        answer: dict[str, Any] = await self.client.call(
            "agent/inbox/inserted", {"session": self.session, "message": message, "time": time_ms}
        )
        self._apply_sections(answer)
        self.recalls.append({"turn": self.turn, "text": text, **answer})
        return answer

    async def pre_step(self, time_ms: int) -> StepReport:
        """Ask the daemon before a model step; apply and commit its compaction."""
        self.step += 1
        before = self.total_tokens()
        answer: dict[str, Any] = await self.client.call(
            "agent/pre-step",
            {
                "session": self.session,
                "turn": self.turn,
                "step": self.step,
                "messages": [n.message for n in self.surface if n.type == "user/message"][-1:],
                "context": {
                    "totalTokens": before,
                    "contextWindow": self.context_window,
                    "nodes": [{"seq": n.seq, "tokens": n.tokens} for n in self.surface],
                },
                "surface": [n.wire() for n in self.surface],
            },
        )
        self._apply_sections(answer)
        compaction = answer.get("compaction")
        if compaction:
            self._apply_compaction(compaction, time_ms)
            await self.client.call(
                "archive/commit", {"session": self.session, "token": compaction["token"]}
            )
            self.archived_folders.extend(compaction.get("folders", []))
        report = StepReport(
            self.turn,
            self.step,
            before,
            self.total_tokens(),
            compaction,
            list(answer.get("warnings", [])),
        )
        self.steps.append(report)
        return report

    def _apply_compaction(self, compaction: dict[str, Any], time_ms: int) -> None:
        """The checkpoint transaction: the whole `replace` span becomes one checkpoint message.

        (Pinned context inside the span is the host's to re-inject; the daemon has
        already copied one-shot notices into the note's appendix.)
        """
        rng = compaction["replace"]
        start, end = int(rng["startSeq"]), int(rng["endSeq"])
        note = {
            "id": self._next_id("ckpt"),
            "role": "user",
            "content": compaction["checkpoint"]["content"],
            "source": {"kind": "compact-checkpoint"},
        }
        node = Node(
            self._checkpoint_seq(), "user/message", time_ms, self.turn, note, estimate_tokens(note)
        )
        if not self.replace_span(start, end, node):
            raise RuntimeError(f"compaction span {start}..{end} is not on the surface")

    async def assistant_says(
        self, text: str, time_ms: int, *, tool_calls: Sequence[tuple[str, dict[str, Any], str]] = ()
    ) -> StepReport:
        """One model step: pre-step first, then the assistant message and any tool results."""
        report = await self.pre_step(time_ms)
        await self.answer_tasks()
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        results = []
        for name, args, output in tool_calls:
            call_id = self._next_id("call")
            content.append(
                {
                    "type": "tool-call",
                    "id": call_id,
                    "name": name,
                    "arguments": orjson.dumps(args).decode(),
                }
            )
            results.append((call_id, output))
        self.add(
            "assistant/message",
            {
                "id": self._next_id("a"),
                "role": "assistant",
                "content": content,
                "source": {"kind": "model"},
            },
            time_ms,
        )
        for call_id, output in results:
            self.add(
                "tool/result",
                {
                    "id": self._next_id("t"),
                    "role": "tool",
                    "toolCallId": call_id,
                    "content": [{"type": "text", "text": output}],
                    "source": {"kind": "tool"},
                },
                time_ms,
            )
        return report

    # ---- the model's part: the task block ---------------------------------------

    async def answer_tasks(self) -> JudgeReport | None:
        """Score every item the task block lists, the way a cooperative model would."""
        block = self.sections.get("dsh-rofm:memory-tasks", "")
        if self.scorer is None or "id=mem-" not in block:
            return None
        review_at = block.find(REVIEW_HEADING)
        items = list(ID_RE.finditer(block))
        updates = []
        for i, match in enumerate(items):
            end = items[i + 1].start() if i + 1 < len(items) else len(block)
            review = review_at != -1 and match.start() > review_at
            updates.append(self.scorer(match.group(1), block[match.end() : end], review))
        if not updates:
            return None
        try:
            result: dict[str, Any] = await self.client.call(
                "tools/call",
                {
                    "session": self.session,
                    "turn": self.turn,
                    "callId": self._next_id("judge"),
                    "name": "memory_judge",
                    "arguments": {"updates": updates},
                },
            )
        except RpcError as exc:
            result = {"isError": True, "content": [{"type": "text", "text": str(exc)}]}
        self._apply_sections(result)
        text = "".join(c.get("text", "") for c in result.get("content", []))
        report = JudgeReport([u["id"] for u in updates], result, text)
        self.judges.append(report)
        return report

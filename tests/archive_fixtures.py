"""Realistic DSH v4 surfaces for the archive tests (engine and end to end)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.archive.tokens import MESSAGE_OVERHEAD, estimate_text_tokens

T0 = 1_791_311_000_000
"""A fixed epoch-ms start time for surfaces."""


def node_text(node: dict[str, Any]) -> str:
    msg = node["message"]
    out = []
    for block in msg.get("content", []):
        if block.get("type") in ("text", "reasoning"):
            out.append(block["text"])
        elif block.get("type") == "tool-call":
            out.append(block["name"] + block["arguments"])
    return "\n".join(out)


@dataclass
class Surface:
    """Builds a model-visible surface node by node (seq contiguous unless skipped)."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    seq: int = 0
    time: int = T0
    turn: int = 0

    def _add(self, ntype: str, message: dict[str, Any], turn: int | None = None) -> dict[str, Any]:
        node = {
            "seq": self.seq,
            "type": ntype,
            "time": self.time,
            "turn": self.turn if turn is None else turn,
            "message": message,
        }
        self.nodes.append(node)
        self.seq += 1
        self.time += 1000
        return node

    def system(self, text: str = "You are a helpful agent.") -> dict[str, Any]:
        return self._add(
            "system/message",
            {
                "id": f"m{self.seq}",
                "role": "system",
                "content": [{"type": "text", "text": text}],
                "source": {"kind": "system-prompt"},
            },
        )

    def user(self, text: str, images: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        self.turn += 1
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for att in images or []:
            content.append({"type": "image", "attachment": att})
        return self._add(
            "user/message",
            {"id": f"m{self.seq}", "role": "user", "content": content, "source": {"kind": "user"}},
        )

    def assistant(
        self, text: str, calls: list[tuple[str, str, str]] | None = None
    ) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "reasoning", "text": "thinking"}]
        if text:
            content.append({"type": "text", "text": text})
        for cid, name, args in calls or []:
            content.append({"type": "tool-call", "id": cid, "name": name, "arguments": args})
        return self._add(
            "assistant/message",
            {
                "id": f"m{self.seq}",
                "role": "assistant",
                "content": content,
                "source": {"kind": "model"},
            },
        )

    def tool(self, call_id: str, text: str) -> dict[str, Any]:
        return self._add(
            "tool/result",
            {
                "id": f"m{self.seq}",
                "role": "tool",
                "toolCallId": call_id,
                "content": [{"type": "text", "text": text}],
                "source": {"kind": "tool"},
            },
        )

    def pinned(self, kind: str, text: str, ntype: str = "user/message") -> dict[str, Any]:
        return self._add(
            ntype,
            {
                "id": f"m{self.seq}",
                "role": "user" if ntype == "user/message" else "system",
                "content": [{"type": "text", "text": text}] if text else [],
                "source": {"kind": kind},
            },
        )

    def checkpoint(self, text: str) -> dict[str, Any]:
        return self.pinned("compact-checkpoint", text)

    def turn_pair(self, i: int, size: int = 200) -> None:
        """One user turn with a tool call and an answer, ~size chars each."""
        self.user(f"第{i}个问题：请帮我看看配置文件。" + "内容" * (size // 2))
        self.assistant("我来读取文件。", [(f"call-{i}", "read_file", '{"path":"a.txt"}')])
        self.tool(f"call-{i}", f"file {i}: " + "x" * size)
        self.assistant(f"第{i}个回答：配置没问题。" + "好的" * (size // 2))

    def tokens(self) -> list[dict[str, int]]:
        return [
            {"seq": n["seq"], "tokens": estimate_text_tokens(node_text(n)) + MESSAGE_OVERHEAD}
            for n in self.nodes
        ]

    def total(self) -> int:
        return sum(t["tokens"] for t in self.tokens())


def pre_step_params(
    s: Surface,
    *,
    session: str = "sess-a",
    window: int | None = None,
    percent: float = 70.0,
    extra: int = 0,
    step: int = 1,
    session_extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Params whose context sits at ``percent`` of the window (window derived if None)."""
    total = s.total() + extra
    if window is None:
        window = int(total * 100 / percent)
    sess: dict[str, Any] = {"id": session}
    sess.update(session_extra or {})
    return {
        "session": sess,
        "turn": s.turn,
        "step": step,
        "messages": [],
        "context": {"totalTokens": total, "contextWindow": window, "nodes": s.tokens()},
        "surface": s.nodes,
    }


def floored_params(s: Surface, sid: str, *, percent: float = 70.0, **kw: Any) -> dict[str, Any]:
    """Pre-step params whose context sits at ``percent`` of a window of at least 40k
    tokens (below that the small-window guard skips archiving): the node tokens are
    scaled so the conversation is the whole context."""
    p = pre_step_params(s, session=sid, **kw)
    total = p["context"]["totalTokens"]
    window = max(40_000, int(total * 100 / percent))
    p["context"]["contextWindow"] = window
    p["context"]["totalTokens"] = int(window * percent / 100)
    k = p["context"]["totalTokens"] / total
    for n in p["context"]["nodes"]:
        n["tokens"] = max(1, int(n["tokens"] * k))
    return p

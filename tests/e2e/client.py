"""A test client of a daemon started by `tests.e2e.harness`: one initialised connection
whose request ids count up and whose answers must be results (an error answer fails
the test where it happened)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from tests.e2e.harness import DaemonProcess, LineSocket

FULL_CAPS = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}


class Client:
    """``tool_turn`` / ``message_turn``: the turn tool calls and user messages carry
    (None: user messages carry none, as a host that does not count turns)."""

    def __init__(
        self,
        d: DaemonProcess,
        *,
        caps: Mapping[str, bool] = FULL_CAPS,
        tool_turn: int = 1,
        message_turn: int | None = None,
    ) -> None:
        self.d = d
        self.sock = LineSocket(d.socket_path, timeout=60)
        self.n = 0
        self.tool_turn = tool_turn
        self.message_turn = message_turn
        self.init = self.call("initialize", {"protocolVersion": 1, "capabilities": dict(caps)})

    def call(self, method: str, params: Any) -> Any:
        self.n += 1
        answer = self.sock.call(self.n, method, params)
        assert "result" in answer, answer
        return answer["result"]

    def tool(self, sid: str, name: str, arguments: Any, turn: int | None = None) -> Any:
        params = {
            "session": {"id": sid},
            "turn": self.tool_turn if turn is None else turn,
            "callId": f"c{self.n}",
        }
        return self.call("tools/call", {**params, "name": name, "arguments": arguments})

    def recall(self, sid: str, **arguments: Any) -> Any:
        return self.tool(sid, "memory_recall", arguments)

    def ask(self, sid: str, text: str, kind: str = "user") -> Any:
        """A user message (`agent/inbox/inserted`): the automatic recall's answer."""
        message = {
            "id": f"u{self.n}",
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": kind},
        }
        params: dict[str, Any] = {"session": {"id": sid}, "message": message}
        if self.message_turn is not None:
            params["turn"] = self.message_turn
        return self.call("agent/inbox/inserted", params)

    def configure(self, config: dict[str, Any]) -> None:
        """Write the user config and reload it (it must load)."""
        (self.d.config_dir / "config.json").write_bytes(orjson.dumps(config))
        reloaded = self.call("config/reload", {})
        assert reloaded["ok"], reloaded

    def close(self) -> None:
        self.sock.close()

"""Characterization of every message → text reader (`engine.content` and its users).

The readers' outputs over a table of varied messages (`tests.engine.content_cases`)
were pinned in ``tests/fixtures/content_render.golden.txt`` before they shared one
walk; these tests hold them to it byte for byte: the archive surface text goes into
folders on disk, the scoring view into the judge prompt, and any drift would change
persisted data or what the model reads. The last test shows the table can tell each
option of each view apart, so a view wired with a wrong option fails here.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from engine import assistant_keywords as ak
from engine import content
from engine.archive.surface import parse_surface
from engine.scoring.readable import conversation_lines, flat_text, readable_text
from engine.timeexpr import tags
from tests.engine.content_cases import CONTENTS, messages

GOLDEN: dict[str, Any] = ast.literal_eval(
    (Path(__file__).parent.parent / "fixtures" / "content_render.golden.txt").read_text("utf-8")
)
CASES = messages()
NODE_TYPES = {"user": "user/message", "assistant": "assistant/message", "tool": "tool/result"}


def _surface(msg: dict[str, Any]) -> dict[str, Any]:
    role = msg.get("role")
    node_type = NODE_TYPES.get(role, "user/message") if isinstance(role, str) else "user/message"
    node = parse_surface([{"seq": 1, "type": node_type, "message": msg}])[0]
    parts: list[Any] = []
    for kind, value in node.parts:
        if kind == "text":
            parts.append(["text", value])
        else:
            parts.append(["image", value.index, dict(value.attachment), value.host_path])
    return {
        "parts": parts,
        "text": node.text(),
        "text_named": node.text({0: "named-0.png", 2: "named-2.png"}),
        "calls": list(node.tool_call_ids),
        "cls": node.cls,
    }


def _outputs(msg: dict[str, Any]) -> dict[str, Any]:
    readable = readable_text([msg])
    return {
        "live": content.message_text(msg, content.LIVE),
        "archived": content.message_text(msg, content.ARCHIVED),
        "surface": _surface(msg),
        "readable": [readable.text, readable.kind],
        "lines": conversation_lines([msg]),
        "flat": flat_text([msg]),
        "reply": ak._reply_text(msg.get("message", msg) if "role" not in msg else msg),
        "said": ak.assistant_keywords([msg]),
        "tags_text": tags._text(msg),
    }


def test_the_table_is_the_pinned_one() -> None:
    assert sorted(name for name, _ in CASES) == sorted(GOLDEN["cases"])


@pytest.mark.parametrize(("name", "msg"), CASES, ids=[name for name, _ in CASES])
def test_every_reader_gives_the_pinned_output(name: str, msg: dict[str, Any]) -> None:
    assert _outputs(msg) == GOLDEN["cases"][name]


def test_readers_over_all_messages_at_once_keep_order_and_output() -> None:
    every = [msg for _, msg in CASES]
    readable = readable_text(every)
    assert {
        "lines": conversation_lines(every),
        "flat": flat_text(every),
        "readable": [readable.text, readable.kind],
        "said": ak.assistant_keywords(every),
    } == GOLDEN["all"]


VIEWS = {
    name: getattr(content, name)
    for name in ("LIVE", "ARCHIVED", "SURFACE", "CONVERSATION", "EVERY_TEXT", "REPLY", "ANY_TEXT")
}


def _render(view: content.View) -> list[Any]:
    out: list[Any] = []
    for _, value in CONTENTS:
        parts = content.content_parts(value, view)
        out.append([p if isinstance(p, str) else (p.index, dict(p.attachment)) for p in parts])
    for _, msg in CASES:
        out.append(content.message_text(msg, view))
    return out


def _other_values(field: dataclasses.Field[Any], value: Any) -> list[Any]:
    if isinstance(value, bool):
        return [not value]
    choices = {"text_of": ("text", "untyped", "any"), "tool_calls": ("skip", "name", "line")}
    return [v for v in choices[field.name] if v != value]


@pytest.mark.parametrize("view_name", sorted(VIEWS))
def test_each_option_of_each_view_shows_in_the_table(view_name: str) -> None:
    view = VIEWS[view_name]
    pinned = _render(view)
    for field in dataclasses.fields(view):
        for other in _other_values(field, getattr(view, field.name)):
            changed = dataclasses.replace(view, **{field.name: other})
            assert _render(changed) != pinned, f"{view_name}.{field.name}={other!r} is not seen"

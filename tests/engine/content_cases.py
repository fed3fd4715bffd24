"""Varied message contents for the renderer's characterization tests
(`tests/engine/test_content_render.py`): every shape a reader of `engine.content` may
meet, live v4 blocks and archived ones, and the odd ones (unknown block types, wrong
value types, lone surrogates, nested content, JSON chat payloads, protocol lines).

The outputs these give, per reader, are pinned in
``tests/fixtures/content_render.golden.txt``, written from the readers as they were
before they shared one walk.
"""

from __future__ import annotations

from typing import Any

CONTENTS: list[tuple[str, Any]] = [
    ("none", None),
    ("empty-string", ""),
    ("string", "plain words"),
    ("padded-string", "  padded \n text  "),
    ("number", 42),
    ("bool", True),
    ("dict", {"type": "text", "text": "a dict, not a list"}),
    ("empty-list", []),
    ("bare-strings", ["bare one", "", "bare two"]),
    (
        "text-blocks",
        [
            {"type": "text", "text": "first"},
            {"type": "text", "text": ""},
            {"type": "text", "text": "second"},
        ],
    ),
    ("untyped-text", [{"text": "no type"}, {"type": None, "text": "type none"}]),
    (
        "text-not-str",
        [{"type": "text", "text": None}, {"type": "text", "text": 7}, {"type": "text"}],
    ),
    (
        "reasoning",
        [{"type": "reasoning", "text": "thinking aloud"}, {"type": "text", "text": "said"}],
    ),
    ("unknown-type", [{"type": "weird", "text": "odd block"}, {"type": 3, "text": "numeric type"}]),
    (
        "images",
        [
            {"type": "image", "attachment": {"hostPath": "/tmp/a.png", "name": "a.png"}},
            {"type": "text", "text": "between"},
            {"type": "image"},
            {"type": "image", "attachment": "not a mapping"},
            {"type": "image", "attachment": {"attachmentId": "att-1", "name": ""}},
            {"type": "image", "text": "caption on an image", "attachment": {"name": 5}},
        ],
    ),
    (
        "files",
        [
            {"type": "file", "attachment": {"name": "doc.pdf"}},
            {"type": "file"},
            {"type": "file", "attachment": {}},
            {"type": "file", "attachment": {"attachmentId": "f-9"}},
            {"type": "file", "text": "file text", "attachment": {"name": "b\ud800.txt"}},
        ],
    ),
    (
        "tool-calls",
        [
            {"type": "text", "text": "let me look"},
            {"type": "tool-call", "id": "c1", "name": "read_file", "arguments": '{"path": "a"}'},
            {"type": "tool-call", "id": "c2", "name": "grep", "arguments": {"q": "x", "n": [1, 2]}},
            {"type": "tool-call", "id": 3, "arguments": None},
            {"type": "tool-call", "name": None},
            {"type": "tool-call", "id": "c4", "name": 9, "text": "call text"},
        ],
    ),
    (
        "tool-results",
        [
            {"type": "tool-result", "output": "out text", "result": "res text"},
            {"type": "text", "text": "result text", "output": "more output"},
            {"output": 5, "result": None},
        ],
    ),
    (
        "placeholders",
        [
            "before",
            {"text": "said"},
            {"placeholder": "[图片：（a.png）]"},
            {"text": 5, "placeholder": "ph wins over a non-string text"},
            {"text": "", "placeholder": "empty text wins"},
            {"x": 1},
        ],
    ),
    (
        "typed-placeholders",
        [
            {"type": "text", "placeholder": "[图片：（p.png）]"},
            {"type": "image", "text": None, "placeholder": "[图片：（q.png）]"},
        ],
    ),
    (
        "mixed-junk",
        [None, 5, 2.5, True, ["nested list"], {"type": "text", "text": "kept"}, "bare"],
    ),
    (
        "nested-content",
        [
            {"type": "text", "text": "outer", "content": [{"type": "text", "text": "inner"}]},
            {"type": "tool-result", "content": [{"type": "text", "text": "nested result"}]},
        ],
    ),
    (
        "surrogates",
        [
            {"type": "text", "text": "lone \ud800 half"},
            {"type": "text", "text": "pair \ud83d\ude00"},
        ],
    ),
    ("surrogate-string", "x\udfffy"),
    (
        "chat-payload",
        [
            {
                "type": "text",
                "text": '{"messages": [{"sender": "私聊", "text": "你好"}, {"nickname": "阿明", "text": " 在吗 "}]}',
            }
        ],
    ),
    (
        "embedded-payload",
        [
            {
                "type": "text",
                "text": '快照如下 {"newMessages": [{"senderName": "群友", "text": "开会了"}]} 完毕',
            }
        ],
    ),
    (
        "json-noise",
        [{"type": "text", "text": '{"error": "timeout"}'}, {"type": "text", "text": "[1, 2]"}],
    ),
    (
        "protocol-lines",
        [
            {"type": "text", "text": "[tool-call read {}]"},
            {"type": "text", "text": "[tool-result ok]"},
            {"type": "text", "text": "我决定用 8080 端口\n[tool-added x]\n好的"},
        ],
    ),
    ("decision", "我们决定了：周三上线。"),
    (
        "time-words",
        [{"type": "text", "text": "昨天开了会"}, {"type": "text", "text": "明天 3 点再说"}],
    ),
    (
        "whitespace-parts",
        ["   ", {"type": "text", "text": "\n\t"}, {"type": "text", "text": " x "}, {"text": "  "}],
    ),
]
"""(name, content value), each one `content` of a message."""

ROLES = ("user", "assistant", "tool")

EXTRA_MESSAGES: list[tuple[str, Any]] = [
    ("text-field", {"role": "user", "text": "old writer"}),
    (
        "text-field-and-list",
        {"role": "user", "content": [{"type": "text", "text": "list"}], "text": "field"},
    ),
    ("text-field-and-string", {"role": "user", "content": "string", "text": "field"}),
    ("text-field-not-str", {"role": "user", "text": 12}),
    ("text-field-content-none", {"role": "user", "content": None, "text": "field"}),
    ("no-content", {"role": "assistant"}),
    ("wrapped", {"message": {"role": "user", "content": "wrapped words"}}),
    (
        "wrapped-with-role",
        {"role": "assistant", "content": "outer", "message": {"role": "user", "content": "inner"}},
    ),
    (
        "structural-user",
        {"role": "user", "source": {"kind": "runtime-context"}, "content": "host context"},
    ),
    ("system", {"role": "system", "content": "system words"}),
    ("developer", {"role": "developer", "content": [{"type": "text", "text": "dev words"}]}),
]
"""(name, message) beyond one message per content and role."""


def messages() -> list[tuple[str, dict[str, Any]]]:
    """Every case as a message: each content under each role, then the extras."""
    out: list[tuple[str, dict[str, Any]]] = []
    for name, content in CONTENTS:
        for role in ROLES:
            out.append((f"{name}/{role}", {"role": role, "content": content}))
    out.extend(EXTRA_MESSAGES)
    return out

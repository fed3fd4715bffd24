"""A message's content as text: the one walk over content blocks that every reader
shares (recall, the inbox, the session-log readers, archiving, the scoring view, the
assistant-keywords channel and the time tags).

Two shapes reach the engine. A live v4 message (the host's) carries `content` as a
string or a list of typed blocks, of which only `{"type": "text"}` blocks are what
someone wrote; image, file, tool-call and reasoning blocks are not text. An archived
message (`context.json`) holds what archiving rendered: strings, text blocks, image and
file placeholders (`{"placeholder": …}`), or a bare `text` field from older writers.

The readers differ in what they must see, and each difference is an option of
:class:`View` (why it exists is in its docstring); the readers' views are the named
constants below, one each, so a reader never walks blocks itself:

* :data:`LIVE`: what the user or model wrote in a live message (recall's query text, the
  inbox, the session-log note reader).
* :data:`ARCHIVED`: what archiving stored (the recall block's entries).
* :data:`SURFACE`: a live message rendered for archiving (`engine.archive.surface`):
  images as :class:`ImageBlock` parts, files and tool calls as placeholder lines.
* :data:`CONVERSATION` and :data:`EVERY_TEXT`: the scoring view of archived messages
  (`engine.scoring.readable`): the conversation, and every text for the
  no-conversation fallback.
* :data:`REPLY`: an assistant reply's text parts (`engine.assistant_keywords`).
* :data:`ANY_TEXT`: every block's text, for the time tags (`engine.timeexpr.tags`).

A block list is a list or a tuple (JSON arrays decode to lists; the walks this one
replaced disagreed on tuples, which no JSON input makes); any other value that is not
a string has no content. Parts come in block order; a message's text joins them
with newlines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from engine import texts
from engine.scoring.budget import to_well_formed

__all__ = [
    "ANY_TEXT",
    "ARCHIVED",
    "CONVERSATION",
    "EVERY_TEXT",
    "LIVE",
    "REPLY",
    "SURFACE",
    "ImageBlock",
    "View",
    "attachment_name",
    "content_parts",
    "image_blocks",
    "message_text",
    "text_parts",
    "unwrapped",
]

TextOf = Literal["text", "untyped", "any"]
ToolCalls = Literal["skip", "name", "line"]


@dataclass(frozen=True, slots=True)
class View:
    """How one reader turns content blocks into parts."""

    strings: bool = False
    """Bare strings in a block list are text. Archived messages hold them (older writers
    stored a message's parts so); a live v4 block list never does, and archiving, which
    reads live blocks only, skips them."""
    text_of: TextOf = "text"
    """Which blocks' `text` is read: ``"text"``, only `type: "text"` blocks (live: an
    image, tool-call or reasoning block's `text` is not something said); ``"untyped"``,
    those and blocks without a `type` key (archived text blocks of older writers carry
    none; a block whose `type` is anything else, null included, is not text); ``"any"``,
    every block's (archived blocks are rendered already: whatever has a text is it)."""
    placeholders: bool = False
    """A block read for text whose `text` is not a string gives its `placeholder`
    instead: the archived image and file placeholders (`engine.archive.images`)."""
    tool_output: bool = False
    """A block's `output` and `result` strings are parts too, after its text: tool
    results in the reference writer's shape, read only where tool output counts (the
    no-conversation fallback of the scoring view)."""
    tool_calls: ToolCalls = "skip"
    """What a `tool-call` block gives besides its text: ``"skip"``, nothing (not
    something said); ``"name"``, ``[tool-call NAME]`` (the fallback text of a folder
    that has no conversation: which tools ran, not their arguments); ``"line"``,
    :data:`engine.texts.ARCHIVE_TOOL_CALL` with its name (``?`` when not a string)
    and arguments (JSON when not a string), as archiving stores it."""
    images: bool = False
    """Image blocks become :class:`ImageBlock` parts, numbered in block order (archiving
    copies the files and names the placeholders). Without it they give nothing."""
    files: bool = False
    """File blocks become :data:`engine.texts.ARCHIVE_FILE_PLACEHOLDER` lines naming the
    attachment (archiving keeps the name, not the file)."""
    drop_empty: bool = False
    """Empty text parts are left out: archiving stores no empty part, and a string
    content that is empty renders to nothing (a node that renders to nothing is
    droppable, reference §1.8 A). Elsewhere an empty part stays (it shows as an empty
    line in a joined text)."""
    well_formed: bool = False
    """Text parts have their surrogate pairs joined and lone halves replaced
    (`engine.scoring.budget.to_well_formed`): what archiving stores must encode as
    UTF-8 JSON. The other readers pass text on as it is (theirs is made well formed
    where it is written or shown)."""
    text_field: bool = False
    """A message without a block list or string `content` gives its `text` field (older
    writers of archived messages)."""


LIVE = View()
"""A live v4 message: its string content, or its `type: "text"` blocks."""
ARCHIVED = View(strings=True, text_of="any", placeholders=True, text_field=True)
"""An archived message: every string, text and placeholder, or the old `text` field."""
SURFACE = View(
    text_of="text", images=True, files=True, tool_calls="line", drop_empty=True, well_formed=True
)
"""A live surface message as archiving renders it (reasoning, tool additions and
removals are not conversation text)."""
CONVERSATION = View(strings=True, text_of="untyped")
"""The scoring view's conversation parts of an archived message."""
EVERY_TEXT = View(strings=True, text_of="any", tool_output=True, tool_calls="name")
"""Every text of an archived message, tool output and tool names included: the scoring
view's fallback for a folder without conversation."""
REPLY = View(text_of="untyped")
"""An assistant reply's text parts, as the assistant-keywords channel reads them: the
conversation parts without bare strings (a difference kept as it was found: it only
shows in archived messages of older writers)."""
ANY_TEXT = View(text_of="any")
"""Every block's text and nothing else, as the time tags read a message."""


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """An image block of a message, in block order within the message."""

    index: int
    attachment: Mapping[str, Any]

    @property
    def host_path(self) -> str | None:
        value = self.attachment.get("hostPath")
        return value if isinstance(value, str) and value else None


def attachment_name(att: Mapping[str, Any]) -> str:
    """The name an image or file placeholder shows: the attachment's `name`, else its
    `attachmentId`, else ``image``."""
    for key in ("name", "attachmentId"):
        value = att.get(key)
        if isinstance(value, str) and value:
            return to_well_formed(value)
    return "image"


def content_parts(
    content: Any, view: View = LIVE, *, call_ids: list[str] | None = None
) -> list[str | ImageBlock]:
    """The parts of a `content` value under `view`, in block order: strings, and
    :class:`ImageBlock` parts when the view renders images. `call_ids`, when given,
    gets the (string) ids of the tool-call blocks appended, in order: a tool result
    answers one (archiving keeps a call and its result together)."""
    return _parts(content, view, call_ids)


def _parts(content: Any, view: View, call_ids: list[str] | None = None) -> list[Any]:
    # One pass, the view's options read once: the archive planner renders every surface
    # node, and the scoring view every message of a folder.
    if isinstance(content, str):
        if view.drop_empty and not content:
            return []
        return [to_well_formed(content) if view.well_formed else content]
    if not isinstance(content, (list, tuple)):
        return []
    drop_empty, well_formed, strings = view.drop_empty, view.well_formed, view.strings
    any_text, untyped = view.text_of == "any", view.text_of == "untyped"
    placeholders, tool_output, tool_calls = view.placeholders, view.tool_output, view.tool_calls
    images, files = view.images, view.files
    parts: list[Any] = []
    image_index = 0
    for block in content:
        if isinstance(block, str):
            if strings and (block or not drop_empty):
                parts.append(to_well_formed(block) if well_formed else block)
            continue
        if not isinstance(block, Mapping):
            continue
        btype = block.get("type")
        if btype == "text" or any_text or (untyped and "type" not in block):
            text = block.get("text")
            if placeholders and not isinstance(text, str):
                text = block.get("placeholder")
            if isinstance(text, str) and (text or not drop_empty):
                parts.append(to_well_formed(text) if well_formed else text)
        if tool_output:
            for key in ("output", "result"):
                value = block.get(key)
                if isinstance(value, str) and (value or not drop_empty):
                    parts.append(to_well_formed(value) if well_formed else value)
        if btype == "text":
            continue
        line: str | None = None
        if btype == "tool-call":
            if call_ids is not None and isinstance(call_id := block.get("id"), str):
                call_ids.append(call_id)
            if tool_calls == "line":
                line = _tool_call_line(block)
            elif tool_calls == "name":
                line = f"[tool-call {block.get('name', '')}]"
        elif btype == "image" and images:
            att = block.get("attachment")
            parts.append(ImageBlock(image_index, att if isinstance(att, Mapping) else {}))
            image_index += 1
        elif btype == "file" and files:
            att = block.get("attachment")
            name = attachment_name(att) if isinstance(att, Mapping) else "file"
            line = texts.ARCHIVE_FILE_PLACEHOLDER.format(name=name)
        if line is not None:
            parts.append(to_well_formed(line) if well_formed else line)
    return parts


def _tool_call_line(block: Mapping[str, Any]) -> str:
    args = block.get("arguments", "")
    if not isinstance(args, str):
        args = orjson.dumps(args).decode()
    name = block.get("name")
    return texts.ARCHIVE_TOOL_CALL.format(
        name=name if isinstance(name, str) else "?", arguments=args
    )


def text_parts(content: Any, view: View = LIVE) -> list[str]:
    """The text parts of a `content` value under `view` (image parts left out)."""
    parts = _parts(content, view)
    return [p for p in parts if isinstance(p, str)] if view.images else parts


def unwrapped(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """The message `raw` wraps as ``{"message": {...}}`` (without a `role` of its own:
    an event's data), else `raw` itself."""
    inner = raw.get("message")
    if "role" not in raw and isinstance(inner, Mapping):
        return inner
    return raw


def message_text(message: Mapping[str, Any], view: View = LIVE) -> str:
    """The message's text under `view`, its text parts joined by newlines ("" when it has
    none)."""
    content = message.get("content")
    if view.text_field and not isinstance(content, str | list | tuple):
        text = message.get("text")
        return text if isinstance(text, str) else ""
    return "\n".join(text_parts(content, view))


def image_blocks(content: Any) -> list[ImageBlock]:
    """The image blocks of a `content` value that archiving renders (:data:`SURFACE`),
    in order: the images whose files it copies."""
    return [p for p in _parts(content, SURFACE) if isinstance(p, ImageBlock)]

"""Boundary models of the protocol's parameters (PROTOCOL.md §3, §4).

Unknown fields are allowed everywhere: the host may grow its payloads, and a
newer bridge must keep working against this daemon.

Every value a handler uses is bounded here, before anything reaches the engine or
the store (issue 18, "nothing leaked"): a bad value is -32602 with its field path,
never an internal error after a commit.

- Integers are JSON integers (an integral float such as ``5.0`` is taken as 5;
  booleans, strings, fractions, NaN and infinities are refused) inside
  ``[0, 2**53 - 1]``, the integers a JavaScript host can represent exactly, so
  every value the daemon derives from them stays inside orjson's 64 bits.
- Token counts are at most ``2**32 - 1`` each and arrays of nodes at most
  ``MAX_NODES`` long, so a sum of tokens (``shadowedTokenCount``) stays exact.
- Times are epoch milliseconds in ``[0, MAX_TIME_MS]`` (before 9999-01-01, the
  range Python dates can format in any time zone); a fractional time is rounded
  down.
- Strings and arrays have length caps; free-form JSON (unknown fields, tool-call
  arguments, ``host``) is limited to ``MAX_DEPTH`` levels of nesting (orjson
  refuses to write more than 255, Python recursion gives up near 1000).

Surface nodes and messages are validated as typed dicts: the handlers and the
engine keep reading plain ``dict``s (``node.get("seq")``), with the values checked.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, TypeVar, Union

import orjson
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    GetPydanticSchema,
    PlainValidator,
    Strict,
    StrictBool,
    Tag,
    ValidationError,
    field_validator,
    with_config,
)
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

from engine.config.limits import MAX_SAFE_INTEGER
from engine.store import safe_session_id
from handlers.errors import HandlerError, invalid_params
from handlers.validated_once import recalled

# ---- limits (README "Input limits") --------------------------------------------------

MAX_SAFE_INT = MAX_SAFE_INTEGER
"""Largest seq / turn / step / size: JavaScript's Number.MAX_SAFE_INTEGER."""
MAX_TOKENS = 2**32 - 1
"""Largest token count (a node's, a context's total, a window)."""
MAX_TIME_MS = 253_370_764_800_000
"""9999-01-01T00:00:00Z in epoch milliseconds: the latest time accepted."""
MAX_DEPTH = 64
"""Levels of JSON nesting in one request's params (params itself is level 1)."""
MAX_NODES = 100_000
"""Surface nodes, `context.nodes`, `messages` of one pre-step."""
MAX_BLOCKS = 10_000
"""Content blocks of one message."""
MAX_ARRAY_ITEMS = 100_000
"""Items of any other array."""
MAX_TEXT_CHARS = 8 * 1024 * 1024
"""Code points of one string: a message text, a tool-call's arguments, any key or value."""
MAX_ID_CHARS = 1024
"""Message, tool-call and attachment ids, file names."""
MAX_NAME_CHARS = 256
"""Kinds, roles, types, tool names, origins, presets, media types, host name/version."""
MAX_PATH_CHARS = 4096
"""`session.id`, `session.cwd`, `attachment.hostPath` (PATH_MAX)."""
MAX_REASON_CHARS = 65_536
"""`archive/abort.reason`."""
MAX_LISTED_ERRORS = 100
"""Field problems listed in one -32602 answer."""

# ---- scalar types --------------------------------------------------------------------


def _integral(value: Any) -> Any:
    """An integral float (``5.0``, ``1e300``) becomes an int for the strict int check."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def _millis(value: Any) -> Any:
    """A finite float time is rounded down to whole milliseconds."""
    if type(value) is float and math.isfinite(value):
        return math.floor(value)
    return value


SafeInt = Annotated[int, Strict(), Field(ge=0, le=MAX_SAFE_INT), BeforeValidator(_integral)]
"""A seq, turn, step, size or version: integer in [0, 2**53 - 1]."""
TokenCount = Annotated[int, Strict(), Field(ge=0, le=MAX_TOKENS), BeforeValidator(_integral)]
"""A token count or window: integer in [0, 2**32 - 1]."""
Millis = Annotated[int, Strict(), Field(ge=0, le=MAX_TIME_MS), BeforeValidator(_millis)]
"""Epoch milliseconds in [0, MAX_TIME_MS]."""
IdStr = Annotated[str, Field(max_length=MAX_ID_CHARS)]
NameStr = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
PathStr = Annotated[str, Field(max_length=MAX_PATH_CHARS)]
TextStr = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]


def shaped(schema: type) -> GetPydanticSchema:
    """Validate a plain ``dict`` field against a TypedDict shape (the value stays a dict)."""
    return GetPydanticSchema(lambda _tp, handler: handler(schema))


# ---- v4 messages and surface nodes (PROTOCOL.md §6) ----------------------------------

_TAGS: set[str] = set()
"""Union tags; dropped from field paths (they name a branch, not a field)."""


def _tag(name: str) -> Tag:
    _TAGS.add(name)
    return Tag(name)


@with_config(ConfigDict(extra="allow"))
class SourceShape(TypedDict, total=False):
    """`message.source`: `{kind, form?, plugin?}` (old logs: `{kind:"plugin", plugin}`)."""

    kind: NameStr | None
    form: NameStr | None
    plugin: NameStr | None


@with_config(ConfigDict(extra="allow"))
class AttachmentShape(TypedDict, total=False):
    """`attachment` of an image or file block."""

    attachmentId: IdStr | None
    mediaType: NameStr | None
    bytes: SafeInt | None
    width: SafeInt | None
    height: SafeInt | None
    name: IdStr | None
    hostPath: PathStr | None


@with_config(ConfigDict(extra="allow"))
class TextBlock(TypedDict, total=False):
    """`text {text}`, `reasoning {text}`."""

    type: NameStr
    text: TextStr | None


@with_config(ConfigDict(extra="allow"))
class AttachmentBlock(TypedDict, total=False):
    """`image {attachment}`, `file {attachment}`."""

    type: NameStr
    attachment: AttachmentShape | None


@with_config(ConfigDict(extra="allow"))
class ToolCallBlock(TypedDict, total=False):
    """`tool-call {id, name, arguments}`: arguments a raw JSON string (or any JSON)."""

    type: NameStr
    id: IdStr | None
    name: NameStr | None
    arguments: Any


@with_config(ConfigDict(extra="allow"))
class OtherBlock(TypedDict):
    """Any other block (`tool-addition`, `tool-removal`, newer ones): a typed object."""

    type: NameStr


_BLOCK_TAGS = {
    "text": "(text)",
    "reasoning": "(text)",
    "image": "(attachment)",
    "file": "(attachment)",
    "tool-call": "(tool-call)",
}


def _block_tag(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    btype = value.get("type")
    return _BLOCK_TAGS.get(btype, "(other)") if isinstance(btype, str) else "(other)"


Block = Annotated[
    Union[  # noqa: UP007 - tagged union members carry their tags
        Annotated[TextBlock, _tag("(text)")],
        Annotated[AttachmentBlock, _tag("(attachment)")],
        Annotated[ToolCallBlock, _tag("(tool-call)")],
        Annotated[OtherBlock, _tag("(other)")],
    ],
    Discriminator(
        _block_tag,
        custom_error_type="block_type",
        custom_error_message="a content block must be an object",
    ),
]


def _content_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "(string)"
    if isinstance(value, list):
        return "(blocks)"
    return None


Content = Annotated[
    Union[  # noqa: UP007
        Annotated[TextStr, _tag("(string)")],
        Annotated[list[Block], Field(max_length=MAX_BLOCKS), _tag("(blocks)")],
    ],
    Discriminator(
        _content_tag,
        custom_error_type="content_type",
        custom_error_message="content must be a string or an array of content blocks",
    ),
]


@with_config(ConfigDict(extra="allow"))
class MessageShape(TypedDict, total=False):
    """A v4 message `{id, role, content, source, toolCallId?, isError?}`.

    `message` covers an event `data` object (`{message, turn}`) given in its place.
    """

    id: IdStr | None
    role: NameStr | None
    content: Content | None
    source: SourceShape | None
    toolCallId: IdStr | None
    isError: bool | None
    message: MessageShape | None
    turn: SafeInt | None


@with_config(ConfigDict(extra="allow"))
class SurfaceNodeShape(TypedDict, total=False):
    """A `SurfaceNode` `{seq, type, time, turn, message}` (PROTOCOL.md §4 agent/pre-step)."""

    seq: SafeInt | None
    type: NameStr | None
    time: Millis | None
    turn: SafeInt | None
    message: MessageShape | None


Message = Annotated[dict[str, Any], shaped(MessageShape)]
"""A v4 message, checked against `MessageShape`, handed on as a plain dict."""
SurfaceNode = Annotated[dict[str, Any], shaped(SurfaceNodeShape)]
"""A surface node, checked against `SurfaceNodeShape`, handed on as a plain dict."""


@with_config(ConfigDict(extra="allow"))
class HostShape(TypedDict, total=False):
    """`initialize.host`: `{name, version}`."""

    name: NameStr | None
    version: NameStr | None


HostInfo = Annotated[dict[str, Any], shaped(HostShape)]


# ---- JSON shape of free-form values ---------------------------------------------------


def json_shape_errors(value: Any, prefix: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Nesting, string and array limits over any JSON value; the first problem found.

    Iterative (a deep value must not be able to exhaust the Python stack). Applied to
    the whole params of every request, so free-form parts (unknown fields, tool-call
    arguments, `host`) can always be written back by orjson. A value that
    :func:`surely_within_shape_limits` clears has no problem to find: the walk (a few ms
    over a 500 KB surface) runs only for the others, and finds what it always found.
    """
    if surely_within_shape_limits(value):
        return []
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, prefix)]
    depth_base = len(prefix)
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if len(item) > MAX_TEXT_CHARS:
                return [_shape_error(path, f"longer than {MAX_TEXT_CHARS} characters", "too_long")]
            continue
        if not isinstance(item, dict | list):
            continue
        if len(path) - depth_base >= MAX_DEPTH:
            return [_shape_error(path, f"nested deeper than {MAX_DEPTH} levels", "too_deep")]
        if isinstance(item, list):
            if len(item) > MAX_ARRAY_ITEMS:
                return [_shape_error(path, f"more than {MAX_ARRAY_ITEMS} items", "too_long")]
            stack.extend((v, (*path, str(i))) for i, v in enumerate(item) if _container(v))
            continue
        for k, v in item.items():
            if len(k) > MAX_TEXT_CHARS:
                return [_shape_error(path, f"a key longer than {MAX_TEXT_CHARS}", "too_long")]
            if _container(v):
                stack.append((v, (*path, k)))
    return []


_DEEP_LINE = b"\n" + b" " * (2 * MAX_DEPTH)
"""In orjson's 2-space indented form a value inside k containers starts a line indented
2k spaces, and raw newlines are never inside strings: this marks a value MAX_DEPTH deep."""


def surely_within_shape_limits(value: Any) -> bool:
    """True only when :func:`json_shape_errors` would find nothing, proved in C: one
    indented orjson encoding (a fraction of a millisecond for 500 KB) bounds every string
    and key (its characters are at most the encoding's bytes), every array (each item
    gets a line of its own) and the nesting (no line indented MAX_DEPTH levels). False
    means "walk it": too big or too deep to tell, or not encodable (nesting beyond
    orjson's 255 levels, a non-string key, an integer beyond 64 bits)."""
    try:
        data = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return False
    return (
        len(data) <= MAX_TEXT_CHARS
        and data.count(b"\n") < MAX_ARRAY_ITEMS
        and _DEEP_LINE not in data
    )


def _container(value: Any) -> bool:
    return isinstance(value, dict | list) or (
        isinstance(value, str) and len(value) > MAX_TEXT_CHARS
    )


def _shape_error(path: tuple[str, ...], message: str, kind: str) -> dict[str, Any]:
    return {"field": ".".join(path) or "params", "message": message, "type": kind}


# ---- common params -------------------------------------------------------------------


class Wire(BaseModel):
    """Base of every params model: extra fields kept, camelCase as on the wire."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Session(Wire):
    """`session` of every session-scoped call; only `id` is required."""

    id: str = Field(min_length=1, max_length=MAX_PATH_CHARS)
    origin: NameStr | None = None
    delegationDepth: SafeInt | None = None
    agentPreset: NameStr | None = None
    cwd: PathStr | None = None

    @field_validator("id")
    @classmethod
    def _memory_key_is_safe(cls, value: str) -> str:
        """Refuse ids that cannot name a memory directory (`.`, `..`, …) up front."""
        safe_session_id(value)
        return value

    @property
    def is_subagent(self) -> bool:
        """PROTOCOL.md §3: origin "subagent" or a positive delegation depth."""
        return self.origin == "subagent" or (self.delegationDepth or 0) > 0


class NoParams(Wire):
    """Methods that take nothing (extra fields ignored)."""


class OptionalSessionParams(Wire):
    """`ping` may name a session: it then queues behind that session's requests."""

    session: Session | None = None


class SessionParams(Wire):
    """Methods that only name a session."""

    session: Session


class Capabilities(Wire):
    """Host capabilities; a missing one is taken as absent (reference §3.1)."""

    tokenMeter: StrictBool = False
    systemPrompt: StrictBool = False
    tools: StrictBool = False
    attachments: StrictBool = False


class InitializeParams(Wire):
    """`initialize` params."""

    protocolVersion: SafeInt
    host: HostInfo = Field(default_factory=dict)
    capabilities: Capabilities = Field(default_factory=Capabilities)


class SleepParams(Wire):
    """`debug/sleep` (only with the `debug_methods` setting): a controllable slow request."""

    ms: Annotated[int, Strict(), Field(ge=0, le=600_000), BeforeValidator(_integral)]
    session: Session | None = None


# ---- tool-call arguments -------------------------------------------------------------

JSON_STRING_ARGUMENTS: dict[str, tuple[str, ...]] = {"memory_judge": ("updates",)}
"""Tool arguments that the model may also pass as a JSON string, parsed here with orjson
(64-bit integers, finite numbers, bounded nesting) so no other parser ever sees them; a
string that is not JSON is dropped, which the tool answers as a missing argument."""


def _arguments(value: Any) -> dict[str, Any] | str | None:
    """`tools/call.arguments`: an object, or a JSON string holding one (parsed here)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise PydanticCustomError(
                "json_invalid", "not valid JSON: {error}", {"error": str(exc)}
            ) from None
        if not isinstance(value, dict):
            raise PydanticCustomError("dict_type", "arguments must be a JSON object")
        return value
    if not isinstance(value, dict):
        raise PydanticCustomError(
            "dict_type", "arguments must be an object or a JSON string holding one"
        )
    return value


ToolArguments = Annotated[dict[str, Any] | str | None, PlainValidator(_arguments)]


def tool_arguments_errors(name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """Parse the JSON-string arguments of `name` in place; shape-check the result."""
    for key in JSON_STRING_ARGUMENTS.get(name, ()):
        raw = arguments.get(key)
        if isinstance(raw, str):
            try:
                arguments[key] = orjson.loads(raw)
            except orjson.JSONDecodeError:
                arguments[key] = None
    return json_shape_errors(arguments, ("arguments",))


# ---- validation entry point ----------------------------------------------------------

M = TypeVar("M", bound=BaseModel)


def field_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """One `{field, message, type}` per problem, with dotted field paths."""
    out: list[dict[str, Any]] = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        parts = [str(p) for p in err.get("loc", ()) if not (isinstance(p, str) and p in _TAGS)]
        loc = ".".join(parts) or "params"
        out.append({"field": loc, "message": err.get("msg", ""), "type": err.get("type", "")})
        if len(out) == MAX_LISTED_ERRORS:
            out.append(
                {
                    "field": "params",
                    "message": f"{exc.error_count() - MAX_LISTED_ERRORS} more problems not listed",
                    "type": "truncated",
                }
            )
            break
    return out


def parse_params(model: type[M], raw: Any) -> M:
    """Validate raw params or raise -32602 listing each field problem. A model's
    ``remembered`` lists (``handlers.validated_once.recalled``) are looked up once, and
    their remembered values skip the shape check."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise HandlerError(
            -32602,
            "invalid params",
            {"errors": [{"field": "params", "message": "params must be an object"}]},
        )
    with recalled(getattr(model, "remembered", {}), raw) as unchecked:
        shape = json_shape_errors(unchecked)
        if shape:
            raise invalid_params(shape)
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            raise invalid_params(field_errors(exc)) from None


__all__ = [
    "MAX_ARRAY_ITEMS",
    "MAX_BLOCKS",
    "MAX_DEPTH",
    "MAX_ID_CHARS",
    "MAX_NAME_CHARS",
    "MAX_NODES",
    "MAX_PATH_CHARS",
    "MAX_REASON_CHARS",
    "MAX_SAFE_INT",
    "MAX_TEXT_CHARS",
    "MAX_TIME_MS",
    "MAX_TOKENS",
    "Capabilities",
    "HostInfo",
    "IdStr",
    "InitializeParams",
    "Message",
    "Millis",
    "NameStr",
    "NoParams",
    "OptionalSessionParams",
    "PathStr",
    "SafeInt",
    "Session",
    "SessionParams",
    "SleepParams",
    "SurfaceNode",
    "TextStr",
    "TokenCount",
    "ToolArguments",
    "Wire",
    "field_errors",
    "json_shape_errors",
    "parse_params",
    "surely_within_shape_limits",
    "tool_arguments_errors",
]

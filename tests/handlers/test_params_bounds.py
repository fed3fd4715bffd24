"""Input validation at the edge (issue 18): every number bounded, every string and array
size-limited, nesting capped; bad input is -32602 naming the field, never a value the
engine or the JSON writer cannot take."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from pydantic import BaseModel

from handlers.errors import HandlerError
from handlers.inbox import InboxParams
from handlers.params import (
    MAX_BLOCKS,
    MAX_DEPTH,
    MAX_ID_CHARS,
    MAX_LISTED_ERRORS,
    MAX_NODES,
    MAX_SAFE_INT,
    MAX_TEXT_CHARS,
    MAX_TIME_MS,
    MAX_TOKENS,
    InitializeParams,
    SessionParams,
    SleepParams,
    json_shape_errors,
    parse_params,
)
from handlers.pre_step import ArchiveAbortParams, PreStepParams
from handlers.tools import ToolCallParams, parse_arguments
from tests.archive_fixtures import Surface, pre_step_params


def surface_params() -> dict[str, Any]:
    s = Surface()
    s.system()
    s.user("看看这张截图", images=[{"attachmentId": "a1", "mediaType": "image/png", "width": 3}])
    for i in range(4):
        s.turn_pair(i, 50)
    return pre_step_params(s, session="bounds")


def errors_of(model: type[BaseModel], raw: Any) -> list[dict[str, Any]]:
    with pytest.raises(HandlerError) as info:
        parse_params(model, raw)
    assert info.value.code == -32602
    assert info.value.data is not None
    errors: list[dict[str, Any]] = info.value.data["errors"]
    return errors


def fields_of(model: type[BaseModel], raw: Any) -> set[str]:
    return {e["field"] for e in errors_of(model, raw)}


def put(raw: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
    target: Any = out
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return out


OUT_OF_RANGE = [1e300, -1e300, 2**64, 2**63, -1, MAX_SAFE_INT + 1, 1.5, True, False, "5"]
"""Never a seq, turn, step or size: beyond 2**53, negative, fractional, bool, string."""
NOT_FINITE = [float("nan"), float("inf"), float("-inf")]


# ---- numbers --------------------------------------------------------------------------


@pytest.mark.parametrize("value", OUT_OF_RANGE + NOT_FINITE)
@pytest.mark.parametrize(
    "path",
    [
        "surface.3.seq",
        "surface.3.turn",
        "surface.1.message.content.1.attachment.width",
        "context.nodes.2.seq",
        "turn",
        "step",
        "session.delegationDepth",
    ],
)
def test_pre_step_integers_out_of_range_are_refused_with_their_path(path: str, value: Any) -> None:
    assert fields_of(PreStepParams, put(surface_params(), path, value)) == {path}


@pytest.mark.parametrize("value", [MAX_TOKENS + 1, 2**53, 1e300, -1, 0.5, True, "100"])
@pytest.mark.parametrize(
    "path", ["context.totalTokens", "context.contextWindow", "context.nodes.0.tokens"]
)
def test_token_counts_are_bounded(path: str, value: Any) -> None:
    assert fields_of(PreStepParams, put(surface_params(), path, value)) == {path}


@pytest.mark.parametrize(
    "value", [MAX_TIME_MS + 1, 1e300, -1, -0.5, True, "1791311000000", *NOT_FINITE]
)
def test_times_are_bounded(value: Any) -> None:
    assert fields_of(PreStepParams, put(surface_params(), "surface.2.time", value)) == {
        "surface.2.time"
    }
    inbox = {"session": {"id": "s"}, "message": {"role": "user"}, "time": value}
    assert fields_of(InboxParams, inbox) == {"time"}


def test_in_range_numbers_pass_and_integral_floats_become_ints() -> None:
    raw = surface_params()
    raw = put(raw, "surface.2.seq", float(MAX_SAFE_INT - 1))
    raw = put(raw, "surface.2.time", float(MAX_TIME_MS) - 0.5)
    raw = put(raw, "surface.3.time", 1_791_311_000_123.75)
    raw = put(raw, "context.totalTokens", float(MAX_TOKENS))
    p = parse_params(PreStepParams, raw)
    assert p.surface[2]["seq"] == MAX_SAFE_INT - 1 and type(p.surface[2]["seq"]) is int
    assert p.surface[2]["time"] == MAX_TIME_MS - 1  # rounded down to whole milliseconds
    assert p.surface[3]["time"] == 1_791_311_000_123
    assert p.context is not None and p.context.totalTokens == MAX_TOKENS
    # everything the daemon could answer with from these values is encodable
    orjson.dumps(p.model_dump())


def test_the_minimal_case_of_the_issue_is_a_field_error() -> None:
    """`"seq": 1e300` on a surface node: once committed, then unwritable; now -32602."""
    raw = put(surface_params(), "surface.4.seq", 1e300)
    (err,) = errors_of(PreStepParams, raw)
    assert err["field"] == "surface.4.seq"
    assert "9007199254740991" in err["message"]


def test_valid_surfaces_pass_unchanged_as_plain_dicts() -> None:
    raw = surface_params()
    raw["surface"][1]["hostExtra"] = {"nested": [1, 2, {"x": None}]}
    raw["surface"][1]["message"]["content"].append({"type": "tool-addition", "tools": [1]})
    p = parse_params(PreStepParams, copy.deepcopy(raw))
    assert p.surface == raw["surface"]
    assert all(type(n) is dict for n in p.surface)


@pytest.mark.parametrize(
    ("model", "raw", "field"),
    [
        (InboxParams, {"session": {"id": "s"}, "message": {}, "turn": -1}, "turn"),
        (
            InboxParams,
            {"session": {"id": "s"}, "message": {}, "contextWindow": 2**40},
            "contextWindow",
        ),
        (ToolCallParams, {"session": {"id": "s"}, "name": "memory_judge", "turn": 1e300}, "turn"),
        (InitializeParams, {"protocolVersion": True}, "protocolVersion"),
        (InitializeParams, {"protocolVersion": 1e300}, "protocolVersion"),
        (
            InitializeParams,
            {"protocolVersion": 1, "capabilities": {"tools": 1}},
            "capabilities.tools",
        ),
        (SleepParams, {"ms": True}, "ms"),
        (SleepParams, {"ms": 1e300}, "ms"),
    ],
)
def test_other_methods_numbers(model: type[BaseModel], raw: dict[str, Any], field: str) -> None:
    assert fields_of(model, raw) == {field}


# ---- strings, arrays, shapes ------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("surface.2.message.id", "m" * (MAX_ID_CHARS + 1)),
        ("surface.2.message.role", "r" * 257),
        ("surface.2.message.source.kind", "k" * 257),
        ("surface.2.type", "t" * 257),
        ("surface.1.message.content.1.attachment.hostPath", "/" * 4097),
        ("surface.2.message.content.0.text", "x" * (MAX_TEXT_CHARS + 1)),
        ("session.cwd", "/" * 4097),
        ("session.origin", "o" * 257),
    ],
)
def test_strings_are_size_limited(path: str, value: str) -> None:
    assert fields_of(PreStepParams, put(surface_params(), path, value)) == {path}


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("surface.2.message.content", 5, "surface.2.message.content"),
        ("surface.2.message.content.0", "text", "surface.2.message.content.0"),
        ("surface.2.message.content.0.type", 7, "surface.2.message.content.0.type"),
        ("surface.2.message.content.0.text", ["x"], "surface.2.message.content.0.text"),
        ("surface.2.message.source", "user", "surface.2.message.source"),
        ("surface.2.message", [], "surface.2.message"),
        ("surface.2", "node", "surface.2"),
        ("surface", {}, "surface"),
        ("context.nodes", 3, "context.nodes"),
        ("session", "s", "session"),
    ],
)
def test_wrong_types_name_the_field_without_union_branches(
    path: str, value: Any, field: str
) -> None:
    errors = errors_of(PreStepParams, put(surface_params(), path, value))
    assert {e["field"] for e in errors} == {field}
    assert not any("(" in e["field"] for e in errors)


def test_arrays_are_size_limited() -> None:
    raw = surface_params()
    raw["surface"] = [{"seq": i} for i in range(MAX_NODES + 1)]
    assert fields_of(PreStepParams, raw) == {"surface"}
    raw = surface_params()
    raw["surface"][2]["message"]["content"] = [{"type": "text", "text": "x"}] * (MAX_BLOCKS + 1)
    assert fields_of(PreStepParams, raw) == {"surface.2.message.content"}


def test_missing_required_fields() -> None:
    assert fields_of(PreStepParams, {"context": {"totalTokens": 1}}) == {"session"}
    raw = surface_params()
    del raw["context"]["totalTokens"]
    assert fields_of(PreStepParams, raw) == {"context.totalTokens"}
    assert fields_of(ArchiveAbortParams, {"session": {"id": "s"}}) == {"token"}
    assert fields_of(
        ArchiveAbortParams, {"session": {"id": "s"}, "token": "t", "reason": "r" * 70_000}
    ) == {"reason"}


def test_many_problems_are_listed_up_to_a_limit() -> None:
    raw = surface_params()
    raw["surface"] = [{"seq": -1} for _ in range(500)]
    errors = errors_of(PreStepParams, raw)
    assert len(errors) == MAX_LISTED_ERRORS + 1
    assert errors[-1]["type"] == "truncated" and "400 more" in errors[-1]["message"]


# ---- nesting --------------------------------------------------------------------------


def nest(levels: int) -> Any:
    value: Any = 1
    for i in range(levels):
        value = [value] if i % 2 else {"a": value}
    return value


def test_nesting_is_capped_everywhere_without_recursion() -> None:
    # params itself is level 1, so an unknown top-level field holds MAX_DEPTH - 1 levels
    assert json_shape_errors({"x": nest(MAX_DEPTH - 1)}) == []
    (err,) = json_shape_errors({"x": nest(MAX_DEPTH)})
    assert err["type"] == "too_deep" and err["field"].startswith("x.")
    # far deeper than Python's recursion limit: still one clean error
    (err,) = json_shape_errors({"x": nest(200_000)})
    assert err["type"] == "too_deep"
    assert err["field"].count(".") == MAX_DEPTH - 1


@pytest.mark.parametrize(
    "path",
    [
        "surface.3.message.content.2.arguments",  # a tool-call block's arguments
        "surface.3.extra",  # an unknown field of a node
        "session.extra",
        "messages",
    ],
)
def test_deep_values_anywhere_in_a_pre_step_are_refused(path: str) -> None:
    errors = errors_of(PreStepParams, put(surface_params(), path, nest(300)))
    assert len(errors) == 1 and errors[0]["type"] == "too_deep"
    assert errors[0]["field"].startswith(path + ".")


def test_deep_host_info_is_refused() -> None:
    raw = {"protocolVersion": 1, "host": {"name": "dsh", "x": nest(100)}}
    (err,) = errors_of(InitializeParams, raw)
    assert err["field"].startswith("host.x.")


def test_long_free_form_strings_are_refused() -> None:
    raw = {"session": {"id": "s"}, "note": "x" * (MAX_TEXT_CHARS + 1)}
    assert fields_of(SessionParams, raw) == {"note"}


# ---- tool-call arguments --------------------------------------------------------------


def judge_call(arguments: Any) -> dict[str, Any]:
    return {"session": {"id": "s"}, "name": "memory_judge", "arguments": arguments}


def test_json_string_arguments_are_parsed_with_orjson() -> None:
    p = parse_params(ToolCallParams, judge_call('{"updates": [{"id": "mem-1", "alpha": 0.5}]}'))
    assert p.arguments == {"updates": [{"id": "mem-1", "alpha": 0.5}]}
    assert parse_arguments(p.arguments) == p.arguments


def test_a_json_string_updates_is_parsed_or_dropped() -> None:
    p = parse_params(ToolCallParams, judge_call({"updates": '[{"id": "mem-1", "beta": 2}]'}))
    assert p.arguments == {"updates": [{"id": "mem-1", "beta": 2}]}
    # what only a laxer parser would read (NaN, a 400-digit integer, 1e999) never reaches
    # the tool: it sees no updates, which it answers as a tool error
    for text in ('[{"id": "m", "alpha": NaN}]', '[{"id": "m", "alpha": ' + "9" * 400 + "}]"):
        p = parse_params(ToolCallParams, judge_call({"updates": text}))
        assert p.arguments == {"updates": None}


def test_deep_arguments_are_refused_in_both_forms() -> None:
    deep_text = "[" * 300 + "1" + "]" * 300  # orjson reads up to 1024 levels
    for arguments in ({"updates": nest(300)}, '{"updates": ' + deep_text + "}"):
        (err,) = errors_of(ToolCallParams, judge_call(arguments))
        assert err["type"] == "too_deep" and err["field"].startswith("arguments.updates.")
    (err,) = errors_of(ToolCallParams, judge_call({"updates": deep_text}))
    assert err["field"].startswith("arguments.updates.")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [("{bad", "not valid JSON"), ("[1]", "must be a JSON object"), (5, "an object or a JSON")],
)
def test_bad_arguments(arguments: Any, message: str) -> None:
    (err,) = errors_of(ToolCallParams, judge_call(arguments))
    assert err["field"] == "arguments" and message in err["message"]


def test_tool_name_and_call_id_are_limited() -> None:
    assert fields_of(ToolCallParams, {"session": {"id": "s"}, "name": "n" * 257}) == {"name"}
    raw = {"session": {"id": "s"}, "name": "memory_judge", "callId": "c" * (MAX_ID_CHARS + 1)}
    assert fields_of(ToolCallParams, raw) == {"callId"}

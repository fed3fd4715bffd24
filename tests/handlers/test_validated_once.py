"""Surface nodes are validated once (`handlers.validated_once`), and the shape limits are
proved in C where they surely hold (`surely_within_shape_limits`): neither may change an
answer. Every params value below is compared with what plain validation (nothing
remembered, the walk over every container) makes of it, down to JSON bytes and key
order, and every refusal with the plain refusal, byte for byte."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import handlers.params as params_module
import handlers.validated_once as validated_once
from engine import json_spans
from engine.compiled import use_compiled
from handlers.errors import HandlerError
from handlers.params import (
    MAX_ARRAY_ITEMS,
    MAX_DEPTH,
    MAX_TEXT_CHARS,
    json_shape_errors,
    parse_params,
    surely_within_shape_limits,
)
from handlers.pre_step import KNOWN_SURFACE_NODES, PreStepParams
from handlers.validated_once import ValidatedOnce, json_values
from rofmd.server.memory_release import release_memory
from tests.archive_fixtures import Surface, pre_step_params


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    KNOWN_SURFACE_NODES.clear()
    yield
    KNOWN_SURFACE_NODES.clear()


def surface_params() -> dict[str, Any]:
    s = Surface()
    s.system()
    s.user("看看这张截图", images=[{"attachmentId": "a1", "mediaType": "image/png", "width": 3}])
    for i in range(4):
        s.turn_pair(i, 50)
    return pre_step_params(s, session="once")


def wire(raw: Any) -> Any:
    """The request as the dispatcher validates it: read from a line just now."""
    with json_values():
        return parse_params(PreStepParams, orjson.loads(orjson.dumps(raw)))


def plain(raw: Any) -> Any:
    return parse_params(PreStepParams, copy.deepcopy(raw))


def outcome(parse: Any, raw: Any) -> bytes:
    """What the daemon answers with: the params' JSON, or the error's."""
    try:
        return orjson.dumps(parse(raw).model_dump())
    except HandlerError as exc:
        return orjson.dumps(exc.to_error())


def test_a_surface_sent_again_is_not_validated_again_and_reads_the_same() -> None:
    raw = surface_params()
    first = wire(raw)
    misses = KNOWN_SURFACE_NODES.misses
    assert misses == len(raw["surface"]) and KNOWN_SURFACE_NODES.hits == 0
    again = wire(raw)
    assert KNOWN_SURFACE_NODES.hits == len(raw["surface"])
    assert KNOWN_SURFACE_NODES.misses == misses
    expected = orjson.dumps(plain(raw).model_dump())
    assert orjson.dumps(first.model_dump()) == expected
    assert orjson.dumps(again.model_dump()) == expected


def test_a_node_validation_rewrites_is_handed_on_rewritten_and_never_shared() -> None:
    """Known keys first (a tool result's toolCallId before its content), 5.0 read as 5:
    the remembered form is what validation returns, a fresh copy each time."""
    raw = surface_params()
    node = raw["surface"][3]
    node["seq"] = float(node["seq"])
    msg = node["message"]
    node["message"] = {"extraFirst": 1, **{k: msg[k] for k in reversed(list(msg))}}
    expected = plain(raw).surface[3]
    one, two = wire(raw).surface[3], wire(raw).surface[3]
    assert KNOWN_SURFACE_NODES.hits >= 1
    for got in (one, two):
        assert orjson.dumps(got) == orjson.dumps(expected)
        assert type(got["seq"]) is int
    assert one is not two and one["message"] is not two["message"]


class DecodeCounting:
    """`orjson` as `handlers.validated_once` sees it, counting decodings."""

    def __init__(self) -> None:
        self.decoded = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(orjson, name)

    def loads(self, data: Any) -> Any:
        self.decoded += 1
        return orjson.loads(data)


def test_a_node_whose_form_only_moves_its_keys_is_not_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tool result written toolCallId before content validates into its shape's order:
    remembered as those key moves, a later request's node is handed on with its own
    keys moved, the same bytes as plain validation, with no decoding; a node whose
    values validation changed (5.0 read as 5) is still decoded."""
    raw = surface_params()
    tools = [n for n in raw["surface"] if n["message"].get("toolCallId") is not None]
    assert tools and list(tools[0]["message"]).index("toolCallId") < list(
        tools[0]["message"]
    ).index("content")  # the hosts' order, which the shape lists otherwise
    wire(raw)
    counting = DecodeCounting()
    monkeypatch.setattr(validated_once, "orjson", counting)
    again = wire(raw)
    assert counting.decoded == 0 and KNOWN_SURFACE_NODES.hits == len(raw["surface"])
    assert orjson.dumps(again.model_dump()) == orjson.dumps(plain(raw).model_dump())
    coerced = copy.deepcopy(raw)
    coerced["surface"][3]["seq"] = float(coerced["surface"][3]["seq"])
    wire(coerced)
    counting.decoded = 0
    got = wire(coerced)
    assert counting.decoded == 1  # that one node, from its remembered JSON
    assert orjson.dumps(got.model_dump()) == orjson.dumps(plain(coerced).model_dump())


@pytest.mark.parametrize(
    ("value", "validated", "moves"),
    [
        ({"a": 1, "b": [2]}, {"b": [2], "a": 1}, [((), ("b", "a"))]),
        ({"n": [{"x": 1, "y": "s"}]}, {"n": [{"y": "s", "x": 1}]}, [(("n", 0), ("y", "x"))]),
        ({"a": 1}, {"a": 1}, None),  # no move: the same form (remembered as None)
        ({"a": 1, "b": 2}, {"b": 2, "a": 1.0}, None),  # 1 and 1.0: another JSON
        ({"a": True}, {"a": 1}, None),
        ({"a": 1, "b": 2}, {"b": 2}, None),  # a key dropped
        ({"a": [1, 2]}, {"a": [1]}, None),
        ({"a": "x", "b": 1}, {"b": 1, "a": "y"}, None),
    ],
)
def test_key_moves_are_found_only_where_nothing_else_changed(
    value: Any, validated: Any, moves: Any
) -> None:
    found = validated_once._reordering(value, validated)
    if moves is None:
        assert found is None
        return
    assert found is not None and sorted(found.moves) == sorted(moves)
    moved = found.apply(copy.deepcopy(value))
    assert orjson.dumps(moved) == orjson.dumps(validated)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("surface.2.seq", True),  # equal to 1 in Python, never a seq
        ("surface.2.seq", 2**53),
        ("surface.2.time", 1.5e300),
        ("surface.3.message.content", 7),
        ("surface.3.message.isError", "maybe"),
        ("surface.3.message.content.0", "text"),
        ("surface.3", None),
    ],
)
def test_a_bad_node_gets_the_validators_own_errors_after_its_good_twin_was_remembered(
    path: str, value: Any
) -> None:
    raw = surface_params()
    wire(raw)  # every node of the good surface is remembered now
    bad = copy.deepcopy(raw)
    keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
    target: Any = bad
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    refused = outcome(plain, bad)
    assert b'"code":-32602' in refused
    assert outcome(wire, bad) == refused


def test_values_built_in_python_are_always_validated() -> None:
    """Outside json_values (engine CLI, tests) nothing is remembered or skipped: a tuple
    or NaN would read as JSON's list or null."""
    raw = surface_params()
    parse_params(PreStepParams, raw)
    parse_params(PreStepParams, raw)
    assert KNOWN_SURFACE_NODES.hits == KNOWN_SURFACE_NODES.misses == 0
    untimed = copy.deepcopy(raw)
    untimed["surface"][2]["time"] = None
    wire(untimed)  # remembered: its JSON is what orjson writes for a NaN time too
    nan = copy.deepcopy(raw)
    nan["surface"][2]["time"] = float("nan")
    assert b'"code":-32602' in outcome(plain, nan)
    assert outcome(lambda r: parse_params(PreStepParams, r), nan) == outcome(plain, nan)


def test_the_memory_is_bounded_least_recently_used_first_out() -> None:
    def node(n: int) -> dict[str, Any]:
        return {"n": n, "pad": "x" * 10}  # 27 bytes of JSON for n in 10..99

    size = len(orjson.dumps(node(10)))
    memo = ValidatedOnce(max_bytes=3 * size + 5)

    def validate(value: Any) -> Any:
        return value

    with json_values():
        for n in range(10, 30):
            memo(node(n), validate)
        assert len(memo) == 3  # 27, 28, 29
        memo(node(27), validate)  # used again: the most recent now
        assert memo.hits == 1
        memo(node(30), validate)  # 28 goes
        memo(node(27), validate)
        assert memo.hits == 2
        memo(node(28), validate)
        assert memo.hits == 2 and len(memo) == 3
        memo({"big": "y" * 200}, validate)  # larger than the whole memory: not kept
        assert len(memo) == 3


def test_memory_release_empties_it() -> None:
    raw = surface_params()
    wire(raw)
    assert len(KNOWN_SURFACE_NODES) == len(raw["surface"])
    assert release_memory(None).memo_entries >= len(raw["surface"])
    assert len(KNOWN_SURFACE_NODES) == 0
    wire(raw)  # refilled by the next request
    assert len(KNOWN_SURFACE_NODES) == len(raw["surface"])


# ---- looked up by the bytes of its request line ------------------------------------


def request(raw: Any, encode: Callable[[Any], bytes] = orjson.dumps) -> bytes:
    return encode({"jsonrpc": "2.0", "id": 7, "method": "agent/pre-step", "params": raw})


def wire_line(line: bytes) -> Any:
    """The request as the dispatcher validates a line's only request: with the line."""
    with json_values(line):
        return parse_params(PreStepParams, orjson.loads(line)["params"])


class CountingOrjson:
    """`orjson` as `handlers.validated_once` sees it, counting encodings of a list."""

    def __init__(self) -> None:
        self.lists = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(orjson, name)

    def dumps(self, value: Any, *args: Any) -> bytes:
        if type(value) is list:
            self.lists += 1
        return orjson.dumps(value, *args)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[CountingOrjson]:
    if not json_spans.available():
        pytest.skip("the compiled look-up is not built here")
    counter = CountingOrjson()
    monkeypatch.setattr(validated_once, "orjson", counter)
    use_compiled(True)
    yield counter
    use_compiled(True)


def test_a_surface_is_looked_up_in_its_line_without_encoding_it(counted: CountingOrjson) -> None:
    raw = surface_params()
    line = request(raw)
    first = wire_line(line)
    assert counted.lists == 0 and KNOWN_SURFACE_NODES.misses == len(raw["surface"])
    again = wire_line(request(raw))
    assert counted.lists == 0 and KNOWN_SURFACE_NODES.hits == len(raw["surface"])
    expected = orjson.dumps(plain(raw).model_dump())
    assert orjson.dumps(first.model_dump()) == orjson.dumps(again.model_dump()) == expected
    use_compiled(False)  # the rollback: the surface encoded, the same answer
    assert orjson.dumps(wire_line(line).model_dump()) == expected
    assert counted.lists == 1


def test_a_surface_that_grew_is_known_up_to_its_new_nodes(counted: CountingOrjson) -> None:
    raw = surface_params()
    wire_line(request(raw))
    grown = copy.deepcopy(raw)
    extra = Surface()
    extra.turn_pair(9, 40)
    grown["surface"] += pre_step_params(extra, session="once")["surface"][-2:]
    misses = KNOWN_SURFACE_NODES.misses
    got = wire_line(request(grown))
    assert KNOWN_SURFACE_NODES.hits == len(raw["surface"])
    assert KNOWN_SURFACE_NODES.misses == misses + 2
    assert counted.lists == 0
    assert orjson.dumps(got.model_dump()) == orjson.dumps(plain(grown).model_dump())


WRITINGS: dict[str, Callable[[Any], bytes]] = {
    "spaced, ASCII escapes": lambda d: json.dumps(d).encode(),
    "indented": lambda d: json.dumps(d, ensure_ascii=False, indent=2).encode(),
    "keys escaped": lambda d: json.dumps(d).replace('"surface"', '"\\u0073urface"').encode(),
}


@pytest.mark.parametrize("writing", sorted(WRITINGS))
def test_a_surface_written_another_way_reads_and_refuses_as_plain_validation(
    counted: CountingOrjson, writing: str
) -> None:
    raw = surface_params()
    wire_line(request(raw))  # remembered as orjson writes it
    encode = WRITINGS[writing]
    expected = orjson.dumps(plain(raw).model_dump())
    assert orjson.dumps(wire_line(request(raw, encode)).model_dump()) == expected
    assert orjson.dumps(wire_line(request(raw, encode)).model_dump()) == expected
    bad = copy.deepcopy(raw)
    bad["surface"][3]["message"]["content"] = 7
    refused = outcome(plain, bad)
    assert b'"code":-32602' in refused
    assert outcome(lambda r: wire_line(request(r, encode)), bad) == refused


# ---- the shape limits -----------------------------------------------------------------


def walked(value: Any, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """json_shape_errors with the proof switched off: the walk alone."""
    with monkeypatch.context() as m:
        m.setattr(params_module, "surely_within_shape_limits", lambda _v: False)
        return json_shape_errors(value)


def nest(levels: int, leaf: Any = 1) -> Any:
    value: Any = leaf
    for i in range(levels):
        value = [value] if i % 2 else {"a": value}
    return value


EDGES: list[Any] = [
    {"x": nest(MAX_DEPTH - 1)},
    {"x": nest(MAX_DEPTH)},
    {"x": nest(MAX_DEPTH - 2, [])},  # an empty container at the last allowed level
    {"x": nest(MAX_DEPTH - 1, {})},  # ... one level too deep
    {"x": nest(MAX_DEPTH - 1, "s")},
    {"x": nest(300)},  # beyond orjson's own nesting limit
    {"x": [0] * MAX_ARRAY_ITEMS},
    {"x": [0] * (MAX_ARRAY_ITEMS + 1)},
    {"x": [[]] * (MAX_ARRAY_ITEMS // 2)},
    {"x": "a" * MAX_TEXT_CHARS},
    {"x": "a" * (MAX_TEXT_CHARS + 1)},
    {"a" * (MAX_TEXT_CHARS + 1): 1},
    {"x": "界" * (MAX_TEXT_CHARS // 2)},
    {"x": 2**70},  # not encodable by orjson
    {"x": (1, 2)},  # a tuple: not a container for the walk
]


@pytest.mark.parametrize("value", EDGES, ids=range(len(EDGES)))
def test_the_proof_agrees_with_the_walk_at_every_limit(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = walked(value, monkeypatch)
    assert json_shape_errors(value) == expected
    if expected:
        assert not surely_within_shape_limits(value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(value=JSON, depth=st.integers(0, 3), prefix=st.integers(0, 2))
def test_the_proof_never_hides_a_problem(value: Any, depth: int, prefix: int) -> None:
    deep = {"x": nest(MAX_DEPTH - 4 + depth, value)}
    path = tuple("p" * (i + 1) for i in range(prefix))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(params_module, "surely_within_shape_limits", lambda _v: False)
        expected = json_shape_errors(deep, path)
    assert json_shape_errors(deep, path) == expected
    if expected:
        assert not surely_within_shape_limits(deep)

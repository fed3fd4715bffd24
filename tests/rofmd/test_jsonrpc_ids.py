"""Request ids come back exactly as sent (issue 21): orjson reads an integer beyond 64
bits as a float, so such lines are read again losslessly and answered digit for digit."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from handlers.params import MAX_ID_CHARS
from rofmd.server.jsonrpc import Call, encode, parse_line, result_response

BIG = "100000000000000000000000"


def request(id_text: str, method: str = "ping", params: str | None = None) -> bytes:
    tail = f',"params":{params}' if params is not None else ""
    return f'{{"jsonrpc":"2.0","id":{id_text},"method":"{method}"{tail}}}'.encode()


def only_call(line: bytes) -> Call:
    parsed = parse_line(line)
    (call,) = parsed.calls
    assert isinstance(call, Call), call
    return call


def echoed(line: bytes) -> bytes:
    """The answer line to the request `line`, as the daemon writes it."""
    return encode(result_response(only_call(line).id, {"pong": True}))


def test_orjson_reads_an_integer_beyond_64_bits_as_a_float() -> None:
    """Why this exists: the fast parser alone loses the id."""
    assert orjson.loads(request(BIG))["id"] == 1e23


def test_a_big_integer_id_is_echoed_digit_for_digit() -> None:
    for text in (BIG, "-" + BIG, "18446744073709551616", "-9223372036854775809"):
        call = only_call(request(text))
        assert call.id == int(text) and type(call.id) is int
        assert f'"id":{text},'.encode() in echoed(request(text))


def test_ids_orjson_reads_exactly_are_left_as_they_are() -> None:
    assert only_call(request("18446744073709551615")).id == 2**64 - 1
    assert only_call(request("-9223372036854775808")).id == -(2**63)
    assert only_call(request('"x"')).id == "x"
    assert only_call(request("null")).id is None


def test_minus_zero_one_point_zero_and_exponents() -> None:
    zero = only_call(request("-0"))
    assert zero.id == 0 and type(zero.id) is int  # the same number: JSON has one zero
    one = only_call(request("1.0"))
    assert one.id == 1.0 and type(one.id) is float
    assert b'"id":1.0,' in echoed(request("1.0"))
    assert only_call(request("1e23")).id == 1e23  # a float literal stays a float
    assert only_call(request("1.5")).id == 1.5


def test_ids_that_cannot_be_kept_are_invalid_requests() -> None:
    for text in ("1e400", "-1e400", "1" * (MAX_ID_CHARS + 1), '"' + "x" * (MAX_ID_CHARS + 1) + '"'):
        (err,) = parse_line(request(text)).calls
        assert isinstance(err, dict) and err["error"]["code"] == -32600, (text[:20], err)
        assert err["id"] is None
    longest = "9" * MAX_ID_CHARS
    assert only_call(request(longest)).id == int(longest)
    assert f'"id":{longest},'.encode() in echoed(request(longest))


def test_a_batch_keeps_every_id_and_every_position() -> None:
    line = f"[{request(BIG).decode()},{request('7').decode()},5,{request('1e400').decode()}]"
    parsed = parse_line(line.encode())
    assert parsed.is_batch
    first, second, third, fourth = parsed.calls
    assert isinstance(first, Call) and first.id == int(BIG)
    assert isinstance(second, Call) and second.id == 7
    assert isinstance(third, dict) and third["error"]["code"] == -32600
    assert isinstance(fourth, dict) and fourth["error"]["code"] == -32600
    answer = encode([result_response(first.id, 1), result_response(second.id, 2)])
    assert answer == f'[{{"jsonrpc":"2.0","id":{BIG},"result":1}},'.encode() + (
        b'{"jsonrpc":"2.0","id":7,"result":2}]\n'
    )


def test_a_cancel_names_a_big_id_exactly() -> None:
    line = f'{{"jsonrpc":"2.0","method":"$/cancelRequest","params":{{"id":{BIG}}}}}'.encode()
    call = only_call(line)
    assert not call.has_id and call.params == {"id": int(BIG)}


def test_everything_else_reads_as_orjson_reads_it() -> None:
    params = '{"a":100000000000000000000000,"b":-0,"c":1.5,"d":[1e23,"\\ud83d\\ude00"]}'
    line = request(BIG, params=params)
    expected = orjson.loads(line)["params"]
    assert only_call(line).params == expected
    assert [type(v) for v in only_call(line).params.values()] == [float, int, float, list]


def test_what_orjson_refuses_stays_a_parse_error() -> None:
    for line in (
        request("1", params='{"x":1e400}'),  # a number beyond a double outside an id
        request("1e400", params='{"x":NaN}'),
        request("1e400", method="pi\\ud800ng"),  # a lone surrogate
        request("1e400")[:-1],  # truncated
        b"\xff" + request("1e400"),  # not UTF-8
        ("[" * 2000 + "]" * 2000).encode(),
    ):
        (err,) = parse_line(line).calls
        assert isinstance(err, dict) and err["error"]["code"] == -32700, (line[:40], err)


@given(st.integers(min_value=-(10**200), max_value=10**200))
def test_any_integer_id_round_trips_exactly(value: int) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": value, "method": "ping"}).encode()
    answer = echoed(line)
    assert json.loads(answer)["id"] == value
    assert f'"id":{value},'.encode() in answer


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**80), 2**80) | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
        max_leaves=10,
    )
)
def test_params_beside_a_big_id_read_as_orjson_reads_them(params: Any) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": 10**30, "method": "x", "params": [params]})
    assert only_call(line.encode()).params == orjson.loads(line)["params"]


def test_a_lone_request_keeps_its_line_and_batch_members_do_not() -> None:
    """The line lets the params be looked up by their bytes (`handlers.validated_once`);
    a batch's line holds several requests' params, so its members get none."""
    line = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":[1]}}'
    (call,) = parse_line(line).calls
    assert isinstance(call, Call) and call.line == line
    batch = b"[" + line + b"," + line.replace(b'"id":1', b'"id":2') + b"]"
    members = parse_line(batch).calls
    assert [m.line for m in members if isinstance(m, Call)] == [None, None]

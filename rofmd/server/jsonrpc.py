"""JSON-RPC 2.0 message shapes over NDJSON (PROTOCOL.md §2).

Parsing never raises: a line becomes either a list of `Call`s (one, or a batch)
or an immediate error answer, so one bad message can never take a connection
or the daemon down.

Request ids are kept exact, since a client matches answers by id. orjson reads an
integer beyond 64 bits as a float (`100000000000000000000000` → `1e+23`) and refuses a
number beyond a double's range, so a line whose id (or the id a `$/cancelRequest`
names) came out as a float, or that orjson refused, is read again by the standard
library, which keeps every digit: integer ids become exact Python ints (echoed digit
for digit, :func:`encode`), other numbers are read the way orjson reads them, and
whatever orjson refuses apart from long numbers in ids stays a parse error. An id
longer than :data:`~handlers.params.MAX_ID_CHARS` characters, or a number no double
holds (`1e400`), is refused with -32600. `-0` is the integer 0; `1.0` stays the float
1.0.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Final

import orjson

from handlers.errors import INVALID_REQUEST, PARSE_ERROR
from handlers.params import MAX_ID_CHARS
from rofmd.wire import CANCEL_METHOD as CANCEL_METHOD  # shared with the clients
from rofmd.wire import I64_MIN as _I64_MIN
from rofmd.wire import U64_MAX as _U64_MAX
from rofmd.wire import encode as encode

JsonId = str | int | float | None
_MISSING = object()
_INT_DIGITS: Final = 20
"""Digits of the longest integer orjson reads as an integer (2**64 - 1)."""
_TOO_LONG: Final = f"id longer than {MAX_ID_CHARS} characters"


@dataclass(frozen=True)
class Call:
    """One request or notification. `has_id` False means notification: never answered."""

    method: str
    params: Any
    id: JsonId
    has_id: bool
    line: bytes | None = None
    """The line it was read from when it is the line's only request (a batch member:
    None): its params may be looked up by their bytes (`handlers.validated_once`)."""


@dataclass(frozen=True)
class Parsed:
    """A parsed line: calls to run plus error answers already decided.

    `is_batch` says the answer must be an array (PROTOCOL.md §2); `slots` keeps
    the errors of invalid batch members in their positions.
    """

    calls: list[Call | dict[str, Any]]
    is_batch: bool


def error_response(id_: JsonId, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response object."""
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": err}


def result_response(id_: JsonId, result: Any) -> dict[str, Any]:
    """A JSON-RPC success response object."""
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


class _Number:
    """A number as written on the line, until it is known whether it is an id."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _BadId:
    """An id refused with -32600 (too long, or a number no double holds)."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


class _Unreadable(ValueError):
    """A number orjson would refuse too (beyond a double's range, outside an id)."""


_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89abcdefABCDEF]")
"""Where a lone surrogate could come from (the only way to write one in JSON)."""


def _is_integer_literal(text: str) -> bool:
    return not any(c in text for c in ".eE")


def _as_orjson(text: str) -> int | float:
    """A number outside an id, the way orjson reads it."""
    if _is_integer_literal(text) and len(text.lstrip("-")) <= _INT_DIGITS:
        value = int(text)
        if _I64_MIN <= value <= _U64_MAX:
            return value
    number = float(text)
    if not math.isfinite(number):
        raise _Unreadable(text)
    return number


def _exact_id(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_ID_CHARS:
        return _BadId(_TOO_LONG)
    if not isinstance(value, _Number):
        return _plain(value)
    text = value.text
    if len(text) > MAX_ID_CHARS:
        return _BadId(_TOO_LONG)
    if _is_integer_literal(text):
        return int(text)
    number = float(text)
    return (
        number if math.isfinite(number) else _BadId("id is a number beyond the range of a double")
    )


def _plain(value: Any) -> Any:
    if isinstance(value, _Number):
        return _as_orjson(value.text)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _request(value: Any) -> Any:
    """One request object with its id (and a cancel's target id) exact."""
    if not isinstance(value, dict):
        return _plain(value)
    out = {k: (_exact_id(v) if k == "id" else _plain(v)) for k, v in value.items()}
    params = value.get("params")
    if out.get("method") == CANCEL_METHOD and isinstance(params, dict) and "id" in params:
        target = _exact_id(params["id"])
        out["params"]["id"] = None if isinstance(target, _BadId) else target
    return out


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _exact_parse(line: bytes) -> Any:
    """The line read by the standard library, ids exact (see the module docstring).

    Raises ``ValueError`` (or ``RecursionError``) for what orjson refuses too (NaN, a
    lone surrogate, a number beyond a double's range outside an id, deep nesting).
    """
    text = line.decode("utf-8")
    raw = json.loads(text, parse_int=_Number, parse_float=_Number, parse_constant=_refuse_constant)
    if _SURROGATE_ESCAPE.search(text):
        _check_text(raw)
    return [_request(m) for m in raw] if isinstance(raw, list) else _request(raw)


def _check_text(value: Any) -> None:
    """Refuse a lone surrogate (``"\\ud800"``), as orjson does: it is no UTF-8 text."""
    if isinstance(value, str):
        value.encode("utf-8")  # UnicodeEncodeError is a ValueError
    elif isinstance(value, dict):
        for key, item in value.items():
            key.encode("utf-8")
            _check_text(item)
    elif isinstance(value, list):
        for item in value:
            _check_text(item)


def _reread(line: bytes) -> Any:
    """:func:`_exact_parse`, or ``_MISSING`` where orjson's refusal stands."""
    try:
        return _exact_parse(line)
    except (ValueError, RecursionError):
        return _MISSING


def _inexact_id(value: Any) -> bool:
    """True when orjson may have read an id of this request inexactly (as a float)."""
    if not isinstance(value, dict):
        return False
    if type(value.get("id")) is float:
        return True
    params = value.get("params")
    return (
        value.get("method") == CANCEL_METHOD
        and isinstance(params, dict)
        and type(params.get("id")) is float
    )


def _to_call(obj: Any, line: bytes | None = None) -> Call | dict[str, Any]:
    if not isinstance(obj, dict):
        return error_response(None, INVALID_REQUEST, "invalid request: not a JSON-RPC object")
    raw_id = obj.get("id", _MISSING)
    has_id = raw_id is not _MISSING
    if isinstance(raw_id, str) and len(raw_id) > MAX_ID_CHARS:
        raw_id = _BadId(_TOO_LONG)
    if isinstance(raw_id, _BadId):
        return error_response(None, INVALID_REQUEST, f"invalid request: {raw_id.why}")
    id_: JsonId = raw_id if has_id and _valid_id(raw_id) else None
    if has_id and not _valid_id(raw_id):
        return error_response(
            None, INVALID_REQUEST, "invalid request: id must be a string or number"
        )
    if obj.get("jsonrpc") != "2.0":
        return error_response(id_, INVALID_REQUEST, 'invalid request: jsonrpc must be "2.0"')
    method = obj.get("method")
    if not isinstance(method, str) or not method:
        return error_response(id_, INVALID_REQUEST, "invalid request: method must be a string")
    params = obj.get("params")
    if params is not None and not isinstance(params, dict | list):
        return error_response(id_, INVALID_REQUEST, "invalid request: params must be structured")
    return Call(method=method, params=params, id=id_, has_id=has_id, line=line)


def parse_line(line: bytes) -> Parsed:
    """Decode one NDJSON line into calls and ready-made error answers."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        obj = _reread(line)  # an id beyond a double's range?
        if obj is _MISSING:
            return Parsed([error_response(None, PARSE_ERROR, f"parse error: {exc}")], False)
    else:
        if _inexact_id(obj) or (isinstance(obj, list) and any(_inexact_id(m) for m in obj)):
            exact = _reread(line)
            if exact is not _MISSING:  # always, for a line orjson read
                obj = exact
    if isinstance(obj, list):
        if not obj:
            return Parsed(
                [error_response(None, INVALID_REQUEST, "invalid request: empty batch")], False
            )
        return Parsed([_to_call(item) for item in obj], True)
    return Parsed([_to_call(obj, line)], False)

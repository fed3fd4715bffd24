"""JSON-RPC 2.0 message shapes over NDJSON (PROTOCOL.md §2).

Parsing never raises: a line becomes either a list of `Call`s (one, or a batch)
or an immediate error answer, so one bad message can never take a connection
or the daemon down.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from handlers.errors import INVALID_REQUEST, PARSE_ERROR

JsonId = str | int | float | None
_MISSING = object()


@dataclass(frozen=True)
class Call:
    """One request or notification. `has_id` False means notification: never answered."""

    method: str
    params: Any
    id: JsonId
    has_id: bool


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


def _to_call(obj: Any) -> Call | dict[str, Any]:
    if not isinstance(obj, dict):
        return error_response(None, INVALID_REQUEST, "invalid request: not a JSON-RPC object")
    raw_id = obj.get("id", _MISSING)
    has_id = raw_id is not _MISSING
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
    return Call(method=method, params=params, id=id_, has_id=has_id)


def parse_line(line: bytes) -> Parsed:
    """Decode one NDJSON line into calls and ready-made error answers."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return Parsed([error_response(None, PARSE_ERROR, f"parse error: {exc}")], False)
    if isinstance(obj, list):
        if not obj:
            return Parsed(
                [error_response(None, INVALID_REQUEST, "invalid request: empty batch")], False
            )
        return Parsed([_to_call(item) for item in obj], True)
    return Parsed([_to_call(obj)], False)


def encode(message: Any) -> bytes:
    """One NDJSON line. Non-JSON values (a stray object in a result) become strings."""
    return orjson.dumps(message, default=str) + b"\n"

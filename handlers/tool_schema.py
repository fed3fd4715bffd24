"""The JSON-schema pieces a tool's `parameters` are built from, so that every tool
states a string, a bounded integer or a list of labels the same way."""

from __future__ import annotations

from typing import Any

__all__ = ["integer_schema", "object_schema", "string_list_schema", "string_schema"]


def object_schema(
    properties: dict[str, Any], *, required: tuple[str, ...] = (), closed: bool = False
) -> dict[str, Any]:
    """A tool's `parameters`: an object of `properties`; `closed` refuses other keys."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    return schema


def string_schema(description: str, *, enum: tuple[str, ...] = ()) -> dict[str, Any]:
    """A string parameter, optionally one of `enum`."""
    if not enum:
        return {"type": "string", "description": description}
    return {"type": "string", "enum": list(enum), "description": description}


def string_list_schema(description: str) -> dict[str, Any]:
    """The JSON schema of a parameter that is a list of strings (labels, keywords)."""
    return {"type": "array", "items": {"type": "string"}, "description": description}


def integer_schema(
    description: str, *, minimum: int, maximum: int, default: int | None = None
) -> dict[str, Any]:
    """A bounded integer parameter (`limit`, `offset`): the bounds the engine clamps
    to, shown to the model so it does not ask for more."""
    schema: dict[str, Any] = {"type": "integer", "minimum": minimum, "maximum": maximum}
    if default is not None:
        schema["default"] = default
    schema["description"] = description
    return schema

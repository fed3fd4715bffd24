"""`context.nodes` of a pre-step, read as what the plan uses: surface seq -> host tokens.

Why not a list of models: a 128k-token surface comes with 400 entries, and building a
pydantic model for each (about a millisecond on the event loop's worker) is most of what
validating `context` costs, on every pre-step, while only an archive reads them, and
only as ``{seq: tokens}`` (``engine.archive.PreStepInput.node_tokens``).

The rule stays :class:`NodeTokens` (a seq, an optional token count, any other field
kept and ignored), and a refused list gets that model's own errors, field paths and
messages. :func:`surely_counted` only proves, in one pass over plain ints, that the model
would accept every entry as it is (the ``int`` bounds of ``SafeInt`` and ``TokenCount``);
anything it cannot prove (a float, a bool, a missing seq, not a dict, too many entries)
goes through the models, exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, GetCoreSchemaHandler, GetPydanticSchema
from pydantic_core import CoreSchema, core_schema

from handlers.params import MAX_NODES, MAX_SAFE_INT, MAX_TOKENS, SafeInt, TokenCount, Wire

__all__ = ["NodeTokenCounts", "NodeTokens", "surely_counted"]


class NodeTokens(Wire):
    """One `context.nodes` entry: tokens of one surface node as the host measured them."""

    seq: SafeInt
    tokens: TokenCount | None = None


def counts_of(nodes: list[NodeTokens]) -> dict[int, int]:
    """Seq -> tokens of the entries that carry a count (a later entry of a seq wins)."""
    return {n.seq: n.tokens for n in nodes if n.tokens is not None}


def surely_counted(value: Any) -> dict[int, int] | None:
    """:func:`counts_of` the validated ``value``, when every entry is surely valid as
    it is (module docstring); None: let the models decide."""
    if type(value) is not list or len(value) > MAX_NODES:
        return None
    out: dict[int, int] = {}
    for node in value:
        if type(node) is not dict:
            return None
        seq = node.get("seq")
        if type(seq) is not int or not 0 <= seq <= MAX_SAFE_INT:
            return None
        tokens = node.get("tokens")
        if tokens is None:
            continue
        if type(tokens) is not int or not 0 <= tokens <= MAX_TOKENS:
            return None
        out[seq] = tokens
    return out


def _counted(value: Any, models: core_schema.ValidatorFunctionWrapHandler) -> dict[int, int]:
    quick = surely_counted(value)
    if quick is not None:
        return quick
    return counts_of(models(value))  # raises the models' own errors


def _as_entries(counts: Mapping[int, int]) -> list[dict[str, int]]:
    return [{"seq": seq, "tokens": tokens} for seq, tokens in counts.items()]


def _schema(_tp: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
    models = handler.generate_schema(Annotated[list[NodeTokens], Field(max_length=MAX_NODES)])
    return core_schema.no_info_wrap_validator_function(
        _counted,
        models,
        serialization=core_schema.plain_serializer_function_ser_schema(_as_entries),
    )


NodeTokenCounts = Annotated[dict[int, int], GetPydanticSchema(_schema)]
"""`context.nodes` validated as :class:`NodeTokens` entries, handed on as seq -> tokens
(entries without a count left out); dumped back as ``[{seq, tokens}]``."""

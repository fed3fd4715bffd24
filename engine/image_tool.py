"""``memory_image``: its arguments and its answer (reference "工具 memory_image", §1.7).

The handler does the I/O (refresh of the image table, :func:`engine.store.image_lookup.
find_images`); this module turns the model's arguments into an
:class:`~engine.store.image_lookup.ImageFilter` and a lookup into the structured value
and the text the model reads, so both are decided by one pure function each.

Arguments are all optional. ``query`` / ``memoryId`` / ``name`` must be strings (blank is
absent); ``limit`` an integer (a whole float or a string of digits is accepted, a model
writes either) and clamped to 1..20 with a warning; an argument the tool does not have is
named in a warning, never dropped silently. A wrong type is a refusal (``isError``) whose
value lists each problem as ``{field, message, type}``, the shape of a -32602's
``data.errors``, so a host reads both the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any, Final

from engine import texts
from engine.keywords import QUERY_KEYWORDS_MAX
from engine.recall.dates import format_datetime, format_datetime_with_weekday
from engine.store.image_lookup import ImageFilter, ImageHit, ImageLookup, split_query

__all__ = [
    "ARGUMENTS",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "ImageAnswer",
    "ImageCall",
    "parse_arguments",
    "refusal",
    "render_answer",
]

DEFAULT_LIMIT: Final = 10
MAX_LIMIT: Final = 20
ARGUMENTS: Final = ("query", "memoryId", "name", "limit")


@dataclass(frozen=True, slots=True)
class ImageCall:
    """The parsed arguments: a filter, or the problems that refuse the call."""

    filter: ImageFilter | None
    errors: tuple[dict[str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    echo: dict[str, Any] = field(default_factory=dict)
    """The filters as used, for the structured value."""


@dataclass(frozen=True, slots=True)
class ImageAnswer:
    value: dict[str, Any]
    text: str
    is_error: bool = False


def _text_argument(
    arguments: Mapping[str, Any], key: str, errors: list[dict[str, str]]
) -> str | None:
    raw = arguments.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str):
        errors.append(
            {
                "field": f"arguments.{key}",
                "message": texts.IMAGE_ARG_NOT_STRING.format(field=key),
                "type": "string_type",
            }
        )
        return None
    return raw.strip() or None


def _limit(raw: Any) -> int | None:
    if raw is None:
        return DEFAULT_LIMIT
    if isinstance(raw, bool):
        return None
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str) and raw.strip().isascii() and raw.strip().isdigit():
        return int(raw.strip())
    return raw if isinstance(raw, int) else None


def parse_arguments(arguments: Mapping[str, Any]) -> ImageCall:
    """The filter one call asks for (module docstring for the rules)."""
    errors: list[dict[str, str]] = []
    warnings: list[str] = []
    query = _text_argument(arguments, "query", errors)
    memory_id = _text_argument(arguments, "memoryId", errors)
    name = _text_argument(arguments, "name", errors)
    limit = _limit(arguments.get("limit"))
    if limit is None:
        errors.append(
            {"field": "arguments.limit", "message": texts.IMAGE_ARG_LIMIT, "type": "int_type"}
        )
    unknown = sorted(str(k) for k in arguments if k not in ARGUMENTS)
    if unknown:
        warnings.append(texts.IMAGE_WARN_UNKNOWN_ARGUMENT.format(names=" / ".join(unknown)))
    if errors or limit is None:
        return ImageCall(filter=None, errors=tuple(errors), warnings=tuple(warnings))
    used = min(MAX_LIMIT, max(1, limit))
    if used != limit:
        warnings.append(texts.IMAGE_WARN_LIMIT_CLAMPED.format(given=limit, used=used))
    terms: list[str] = []
    if query is not None:
        terms, n = split_query(query)
        if n > QUERY_KEYWORDS_MAX:
            warnings.append(texts.IMAGE_WARN_QUERY_TERMS.format(n=n, max=QUERY_KEYWORDS_MAX))
    echo: dict[str, Any] = {
        k: v for k, v in (("query", query), ("memoryId", memory_id), ("name", name)) if v
    }
    return ImageCall(
        filter=ImageFilter(terms=tuple(terms), memory_id=memory_id, name=name, limit=used),
        warnings=tuple(warnings),
        echo=echo,
    )


def refusal(call: ImageCall) -> ImageAnswer:
    """The answer to arguments of the wrong type."""
    problems = texts.IMAGE_ARG_SEPARATOR.join(e["message"] for e in call.errors)
    return ImageAnswer(
        value={"errors": list(call.errors), "warnings": list(call.warnings)},
        text=_with_warnings(texts.IMAGE_ERROR_ARGUMENTS.format(problems=problems), call.warnings),
        is_error=True,
    )


def _archived(ms: int, tz: tzinfo, compute_dates: bool) -> str:
    """The archive time as the recall heading prints it (with the weekday under
    ``recall.computeDates``)."""
    return format_datetime_with_weekday(ms, tz) if compute_dates else format_datetime(ms, tz)


def _image(hit: ImageHit) -> str:
    """The image as the recall block shows an expanded placeholder (§1.7 step 4)."""
    out = texts.RECALL_IMAGE_EXPANDED.format(
        colon="：", open_="（", name=hit.name, comma="，", path=hit.path, close="）"
    )
    return out if hit.exists else out + texts.RECALL_IMAGE_MISSING


def _item_lines(n: int, hit: ImageHit, archived: str) -> list[str]:
    lines = [texts.IMAGE_ITEM.format(n=n, image=_image(hit))]
    memory = texts.IMAGE_ITEM_MEMORY.format(
        memory_id=hit.memory_id, archived=texts.RECALL_ARCHIVED_AT.format(archived=archived)
    )
    if hit.title:
        memory += texts.IMAGE_ITEM_TITLE.format(title=hit.title)
    lines.append(memory)
    facts: list[str] = []
    if hit.media_type:
        facts.append(texts.IMAGE_ITEM_MEDIA_TYPE.format(value=hit.media_type))
    if hit.width is not None and hit.height is not None:
        facts.append(texts.IMAGE_ITEM_SIZE.format(width=hit.width, height=hit.height))
    if hit.bytes is not None:
        facts.append(texts.IMAGE_ITEM_BYTES.format(value=hit.bytes))
    if hit.original_name:
        facts.append(texts.IMAGE_ITEM_ORIGINAL_NAME.format(value=hit.original_name))
    if hit.matched:
        facts.append(
            texts.IMAGE_ITEM_MATCHED.format(terms=texts.IMAGE_TERM_SEPARATOR.join(hit.matched))
        )
    if facts:
        lines.append(texts.IMAGE_ITEM_FACTS.format(facts=texts.IMAGE_ITEM_SEPARATOR.join(facts)))
    return lines


def _with_warnings(text: str, warnings: tuple[str, ...]) -> str:
    return "\n".join([text, *warnings]) if warnings else text


def render_answer(
    call: ImageCall, lookup: ImageLookup, *, tz: tzinfo, compute_dates: bool
) -> ImageAnswer:
    """The value and the text of one lookup (the archive time in the recall block's
    timezone and form, ``recall.computeDates`` adding the weekday)."""
    flt = call.filter
    assert flt is not None
    if lookup.unknown_memory:
        return ImageAnswer(
            value={**call.echo, "images": [], "warnings": list(call.warnings)},
            text=_with_warnings(
                texts.IMAGE_UNKNOWN_MEMORY.format(memory_id=flt.memory_id), call.warnings
            ),
            is_error=True,
        )
    images: list[dict[str, Any]] = []
    lines: list[str] = []
    for n, hit in enumerate(lookup.hits, start=1):
        archived = _archived(hit.created_at, tz, compute_dates)
        lines.extend(_item_lines(n, hit, archived))
        images.append(
            {
                "name": hit.name,
                "path": hit.path,
                "exists": hit.exists,
                "mediaType": hit.media_type,
                "width": hit.width,
                "height": hit.height,
                "bytes": hit.bytes,
                "memoryId": hit.memory_id,
                "createdAt": hit.created_at,
                "archivedAt": archived,
                "title": hit.title,
                "originalName": hit.original_name,
                "matched": list(hit.matched),
            }
        )
    count = len(lookup.hits)
    if count == 0:
        if not flt.filtered:
            head = texts.IMAGE_NONE
        elif flt.memory_id is not None and not flt.terms and flt.name is None:
            head = texts.IMAGE_NONE_IN_MEMORY.format(memory_id=flt.memory_id)
        else:
            head = texts.IMAGE_NOT_FOUND
    elif not flt.filtered:
        head = texts.IMAGE_RECENT.format(n=count, total=lookup.total)
    elif count < lookup.total:
        head = texts.IMAGE_FOUND_PART.format(total=lookup.total, n=count, limit=flt.limit)
    else:
        head = texts.IMAGE_FOUND.format(total=lookup.total)
    body = [head, *lines]
    if count:
        body.append(texts.IMAGE_READ_HINT)
        if not all(hit.exists for hit in lookup.hits):
            body.append(texts.IMAGE_MISSING_HINT)
    value = {
        **call.echo,
        "limit": flt.limit,
        "count": count,
        "total": lookup.total,
        "images": images,
        "warnings": list(call.warnings),
    }
    return ImageAnswer(value=value, text=_with_warnings("\n".join(body), call.warnings))

"""`engine.json_spans` finds a request's list in its JSON line exactly, or says None:
every item's bytes are that item's JSON, whatever the spacing, escapes and other
members around it; a key written twice or with an escape, a batch, or another shape is
None; and no input, JSON or not, makes the compiled scan read outside it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import compiled, json_spans


@pytest.fixture(autouse=True)
def _compiled() -> Iterator[None]:
    if not json_spans.available():
        pytest.skip("the compiled module is not built here")
    compiled.use_compiled(True)
    yield
    compiled.use_compiled(True)


def test_ci_builds_the_compiled_module() -> None:
    """`make` builds it where a C compiler is (CI has one)."""
    if not os.environ.get("CI"):
        pytest.skip("only CI must have it")
    assert json_spans.available()


def items_of(line: bytes) -> list[Any] | None:
    """The items the scan says the line's params.surface holds, each parsed alone."""
    found = json_spans.member_items(line, "params", "surface")
    if found is None:
        return None
    text, ends = found
    assert text[:1] == b"[" and text[-1:] == b"]"
    out, start = [], 1
    for end in ends:
        piece = text[start:end].lstrip(b" \t\r\n,")
        out.append(orjson.loads(piece))
        start = end
    assert orjson.loads(text) == out  # nothing left between the items but commas
    return out


LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from(list('ab"\\/\n\t界😀{}[],: \x01')), max_size=8)
)
VALUE = st.recursive(
    LEAF,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=4), kids, max_size=4)
    ),
    max_leaves=25,
)
KEYS = st.text(alphabet=st.sampled_from(list('abs"\\ 界')), max_size=6).filter(
    lambda k: k not in ("params", "surface")
)


def encodings(doc: Any) -> Iterator[tuple[bytes, bool]]:
    """The same document written the ways hosts write JSON, each with whether it
    writes non-ASCII characters as escapes."""
    yield orjson.dumps(doc), False
    yield json.dumps(doc).encode(), True  # ", " and ": " separators, \\u escapes
    yield json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode(), False
    yield json.dumps(doc, ensure_ascii=False, indent=1).encode(), False  # newlines, indents
    yield b" \t" + json.dumps(doc, separators=(" , ", " : ")).encode() + b"\r\n ", True


def written_escaped(key: str, ascii_only: bool) -> bool:
    """Whether JSON writes `key` with a backslash in it."""
    return any(c in '"\\' or c < " " or (ascii_only and ord(c) > 0x7F) for c in key)


@settings(max_examples=300, deadline=None)
@given(
    surface=st.lists(VALUE, max_size=6),
    before=st.dictionaries(KEYS, VALUE, max_size=3),
    after=st.dictionaries(KEYS, VALUE, max_size=3),
    top=st.dictionaries(KEYS, VALUE, max_size=3),
)
def test_each_item_is_the_parsed_items_json_however_the_line_is_written(
    surface: list[Any], before: dict[str, Any], after: dict[str, Any], top: dict[str, Any]
) -> None:
    doc = {**top, "params": {**before, "surface": surface, **after}}
    for line, ascii_only in encodings(doc):
        parsed = orjson.loads(line)["params"]["surface"]
        if any(written_escaped(k, ascii_only) for k in [*doc, *doc["params"]]):
            assert items_of(line) is None  # an escaped key might spell either name
        else:
            assert orjson.dumps(items_of(line)) == orjson.dumps(parsed)


@pytest.mark.parametrize(
    "line",
    [
        b'{"params":{"surface":[1]},"params":{"surface":[2]}}',  # the parser keeps one
        b'{"params":{"surface":[1],"surface":[2]}}',
        b'{"par\\u0061ms":{"surface":[1]}}',  # an escaped key may spell either name
        b'{"params":{"surf\\u0061ce":[1],"surface":[2]}}',
        b'{"params":{"x\\"y":1,"surface":[2]}}',  # any escaped key at those levels
        b'[{"params":{"surface":[1]}}]',  # a batch
        b'{"params":{"surface":{"0":1}}}',
        b'{"params":[{"surface":[1]}]}',
        b'{"params":{"other":[1]}}',
        b'{"surface":[1]}',
        b'{"params":{"surface":[1,2]}} {"params":{}}',  # more than one value
        b'{"params":{"surface":[1,2]',  # cut short
        b"",
    ],
)
def test_a_line_whose_list_cannot_be_told_exactly_is_none(line: bytes) -> None:
    assert json_spans.member_items(line, "params", "surface") is None


def test_nested_members_of_the_same_names_are_not_taken_for_them() -> None:
    line = b'{"x":{"params":{"surface":[9]}},"params":{"y":{"surface":[8]},"surface":[1, "]"]}}'
    assert items_of(line) == [1, "]"]


@settings(max_examples=2000, deadline=None)
@given(data=st.binary(max_size=80), cut=st.integers(0, 200))
def test_any_bytes_give_none_or_offsets_inside_them(data: bytes, cut: int) -> None:
    """Not JSON, or JSON cut anywhere: the scan never fails and never points outside."""
    whole = b'{"a":"\\\\","params":{"b":[{"c":"d\\""}],"surface":[1,"x\\"]",{"e":[]}]}}'
    for line in (data, whole[:cut], whole[:cut] + data, data + whole):
        found = json_spans.member_items(line, "params", "surface")
        if found is not None:
            text, ends = found
            assert text in line and all(0 < e <= len(text) for e in ends)


def test_turned_off_it_is_always_none() -> None:
    line = b'{"params":{"surface":[1]}}'
    compiled.use_compiled(False)
    assert json_spans.member_items(line, "params", "surface") is None
    compiled.use_compiled(True)
    assert json_spans.member_items(line, "params", "surface") == (b"[1]", [2])

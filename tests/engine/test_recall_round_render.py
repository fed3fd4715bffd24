"""Rendering a pick's body takes two short cuts (`engine.recall.block.render_body`): a
message whose content is a string is its own text, and a text without an image mark
has no placeholder to expand. Both must render exactly what the long way renders."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.recall.block import IMAGE_MARK, expand_images, message_text, render_body
from engine.recall.dates import resolve_timezone

TZ = resolve_timezone("Asia/Shanghai")
_PIECES = ["昨天", "上周", "下个月", "明年", "[图片:(a.png)]", "[图片：（b.jpg）]", "[图片", "图片"]
_PIECES += ["星港项目", "（2026", "\n", " ", "x", "\ud800", "\udc00", "😀", ""]
texts = st.one_of(
    st.text(max_size=40), st.lists(st.sampled_from(_PIECES), max_size=10).map("".join)
)


def _image_path(root: Path) -> Callable[[str], Path | None]:
    def resolve(name: str) -> Path | None:
        return None if name.startswith("b") else root / name

    return resolve


@settings(max_examples=400, deadline=None)
@given(text=texts)
def test_a_string_content_is_its_own_archived_text(text: str) -> None:
    assert message_text({"role": "user", "content": text}) == text


@settings(max_examples=300, deadline=None)
@given(
    bodies=st.lists(st.tuples(st.sampled_from(["user", "assistant"]), texts), max_size=5),
    compute=st.booleans(),
)
def test_a_body_renders_as_the_long_way_renders_it(
    bodies: list[tuple[str, str]], compute: bool
) -> None:
    root = Path("/nonexistent-images")
    as_strings = [
        {"role": r, "content": t, "time": 1_780_000_000_000 + i} for i, (r, t) in enumerate(bodies)
    ]
    as_blocks = [
        {"role": r, "content": [{"type": "text", "text": t}], "time": 1_780_000_000_000 + i}
        for i, (r, t) in enumerate(bodies)
    ]
    kwargs: dict[str, Any] = {
        "show_tags": True,
        "compute_dates": compute,
        "fallback_anchor": 1_780_000_000_000,
        "tz": TZ,
        "week_start": 1,
        "image_path": _image_path(root),
    }
    tags = {"events": ["发布"], "persons": [], "locations": ["杭州"], "timeTags": []}
    assert render_body(as_strings, tags, **kwargs) == render_body(as_blocks, tags, **kwargs)


def test_only_a_text_with_the_mark_is_expanded(tmp_path: Path) -> None:
    resolve = _image_path(tmp_path)
    plain = "图片 a.png (a.png) 星港项目"
    assert IMAGE_MARK not in plain
    assert expand_images(plain, resolve) is plain
    (tmp_path / "a.png").write_bytes(b"png")
    expanded = expand_images("看[图片:(a.png)]", resolve)
    assert expanded == f"看[图片:(a.png,文件:{tmp_path / 'a.png'})]"
    missing = expand_images("[图片:(c.png)]", resolve)
    assert missing.startswith("[图片:(c.png,文件:") and missing.endswith("（缺失）")

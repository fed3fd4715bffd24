"""Which surface images the pre-step checks on disk (`handlers.pre_step._readable_images`):
the image blocks archiving renders (`engine.content`, ``SURFACE`` view) whose host path is
absolute and holds an image by its first bytes. Pinned before the walk moved into
`engine.content`: a block shape that gained or lost an image here would copy a file
archiving does not name, or name one it does not copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from handlers.pre_step import _readable_images

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(64))
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(range(64))


def _node(content: Any, *, message: Any = None) -> dict[str, Any]:
    return {
        "seq": 1,
        "type": "user/message",
        "message": message or {"role": "user", "content": content},
    }


def test_only_image_blocks_with_absolute_paths_to_images_are_found(tmp_path: Path) -> None:
    png, jpeg, text = tmp_path / "a.png", tmp_path / "b.jpg", tmp_path / "c.txt"
    png.write_bytes(PNG)
    jpeg.write_bytes(JPEG)
    text.write_bytes(b"not an image at all")
    surface = [
        _node(
            [
                {"type": "image", "attachment": {"hostPath": str(png)}},
                {"type": "text", "text": "x", "attachment": {"hostPath": str(jpeg)}},
                {"type": "file", "attachment": {"hostPath": str(jpeg)}},
                {"type": "image", "attachment": {"hostPath": str(text)}},
                {"type": "image", "attachment": {"hostPath": "relative/a.png"}},
                {"type": "image", "attachment": {"hostPath": ""}},
                {"type": "image", "attachment": {"hostPath": 7}},
                {"type": "image", "attachment": str(png)},
                {"type": "image"},
                str(jpeg),
                None,
            ]
        ),
        _node(str(jpeg)),
        _node(None, message={"role": "user"}),
        {"seq": 2, "type": "user/message", "message": "not a mapping"},
        {"seq": 3, "type": "user/message"},
        _node([{"type": "image", "attachment": {"hostPath": str(jpeg), "name": "b.jpg"}}]),
        _node([{"type": "image", "attachment": {"hostPath": str(tmp_path / "gone.png")}}]),
    ]
    assert _readable_images(surface) == {str(png): "png", str(jpeg): "jpeg"}


def test_a_surface_without_images_finds_none(tmp_path: Path) -> None:
    assert _readable_images([]) == {}
    assert _readable_images([_node("words"), _node([{"type": "text", "text": "x"}])]) == {}

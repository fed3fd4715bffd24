"""Only image files are copied into the store (issue: hostPath pointing at any file)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.archive.image_check import MAX_IMAGE_BYTES, image_kind

SAMPLES = {
    "png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    "jpeg": b"\xff\xd8\xff\xe0\x00\x10JFIF",
    "gif": b"GIF89a\x01\x00\x01\x00",
    "webp": b"RIFF\x24\x00\x00\x00WEBPVP8 ",
    "bmp": b"BM" + b"\x00" * 30,
    "tiff": b"II*\x00\x08\x00\x00\x00",
    "heif": b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00",
    "avif": b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00",
    "svg": b'\xef\xbb\xbf<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"/>',
}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_images_are_recognised_by_their_first_bytes(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "x.bin"  # the name says nothing
    path.write_bytes(SAMPLES[kind])
    assert image_kind(path) == kind


@pytest.mark.parametrize(
    "data",
    [b"-----BEGIN OPENSSH PRIVATE KEY-----\n", b"SQLite format 3\x00", b"", b"hello"],
)
def test_other_files_are_not_images(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "photo.png"  # the name lies
    path.write_bytes(data)
    assert image_kind(path) is None


def test_size_limit_directories_fifos_and_missing_files(tmp_path: Path) -> None:
    big = tmp_path / "big.png"
    big.write_bytes(SAMPLES["png"] + b"\x00" * 64)
    assert image_kind(big) == "png"
    assert image_kind(big, max_bytes=16) is None
    assert MAX_IMAGE_BYTES == 32 * 1024 * 1024
    assert image_kind(tmp_path) is None
    assert image_kind(tmp_path / "missing.png") is None
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    # opening a FIFO for reading would block without a writer: refused before reading
    assert image_kind(fifo) is None

"""Copying a host image into the store: streamed in chunks, capped, only images, and
nothing about the source can turn into anything worse than a refusal with a reason."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from engine import jsonio
from engine.jsonio import FsOps
from engine.store.image_copy import (
    COPY_CHUNK,
    MAX_IMAGE_BYTES,
    ImageRejected,
    copy_image,
    probe_image,
)

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def png_file(path: Path, size: int) -> Path:
    """A PNG header followed by `size` bytes in all (varied content)."""
    body = bytes(range(256)) * (size // 256 + 1)
    path.write_bytes((PNG + body)[:size])
    return path


def test_a_copy_is_byte_identical_across_chunks(tmp_path: Path) -> None:
    src = png_file(tmp_path / "a.png", 2 * COPY_CHUNK + 12345)
    target = tmp_path / ".a.png.1-1.tmp"
    assert copy_image(src, target) == "png"
    assert target.read_bytes() == src.read_bytes()


class _Writes(FsOps):
    """Records the sizes of the store writes a copy makes."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def create_write_sync(self, path: Path, data: bytes) -> None:
        self.sizes.append(len(data))
        super().create_write_sync(path, data)

    def append_sync(self, path: Path, data: bytes) -> None:
        self.sizes.append(len(data))
        super().append_sync(path, data)


def test_a_copy_writes_one_chunk_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = png_file(tmp_path / "a.png", 3 * COPY_CHUNK + 1)
    fs = _Writes()
    monkeypatch.setattr(jsonio, "fs", fs)
    copy_image(src, tmp_path / "out")
    assert fs.sizes == [COPY_CHUNK, COPY_CHUNK, COPY_CHUNK, 1]


def _reason(src: Path, **kw: int) -> str:
    with pytest.raises(ImageRejected) as info:
        copy_image(src, src.parent / "target", **kw)
    assert not (src.parent / "target").exists()
    with pytest.raises(ImageRejected):
        probe_image(src, **kw)
    return info.value.reason


def test_sources_that_are_refused_and_why(tmp_path: Path) -> None:
    assert "gone" in _reason(tmp_path / "missing.png")
    assert "directory" in _reason(tmp_path)
    key = tmp_path / "photo.png"
    key.write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----\n")
    assert "not an image" in _reason(key)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    assert "empty" in _reason(empty)
    loop = tmp_path / "loop.png"
    loop.symlink_to(loop)
    assert "symlink loop" in _reason(loop)
    assert "device" in _reason(Path("/dev/null"))
    assert "usable path" in _reason(tmp_path / "nul\x00.png")
    big = tmp_path / "big.png"
    png_file(big, 64)
    assert "limit" in _reason(big, max_bytes=16)
    assert MAX_IMAGE_BYTES == 32 * 1024 * 1024


def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert "FIFO" in _reason(fifo)  # a blocking open would wait here for a writer forever
    assert time.monotonic() - started < 5


def test_a_symlink_to_an_image_is_followed(tmp_path: Path) -> None:
    real = png_file(tmp_path / "real.png", 100)
    link = tmp_path / "link.png"
    link.symlink_to(real)
    assert copy_image(link, tmp_path / "out") == "png"
    assert (tmp_path / "out").read_bytes() == real.read_bytes()


def test_a_huge_sparse_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    big = tmp_path / "huge.png"
    big.write_bytes(PNG)
    os.truncate(big, 300 * 1000 * 1000)
    started = time.monotonic()
    reason = _reason(big)
    assert "larger than the 32 MiB limit" in reason, reason
    assert time.monotonic() - started < 1


class _GrowingSource(FsOps):
    """Appends to the source file each time the copy writes: it grows while read."""

    def __init__(self, source: Path) -> None:
        self.source = source

    def _grow(self) -> None:
        with self.source.open("ab") as fh:
            fh.write(b"\x00" * COPY_CHUNK)

    def create_write_sync(self, path: Path, data: bytes) -> None:
        self._grow()
        super().create_write_sync(path, data)

    def append_sync(self, path: Path, data: bytes) -> None:
        self._grow()
        super().append_sync(path, data)


def test_a_file_growing_during_the_copy_stops_at_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = png_file(tmp_path / "grow.png", COPY_CHUNK)
    monkeypatch.setattr(jsonio, "fs", _GrowingSource(src))
    with pytest.raises(ImageRejected, match="grew past the 3 MiB limit"):
        copy_image(src, tmp_path / "target", max_bytes=3 * COPY_CHUNK)
    assert not (tmp_path / "target").exists()


def test_the_bytes_copied_are_the_bytes_checked(tmp_path: Path) -> None:
    """A path that held an image when planned and a key when copied copies nothing."""
    src = png_file(tmp_path / "a.png", 100)
    assert probe_image(src) == "png"
    src.write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----\n" * 10)
    with pytest.raises(ImageRejected, match="not an image"):
        copy_image(src, tmp_path / "target")
    assert not (tmp_path / "target").exists()


class _FullDisk(FsOps):
    def append_sync(self, path: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")


def test_a_store_write_failure_is_an_oserror_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = png_file(tmp_path / "a.png", 2 * COPY_CHUNK)
    monkeypatch.setattr(jsonio, "fs", _FullDisk())
    with pytest.raises(OSError) as info:
        copy_image(src, tmp_path / "target")
    assert not isinstance(info.value, ImageRejected) and info.value.errno == 28
    assert not (tmp_path / "target").exists()

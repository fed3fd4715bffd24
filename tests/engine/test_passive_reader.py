"""The session-log reader streams (issue 15: "bounded memory on a 1 GB log"): reading a
generated multi-frame log of several MB, its peak traced memory is a small constant, not
a share of the file; and resuming from any position the scan reported reads each event
once."""

from __future__ import annotations

import hashlib
import io
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import zstandard

from engine.sessionlog import LogPosition, LogScanner, iter_frames

MIB = 1024 * 1024


def _event(seq: int) -> dict[str, Any]:
    # text that does not compress to nothing, so the file itself is several MB
    noise = "".join(hashlib.sha256(f"{seq}-{i}".encode()).hexdigest() for i in range(8))
    return {
        "type": "user/message" if seq % 2 else "assistant/message",
        "seq": seq,
        "time": 1_793_610_000_000 + seq,
        "data": {"id": f"m{seq}", "role": "user", "content": [{"type": "text", "text": noise}]},
    }


def _write_log(path: Path, events: int, per_frame: int) -> int:
    """A zstd log of ``events`` events, ``per_frame`` per frame; its decompressed size."""
    cctx = zstandard.ZstdCompressor(level=1)
    raw = 0
    with path.open("wb") as f:
        for start in range(0, events, per_frame):
            body = b"".join(
                orjson.dumps(_event(s)) + b"\n"
                for s in range(start, min(events, start + per_frame))
            )
            raw += len(body)
            f.write(cctx.compress(body))
    return raw


def test_peak_memory_is_bounded_whatever_the_log_size(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl.zstd"
    events = 12_000
    raw = _write_log(path, events, per_frame=50)
    size = path.stat().st_size
    assert size > 3 * MIB and raw > 7 * MIB
    tracemalloc.start()
    try:
        with path.open("rb") as f:
            scanner = LogScanner(f)
            seqs = 0
            last = -1
            for item in scanner:
                seq = item.event["seq"]
                assert seq == last + 1
                last = seq
                seqs += 1
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seqs == events and scanner.frames == events // 50 and not scanner.torn
    print(f"file {size / MIB:.1f} MiB ({raw / MIB:.1f} MiB of JSON): peak {peak / 1024:.0f} KiB")
    assert peak < 1 * MIB, f"peak {peak} bytes for a {size}-byte log"
    assert peak < size / 8


def test_one_huge_frame_is_streamed_too(tmp_path: Path) -> None:
    """A log re-encoded as a single frame (no append batches) is still read chunk by
    chunk: memory is not one frame's worth."""
    path = tmp_path / "session.v4.jsonl.zstd"
    raw = _write_log(path, 10_000, per_frame=10_000)
    tracemalloc.start()
    try:
        with path.open("rb") as f:
            count = sum(1 for _ in LogScanner(f))
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 10_000
    print(f"one frame of {raw / MIB:.1f} MiB: peak {peak / 1024:.0f} KiB")
    assert peak < 1 * MIB and peak < raw / 6, f"peak {peak} bytes for {raw} bytes in one frame"


def test_resuming_anywhere_reads_each_event_once(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl.zstd"
    _write_log(path, 2_000, per_frame=37)
    data = path.read_bytes()
    seen: list[int] = []
    pos = LogPosition()
    # the file grows in uneven steps (torn frames included); each read resumes
    for cut in [*range(0, len(data), len(data) // 13 + 1), len(data)]:
        scanner = LogScanner(io.BytesIO(data[:cut]), pos, zstd=True, chunk_size=4096)
        seen.extend(item.event["seq"] for item in scanner)
        pos = scanner.position
    assert seen == list(range(2_000))
    # and from the resume point of any event
    with path.open("rb") as f:
        items = list(LogScanner(f))
        for k in (0, 1, 36, 37, 38, 1_999):
            rest = [i.event["seq"] for i in LogScanner(f, items[k].after)]
            assert rest == list(range(k + 1, 2_000)), k
            again = [i.event["seq"] for i in LogScanner(f, items[k].at)]
            assert again == list(range(k, 2_000)), k
        # frame by frame, every frame whole
        frames = list(iter_frames(f))
    assert len(frames) == -(-2_000 // 37) and all(fr.end is not None for fr in frames)
    assert sum(fr.data.count(b"\n") for fr in frames) == 2_000

"""A host file is copied into the store only when it is an image (issue: any readable
file named by `attachment.hostPath` was copied into `images/` as it was)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.archive_fixtures import Surface
from tests.e2e.harness import DaemonProcess, running_daemon
from tests.e2e.test_archive_prestep import connect, params, result, session_dir


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    with running_daemon() as d:
        yield d


def test_a_file_that_is_not_an_image_is_archived_as_the_placeholder(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    secret = tmp_path / "photo.png"  # named like an image, is a key
    secret.write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n")
    real = tmp_path / "real.png"
    real.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 32)
    s = Surface()
    s.system()
    s.user(
        "two pictures",
        images=[
            {"attachmentId": "a1", "mediaType": "image/png", "hostPath": str(secret)},
            {"attachmentId": "a2", "mediaType": "image/png", "hostPath": str(real)},
        ],
    )
    for i in range(30):
        s.turn_pair(i, 300)
    c = connect(daemon)
    res = result(c.call(1, "agent/pre-step", params(s, "e2e-not-an-image")))
    c.close()
    warnings = [w for w in res["warnings"] if "placeholder" in w]
    assert len(warnings) == 1 and "image 0 " in warnings[0], res["warnings"]
    assert "no readable image file" in warnings[0]
    base = session_dir(daemon, "e2e-not-an-image")
    first = base / res["compaction"]["folders"][0]
    meta = orjson.loads((first / "meta.json").read_bytes())
    copied = [ref["name"] for ref in meta["images"]]
    assert len(copied) == 1 and copied[0].endswith("-1.png")
    files = {p.name: p.read_bytes() for p in (base / "images").iterdir() if p.suffix == ".png"}
    assert list(files.values()) == [real.read_bytes()]
    assert secret.read_bytes() not in files.values()


def _vm_hwm_mib(pid: int) -> float:
    """The daemon's peak resident set so far (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 32


def _archive(daemon: DaemonProcess, sid: str, images: list[dict[str, str]]) -> dict[str, Any]:
    s = Surface()
    s.system()
    s.user("pictures", images=images)
    for i in range(30):
        s.turn_pair(i, 300)
    c = connect(daemon)
    res = result(c.call(1, "agent/pre-step", params(s, sid)))
    c.close()
    assert res["compaction"] is not None, res["warnings"]
    return res


def test_a_full_width_extension_and_an_unknown_media_type_never_block_the_archive(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    real = tmp_path / "photo.ｐｎｇ"
    real.write_bytes(PNG)
    unreadable = tmp_path / "other.ｐｎｇ"
    unreadable.write_bytes(b"not an image at all")
    weird = {"mediaType": "application/x-unknown", "name": "photo.ｐｎｇ"}
    res = _archive(
        daemon,
        "e2e-full-width",
        [
            {"attachmentId": "a1", **weird, "hostPath": str(real)},
            {"attachmentId": "a2", **weird, "hostPath": str(unreadable)},
        ],
    )
    warnings = [w for w in res["warnings"] if "placeholder" in w]
    assert len(warnings) == 1 and "image 1 " in warnings[0], res["warnings"]
    base = session_dir(daemon, "e2e-full-width")
    first = base / res["compaction"]["folders"][0]
    meta = orjson.loads((first / "meta.json").read_bytes())
    (ref,) = meta["images"]
    assert ref["name"].isascii() and ref["name"].endswith("-1-0.png")
    assert ref["originalName"] == "photo.ｐｎｇ" and ref["attachmentId"] == "a1"
    assert (base / "images" / ref["name"]).read_bytes() == PNG
    text = (first / "context.json").read_text(encoding="utf-8")
    assert f"[图片：（{ref['name']}）]" in text and "-1-1.png）]" in text


def test_a_300_mb_image_is_a_placeholder_and_the_archive_lands_in_bounded_memory(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    big = tmp_path / "huge.png"
    big.write_bytes(PNG)
    os.truncate(big, 300 * 1000 * 1000)  # sparse: a PNG header, then 300 MB
    small = tmp_path / "small.png"
    small.write_bytes(PNG)
    before = _vm_hwm_mib(daemon.proc.pid)
    res = _archive(
        daemon,
        "e2e-huge-image",
        [
            {"attachmentId": "big", "mediaType": "image/png", "hostPath": str(big)},
            {"attachmentId": "small", "mediaType": "image/png", "hostPath": str(small)},
        ],
    )
    grown = _vm_hwm_mib(daemon.proc.pid) - before
    assert grown < 32, f"daemon peak RSS grew {grown:.1f} MiB"
    warnings = [w for w in res["warnings"] if "placeholder" in w]
    assert len(warnings) == 1 and "image 0 " in warnings[0], res["warnings"]
    base = session_dir(daemon, "e2e-huge-image")
    meta = orjson.loads((base / res["compaction"]["folders"][0] / "meta.json").read_bytes())
    assert [r["attachmentId"] for r in meta["images"]] == ["small"]
    files = [p for p in (base / "images").iterdir() if p.name != "index.json"]
    assert [p.read_bytes() for p in files] == [PNG]

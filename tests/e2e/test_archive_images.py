"""A host file is copied into the store only when it is an image (issue: any readable
file named by `attachment.hostPath` was copied into `images/` as it was)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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

"""`memory_image` through the real socket (issue 11): after an archive with pictures and a
judge, the tool finds an archived image by name, by memory id and by query, and writes
nothing; another session sees none of it; a session never seen gets no directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import texts
from tests.archive_fixtures import Surface
from tests.e2e.harness import DaemonProcess, LineSocket, running_daemon
from tests.e2e.test_archive_prestep import connect, params, result, session_dir

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 32


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    with running_daemon() as d:
        yield d


def tool(c: LineSocket, sid: str, name: str, arguments: Any, id_: int = 9) -> dict[str, Any]:
    return result(
        c.call(id_, "tools/call", {"session": {"id": sid}, "name": name, "arguments": arguments})
    )


def archive_screenshot(daemon: DaemonProcess, tmp_path: Path, sid: str) -> dict[str, Any]:
    """One archived screenshot; its row of images/index.json."""
    shot = tmp_path / f"{sid}.png"
    shot.write_bytes(PNG)
    s = Surface()
    s.system()
    s.user(
        "部署失败的报错截图",
        images=[
            {
                "attachmentId": "a1",
                "mediaType": "image/png",
                "width": 1280,
                "height": 720,
                "name": "error-shot.png",
                "hostPath": str(shot),
            }
        ],
    )
    for i in range(30):
        s.turn_pair(i, 300)
    c = connect(daemon)
    res = result(c.call(1, "agent/pre-step", params(s, sid)))
    assert res["compaction"] is not None, res["warnings"]
    token = res["compaction"]["token"]
    assert result(c.call(2, "archive/commit", {"session": {"id": sid}, "token": token}))["ok"]
    c.close()
    (row,) = orjson.loads((session_dir(daemon, sid) / "images" / "index.json").read_bytes())[
        "images"
    ]
    assert isinstance(row, dict)
    return row


def snapshot(directory: Path) -> dict[str, tuple[int, int, bytes]]:
    return {
        str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_found_by_name_memory_id_and_query_and_nothing_written(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    sid = "e2e-image-find"
    row = archive_screenshot(daemon, tmp_path, sid)
    c = connect(daemon)
    init = result(c.call(0, "initialize", {"protocolVersion": 1, "capabilities": {"tools": True}}))
    assert "memory_image" in [t["name"] for t in init["tools"]]
    judged = tool(
        c,
        sid,
        "memory_judge",
        {
            "updates": [
                {
                    "id": row["folderId"],
                    "alpha": 0.7,
                    "beta": 6,
                    "keywords": ["部署", "报错", "截图"],
                }
            ]
        },
    )
    assert judged["value"]["updated"] == [row["folderId"]], judged
    base = session_dir(daemon, sid)
    before = snapshot(base)
    path = str(base / "images" / row["name"])
    for arguments in (
        {"name": row["name"]},
        {"name": "error-shot"},
        {"memoryId": row["folderId"]},
        {"query": "报错"},
        orjson.dumps({"query": "部署，截图", "limit": 5}).decode(),
        {},
    ):
        answer = tool(c, sid, "memory_image", arguments)
        assert answer["isError"] is False, answer
        (hit,) = answer["value"]["images"]
        assert (hit["name"], hit["path"], hit["exists"]) == (row["name"], path, True)
        assert hit["memoryId"] == row["folderId"] and hit["bytes"] == len(PNG)
        assert (hit["width"], hit["height"]) == (1280, 720)
        text = answer["content"][0]["text"]
        assert f"[图片：（{row['name']}，文件：{path}）]" in text
        assert texts.IMAGE_READ_HINT in text
    c.close()
    assert snapshot(base) == before


def test_another_sessions_image_is_not_found(daemon: DaemonProcess, tmp_path: Path) -> None:
    theirs = archive_screenshot(daemon, tmp_path, "e2e-image-theirs")
    c = connect(daemon)
    by_name = tool(c, "e2e-image-mine", "memory_image", {"name": theirs["name"]})
    assert by_name["isError"] is False and by_name["value"]["images"] == []
    by_id = tool(c, "e2e-image-mine", "memory_image", {"memoryId": theirs["folderId"]})
    assert by_id["isError"] is True
    assert by_id["content"][0]["text"] == texts.IMAGE_UNKNOWN_MEMORY.format(
        memory_id=theirs["folderId"]
    )
    nothing = tool(c, "e2e-image-mine", "memory_image", {})
    assert nothing["content"][0]["text"] == texts.IMAGE_NONE
    c.close()
    assert not session_dir(daemon, "e2e-image-mine").exists()  # a read opens lazily

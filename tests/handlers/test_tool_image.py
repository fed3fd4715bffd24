"""`memory_image` through `tools/call` (handlers.tool_image), on images archived by the
real pre-step: found by name, memory id and query, read-only, lazily rebuilt table,
session isolation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import texts
from engine.jsonio import read_json
from handlers.app import App
from handlers.context import RequestContext
from handlers.pre_step import ArchiveCommitParams, PreStepParams, archive_commit, pre_step
from handlers.tools import ToolCallParams, tool_schemas, tools_call
from tests.archive_fixtures import T0, Surface, floored_params
from tests.handlers.app_fixtures import make_app, request_ctx

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 32
NOW = T0 + 3_600_000


def ctx(method: str, now_ms: int = NOW) -> RequestContext:
    return request_ctx(method, now_ms)


async def call(app: App, sid: str, name: str, arguments: Any) -> dict[str, Any]:
    params = ToolCallParams.model_validate(
        {"session": {"id": sid}, "turn": 40, "callId": "c1", "name": name, "arguments": arguments}
    )
    return await tools_call(app, params, ctx("tools/call"))


async def archive_pictures(
    app: App, tmp_path: Path, sid: str, now_ms: int = NOW
) -> dict[str, dict[str, Any]]:
    """Archive a conversation holding three pictures and report it landed (as the host
    does); their table rows by original name."""
    s = Surface()
    s.system()
    pictures = {}
    for label in ("invoice", "cat-1", "cat-2"):
        pictures[label] = tmp_path / f"{sid}-{label}.png"
        pictures[label].write_bytes(PNG)
    s.user(
        "这张是上海出差的发票",
        images=[
            {
                "attachmentId": "a1",
                "mediaType": "image/png",
                "width": 640,
                "height": 480,
                "bytes": len(PNG),
                "name": "invoice.png",
                "hostPath": str(pictures["invoice"]),
            }
        ],
    )
    for i in range(3):
        s.turn_pair(i, 300)
    s.user(
        "猫的两张照片",
        images=[
            {
                "attachmentId": f"a{n}",
                "mediaType": "image/png",
                "name": f"{label}.png",
                "hostPath": str(pictures[label]),
            }
            for n, label in ((2, "cat-1"), (3, "cat-2"))
        ],
    )
    for i in range(3, 30):
        s.turn_pair(i, 300)
    answer = await pre_step(
        app, PreStepParams.model_validate(floored_params(s, sid)), ctx("agent/pre-step", now_ms)
    )
    assert answer["compaction"] is not None, answer["warnings"]
    commit = {"session": {"id": sid}, "token": answer["compaction"]["token"]}
    await archive_commit(app, ArchiveCommitParams.model_validate(commit), ctx("archive/commit"))
    rows = read_json(session_dir(app, sid) / "images" / "index.json")["images"]
    by_original = {r["originalName"].removesuffix(".png"): r for r in rows}
    assert sorted(by_original) == ["cat-1", "cat-2", "invoice"]
    return by_original


def session_dir(app: App, sid: str) -> Path:
    return app.memory_root() / "sessions" / sid


def snapshot(directory: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under ``directory``: size, mtime and bytes."""
    return {
        str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def app(tmp_path: Path) -> App:
    return make_app(tmp_path / "mem")


async def test_initialize_lists_the_tool_with_the_references_texts(app: App) -> None:
    (schema,) = [t for t in tool_schemas(app) if t["name"] == "memory_image"]
    assert schema["description"] == texts.IMAGE_DESCRIPTION
    props = schema["parameters"]["properties"]
    assert sorted(props) == ["limit", "memoryId", "name", "query"]
    assert props["limit"]["minimum"] == 1 and props["limit"]["maximum"] == 20
    assert props["limit"]["default"] == 10
    assert "required" not in schema["parameters"]


async def test_found_by_name_by_memory_id_and_by_query(app: App, tmp_path: Path) -> None:
    rows = await archive_pictures(app, tmp_path, "s-find")
    invoice = rows["invoice"]
    images = session_dir(app, "s-find") / "images"

    by_name = await call(app, "s-find", "memory_image", {"name": invoice["name"][-12:]})
    assert by_name["isError"] is False
    (hit,) = by_name["value"]["images"]
    assert hit["path"] == str(images / invoice["name"]) and Path(hit["path"]).is_absolute()
    assert hit["exists"] is True and hit["bytes"] == len(PNG)
    assert (hit["mediaType"], hit["width"], hit["height"]) == ("image/png", 640, 480)
    assert hit["memoryId"] == invoice["folderId"]
    text = by_name["content"][0]["text"]
    assert f"[图片：（{invoice['name']}，文件：{hit['path']}）]" in text
    assert f"所属记忆：{invoice['folderId']}" in text

    by_original = await call(app, "s-find", "memory_image", '{"name": "INVOICE"}')
    assert [i["name"] for i in by_original["value"]["images"]] == [invoice["name"]]

    by_memory = await call(app, "s-find", "memory_image", {"memoryId": invoice["folderId"]})
    same_folder = sorted(r["name"] for r in rows.values() if r["folderId"] == invoice["folderId"])
    assert sorted(i["name"] for i in by_memory["value"]["images"]) == same_folder

    # a keyword only the judge gave: the query finds it through the folder's keywords
    judged = await call(
        app,
        "s-find",
        "memory_judge",
        {
            "updates": [
                {
                    "id": invoice["folderId"],
                    "alpha": 0.6,
                    "beta": 5,
                    "keywords": ["报销", "发票", "出差"],
                }
            ]
        },
    )
    assert judged["value"]["updated"] == [invoice["folderId"]], judged
    by_query = await call(app, "s-find", "memory_image", {"query": "报销"})
    assert invoice["name"] in [i["name"] for i in by_query["value"]["images"]]
    assert all(i["memoryId"] == invoice["folderId"] for i in by_query["value"]["images"])
    assert by_query["value"]["images"][0]["matched"] == ["报销"]
    miss = await call(app, "s-find", "memory_image", {"query": "火星基地"})
    assert miss["isError"] is False and miss["content"][0]["text"] == texts.IMAGE_NOT_FOUND


async def test_no_filter_order_and_limit(app: App, tmp_path: Path) -> None:
    await archive_pictures(app, tmp_path, "s-order")
    base = session_dir(app, "s-order")
    created = {f["id"]: f["createdAt"] for f in read_json(base / "index.json")["folders"]}
    table = read_json(base / "images" / "index.json")["images"]
    # most recently archived folder first; a folder's images in the order archived
    expected = [
        r["name"]
        for r in sorted(table, key=lambda r: (created[r["folderId"]], r["folderId"]), reverse=True)
    ]
    assert len({r["folderId"] for r in table}) == 2  # the order has something to decide
    everything = await call(app, "s-order", "memory_image", {})
    assert [i["name"] for i in everything["value"]["images"]] == expected
    one = await call(app, "s-order", "memory_image", {"limit": 1})
    assert one["value"]["count"] == 1 and one["value"]["total"] == 3
    assert [i["name"] for i in one["value"]["images"]] == expected[:1]
    assert one["content"][0]["text"].splitlines()[0] == texts.IMAGE_RECENT.format(n=1, total=3)
    two = await call(app, "s-order", "memory_image", {"limit": 2})
    assert [i["name"] for i in two["value"]["images"]] == expected[:2]


async def test_a_missing_file_is_reported_not_refused(app: App, tmp_path: Path) -> None:
    rows = await archive_pictures(app, tmp_path, "s-missing")
    cat = rows["cat-1"]
    (session_dir(app, "s-missing") / "images" / cat["name"]).unlink()
    answer = await call(app, "s-missing", "memory_image", {"name": cat["name"]})
    assert answer["isError"] is False
    (hit,) = answer["value"]["images"]
    assert hit["exists"] is False
    assert f"[图片：（{cat['name']}，文件：{hit['path']}）]（缺失）" in answer["content"][0]["text"]
    assert texts.IMAGE_MISSING_HINT in answer["content"][0]["text"]


async def test_calls_write_nothing(app: App, tmp_path: Path) -> None:
    rows = await archive_pictures(app, tmp_path, "s-ro")
    base = session_dir(app, "s-ro")
    before = snapshot(base)
    calls: list[Any] = [
        {},
        {"name": rows["invoice"]["name"]},
        {"memoryId": rows["invoice"]["folderId"]},
        {"query": "发票 猫"},
        {"memoryId": "mem-20200101T000000Z-0001"},
        {"limit": "many"},
    ]
    for arguments in calls:
        await call(app, "s-ro", "memory_image", arguments)
    restarted = make_app(app.memory_root())  # first use after a restart loads the table
    for arguments in calls:
        await call(restarted, "s-ro", "memory_image", arguments)
    assert snapshot(base) == before


async def test_a_missing_table_is_rebuilt_once_then_left_alone(app: App, tmp_path: Path) -> None:
    rows = await archive_pictures(app, tmp_path, "s-rebuild")
    table = session_dir(app, "s-rebuild") / "images" / "index.json"
    before = read_json(table)["images"]
    table.unlink()
    restarted = make_app(app.memory_root())
    answer = await call(restarted, "s-rebuild", "memory_image", {"name": rows["cat-2"]["name"]})
    assert [i["name"] for i in answer["value"]["images"]] == [rows["cat-2"]["name"]]
    rebuilt = read_json(table)["images"]
    key = lambda r: orjson.dumps(r, option=orjson.OPT_SORT_KEYS)  # noqa: E731
    assert sorted(map(key, rebuilt)) == sorted(map(key, before))
    after = snapshot(session_dir(app, "s-rebuild"))
    await call(restarted, "s-rebuild", "memory_image", {})
    await call(make_app(app.memory_root()), "s-rebuild", "memory_image", {})
    assert snapshot(session_dir(app, "s-rebuild")) == after


async def test_a_stale_table_is_rebuilt(app: App, tmp_path: Path) -> None:
    """A row lost (a folder adopted at load, a table of an older version): the file in
    images/ without a row makes the next call rebuild the table from the metas."""
    rows = await archive_pictures(app, tmp_path, "s-stale")
    table = session_dir(app, "s-stale") / "images" / "index.json"
    doc = read_json(table)
    lost = rows["cat-1"]
    doc["images"] = [r for r in doc["images"] if r["name"] != lost["name"]]
    table.write_bytes(orjson.dumps(doc))
    restarted = make_app(app.memory_root())
    answer = await call(restarted, "s-stale", "memory_image", {"memoryId": lost["folderId"]})
    assert lost["name"] in [i["name"] for i in answer["value"]["images"]]
    assert lost["name"] in {r["name"] for r in read_json(table)["images"]}


async def test_only_the_calling_sessions_store_is_searched(app: App, tmp_path: Path) -> None:
    mine = await archive_pictures(app, tmp_path, "s-mine")
    theirs = await archive_pictures(app, tmp_path, "s-theirs", now_ms=NOW + 86_400_000)
    name = await call(app, "s-mine", "memory_image", {"name": theirs["invoice"]["name"]})
    assert name["value"]["images"] == [] and name["isError"] is False
    everything = await call(app, "s-mine", "memory_image", {})
    assert {i["name"] for i in everything["value"]["images"]} == {r["name"] for r in mine.values()}
    assert all(str(session_dir(app, "s-mine")) in i["path"] for i in everything["value"]["images"])
    other_id = theirs["invoice"]["folderId"]
    assert other_id not in {r["folderId"] for r in mine.values()}
    refused = await call(app, "s-mine", "memory_image", {"memoryId": other_id})
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == texts.IMAGE_UNKNOWN_MEMORY.format(memory_id=other_id)
    assert refused["value"]["images"] == []


async def test_bad_argument_types_are_a_readable_refusal(app: App, tmp_path: Path) -> None:
    await archive_pictures(app, tmp_path, "s-bad")
    answer = await call(app, "s-bad", "memory_image", {"query": ["猫"], "limit": 2.5})
    assert answer["isError"] is True
    assert [e["field"] for e in answer["value"]["errors"]] == ["arguments.query", "arguments.limit"]
    assert answer["content"][0]["text"].startswith("memory_image 参数有误：")

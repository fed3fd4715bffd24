"""Finding archived images (engine.store.image_lookup, engine.image_tool) and keeping the
image table current (engine.store.images), against real stores written by transactions."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import texts
from engine.config import build_config
from engine.image_tool import parse_arguments, render_answer
from engine.jsonio import read_json, write_json_atomic
from engine.recall.dates import resolve_timezone
from engine.store import FolderMeta, SessionStore, open_session
from engine.store.image_lookup import ImageFilter, find_images, on_disk_path
from engine.store.images import image_files

T0 = 1_795_000_000_000
CFG = build_config([("test", {})]).config
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
SPEC = Path("/work/shared/spec/dsh-rofm-reference.txt")

Image = tuple[str, dict[str, Any]]


def _meta(
    store: SessionStore, created: int, title: str, keywords: Sequence[str], images: list[Image]
) -> FolderMeta:
    scored = bool(keywords)
    return FolderMeta.model_validate(
        {
            "id": store.new_folder_id(created),
            "createdAt": created,
            "alpha": 0.5 if scored else 0,
            "beta": 0,
            "scored": scored,
            "keywords": list(keywords),
            "title": title,
            "images": [{"name": n, "mediaType": "image/png", **ref} for n, ref in images],
        }
    )


def archive(
    store: SessionStore,
    folders: Sequence[tuple[int, str, Sequence[str], list[Image]]],
    txn: str = "arc-1",
) -> list[str]:
    """Commit folders ``(createdAt, title, keywords, [(image name, ref fields)])`` with
    their image files, as an archive does; returns the folder ids."""
    ids: list[str] = []
    with store.transaction(txn) as t:
        for created, title, keywords, images in folders:
            meta = _meta(store, created, title, keywords, images)
            t.add_folder(
                meta,
                [{"role": "user", "content": title}],
                images=[(name, PNG) for name, _ in images],
            )
            ids.append(meta.id)
    store.finalize(txn)
    return ids


def find(store: SessionStore, **kw: Any) -> list[tuple[str, str]]:
    store.refresh_image_index(image_files(store.paths))
    lookup = find_images(store, ImageFilter(**kw), CFG)
    return [(h.memory_id, h.name) for h in lookup.hits]


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return open_session(tmp_path / "root", "sess-img")


@pytest.fixture
def three(store: SessionStore) -> list[str]:
    return archive(
        store,
        [
            (
                T0,
                "上海出差的发票",
                ["发票", "报销"],
                [("img-1-0-0.png", {"originalName": "Invoice.PNG"})],
            ),
            (
                T0 + 60_000,
                "猫的照片",
                ["猫", "宠物"],
                [("img-1-1-0.png", {}), ("img-1-1-1.png", {})],
            ),
            (
                T0 + 120_000,
                "网关架构图",
                ["星港项目", "接口网关"],
                [("img-1-2-0.png", {"width": 800, "height": 600, "bytes": 999})],
            ),
        ],
    )


def test_no_filter_lists_the_most_recently_archived_first_table_order_within_a_folder(
    store: SessionStore, three: list[str]
) -> None:
    a, b, c = three
    assert find(store) == [
        (c, "img-1-2-0.png"),
        (b, "img-1-1-0.png"),
        (b, "img-1-1-1.png"),
        (a, "img-1-0-0.png"),
    ]


def test_limit_keeps_the_first_and_total_counts_all(store: SessionStore, three: list[str]) -> None:
    store.refresh_image_index(image_files(store.paths))
    lookup = find_images(store, ImageFilter(limit=2), CFG)
    assert [h.name for h in lookup.hits] == ["img-1-2-0.png", "img-1-1-0.png"]
    assert lookup.total == 4


def test_name_is_a_folded_substring_of_the_stored_or_the_original_name(
    store: SessionStore, three: list[str]
) -> None:
    a, b, _ = three
    assert find(store, name="1-1-") == [(b, "img-1-1-0.png"), (b, "img-1-1-1.png")]
    assert find(store, name="invoice") == [(a, "img-1-0-0.png")]
    assert find(store, name="ＩＭＧ-1-0") == [(a, "img-1-0-0.png")]  # NFKC + case fold
    assert find(store, name="nothing-like-it") == []


def test_memory_id_is_exact_and_an_unknown_one_is_reported(
    store: SessionStore, three: list[str]
) -> None:
    _, b, _ = three
    assert find(store, memory_id=b) == [(b, "img-1-1-0.png"), (b, "img-1-1-1.png")]
    assert find(store, memory_id=b, name="-1.png") == [(b, "img-1-1-1.png")]
    lookup = find_images(store, ImageFilter(memory_id="mem-20200101T000000Z-0001"), CFG)
    assert lookup.unknown_memory and lookup.hits == ()


def test_query_hits_keywords_title_and_file_names_and_more_terms_rank_first(
    store: SessionStore, three: list[str]
) -> None:
    a, b, c = three
    assert find(store, terms=("网关",)) == [(c, "img-1-2-0.png")]  # inside keyword 接口网关
    assert find(store, terms=("上海",)) == [(a, "img-1-0-0.png")]  # title only
    assert find(store, terms=("invoice",)) == [(a, "img-1-0-0.png")]  # original file name
    assert find(store, terms=("1-1-1",)) == [(b, "img-1-1-1.png")]  # stored file name
    # two terms hit the invoice, one the cat: the invoice first although older
    assert find(store, terms=("猫", "发票", "报销")) == [
        (a, "img-1-0-0.png"),
        (b, "img-1-1-0.png"),
        (b, "img-1-1-1.png"),
    ]
    assert find(store, terms=("猫",), name="1-1-1") == [(b, "img-1-1-1.png")]
    assert find(store, terms=("不存在的词",)) == []


def test_hit_facts_path_and_a_missing_file(store: SessionStore, three: list[str]) -> None:
    _, _, c = three
    store.refresh_image_index(image_files(store.paths))
    (hit,) = find_images(store, ImageFilter(memory_id=c), CFG).hits
    assert hit.path == str(store.image_path("img-1-2-0.png")) and Path(hit.path).is_absolute()
    assert hit.exists and hit.bytes == len(PNG)  # the file's size, not the recorded 999
    assert (hit.media_type, hit.width, hit.height) == ("image/png", 800, 600)
    assert hit.created_at == T0 + 120_000 and hit.title == "网关架构图"
    store.image_path("img-1-2-0.png").unlink()
    (gone,) = find_images(store, ImageFilter(memory_id=c), CFG).hits
    assert not gone.exists and gone.bytes == 999 and gone.path == hit.path


def test_a_row_with_a_name_the_store_would_not_write_is_never_answered(
    store: SessionStore, three: list[str]
) -> None:
    a, _, _ = three
    doc = read_json(store.paths.images_index)
    doc["images"].append({"name": "../../secret.png", "folderId": a})
    write_json_atomic(store.paths.images_index, doc)
    again = open_session(store.paths.root, "sess-img")
    assert "../../secret.png" not in [n for _, n in find(again)]
    assert len(find(again)) == 4


# ---- the image table: missing or stale → rebuilt, else untouched ------------------


def _table(store: SessionStore) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = read_json(store.paths.images_index)["images"]
    return rows


def test_a_missing_table_is_rebuilt_from_the_metas(store: SessionStore, three: list[str]) -> None:
    before = _table(store)
    store.paths.images_index.unlink()
    again = open_session(store.paths.root, "sess-img")
    assert len(find(again)) == 4
    assert sorted(orjson.dumps(r) for r in _table(again)) == sorted(orjson.dumps(r) for r in before)


def test_a_file_without_a_row_makes_the_table_stale(store: SessionStore, three: list[str]) -> None:
    """A folder adopted into the index at load (crash before the table was written)."""
    _, b, _ = three
    doc = read_json(store.paths.images_index)
    doc["images"] = [r for r in doc["images"] if r["folderId"] != b]
    write_json_atomic(store.paths.images_index, doc)
    again = open_session(store.paths.root, "sess-img")
    files = image_files(again.paths)
    assert not again.image_index_current(files)
    assert again.refresh_image_index(files)
    assert {r["name"] for r in _table(again)} == files
    assert find(again, memory_id=b) == [(b, "img-1-1-0.png"), (b, "img-1-1-1.png")]


def test_a_row_of_a_folder_not_in_the_index_makes_the_table_stale(
    store: SessionStore, three: list[str]
) -> None:
    a, _, _ = three
    doc = read_json(store.paths.images_index)
    doc["images"].append({"name": "img-9-9-9.png", "folderId": "mem-20200101T000000Z-0001"})
    doc["images"][0]["note"] = "kept"  # an unknown field of a row that stays
    write_json_atomic(store.paths.images_index, doc)
    again = open_session(store.paths.root, "sess-img")
    assert again.refresh_image_index(image_files(again.paths))
    rows = _table(again)
    assert "img-9-9-9.png" not in {r["name"] for r in rows}
    assert next(r for r in rows if r["folderId"] == a)["note"] == "kept"


def test_a_current_table_is_not_written_and_a_stray_file_costs_one_rebuild(
    store: SessionStore, three: list[str]
) -> None:
    again = open_session(store.paths.root, "sess-img")
    table = again.paths.images_index
    stamp = (table.read_bytes(), table.stat().st_mtime_ns)
    assert not again.refresh_image_index(image_files(again.paths))
    assert (table.read_bytes(), table.stat().st_mtime_ns) == stamp
    (again.paths.images_dir / "img-stray-0-0.png").write_bytes(PNG)  # no meta names it
    (again.paths.images_dir / ".DS_Store").write_bytes(b"x")  # not an image file
    files = image_files(again.paths)
    assert ".DS_Store" not in files and "index.json" not in files
    assert not again.image_index_current(files)
    assert not again.refresh_image_index(files)  # rebuilt: nothing to change, not written
    assert (table.read_bytes(), table.stat().st_mtime_ns) == stamp
    assert again.image_index_current(files)  # checked: the next call does not rebuild
    archive(again, [(T0 + 180_000, "新的一段", [], [("img-2-0-0.png", {})])], txn="arc-2")
    assert not again.image_index_current(image_files(again.paths))  # checked again


def test_a_store_without_a_directory_stays_without_one(tmp_path: Path) -> None:
    lazy = open_session(tmp_path, "never-seen", create=False)
    assert image_files(lazy.paths) == frozenset()
    assert not lazy.refresh_image_index(frozenset())
    assert find_images(lazy, ImageFilter(), CFG).hits == ()
    assert not (tmp_path / "sessions").exists()


# ---- on-disk spelling of the path (macOS NFD names) ----------------------------------


def test_on_disk_path_spells_non_ascii_components_as_the_directory_lists_them(
    tmp_path: Path,
) -> None:
    nfd = unicodedata.normalize("NFD", "记忆-café")
    nfc = unicodedata.normalize("NFC", "记忆-café")
    assert nfd != nfc
    (tmp_path / nfd / "images").mkdir(parents=True)
    given = tmp_path / nfc / "images" / "img-1.png"
    assert on_disk_path(given) == tmp_path / nfd / "images" / "img-1.png"
    assert on_disk_path(tmp_path / "plain" / "x.png") == tmp_path / "plain" / "x.png"
    assert on_disk_path(tmp_path / "未知" / "x") == tmp_path / "未知" / "x"


def test_an_nfd_memory_root_is_answered_as_it_is_on_disk(tmp_path: Path) -> None:
    nfd = unicodedata.normalize("NFD", "mémoire")
    (tmp_path / nfd).mkdir()
    store = open_session(tmp_path / nfd, "s")
    archive(store, [(T0, "t", [], [("img-1-0-0.png", {})])])
    # the same store as a composed (NFC) path names it, where the system folds both
    composed = unicodedata.normalize("NFC", str(store.paths.images_dir))
    assert on_disk_path(Path(composed)) == store.paths.images_dir
    (hit,) = find_images(store, ImageFilter(), CFG).hits
    assert hit.path == str(store.paths.images_dir / "img-1-0-0.png")
    assert Path(hit.path).parents[3].name == nfd


# ---- arguments and the answer -------------------------------------------------------


def test_arguments_types_blank_limit_clamp_and_unknown_names() -> None:
    call = parse_arguments({"query": "  ", "memoryId": "", "name": None})
    assert call.filter == ImageFilter(limit=10) and not call.filter.filtered
    assert parse_arguments({"limit": 3.0}).filter == ImageFilter(limit=3)
    assert parse_arguments({"limit": "7"}).filter == ImageFilter(limit=7)
    clamped = parse_arguments({"limit": 50})
    assert clamped.filter == ImageFilter(limit=20)
    assert clamped.warnings == (texts.IMAGE_WARN_LIMIT_CLAMPED.format(given=50, used=20),)
    assert parse_arguments({"limit": 0}).filter == ImageFilter(limit=1)
    bad = parse_arguments({"limit": True, "name": 3, "keywords": "猫"})
    assert bad.filter is None
    assert [e["field"] for e in bad.errors] == ["arguments.name", "arguments.limit"]
    assert "keywords" in bad.warnings[0]
    terms = parse_arguments({"query": "猫，照片、猫;截图  x"}).filter
    assert terms is not None and terms.terms == ("猫", "照片", "截图", "x")
    many = parse_arguments({"query": " ".join(f"w{i}" for i in range(20))})
    assert many.filter is not None and len(many.filter.terms) == 16
    assert many.warnings == (texts.IMAGE_WARN_QUERY_TERMS.format(n=20, max=16),)


def _render(store: SessionStore, arguments: dict[str, Any]) -> tuple[dict[str, Any], str, bool]:
    call = parse_arguments(arguments)
    assert call.filter is not None
    store.refresh_image_index(image_files(store.paths))
    lookup = find_images(store, call.filter, CFG)
    answer = render_answer(call, lookup, tz=resolve_timezone("Asia/Shanghai"), compute_dates=True)
    return answer.value, answer.text, answer.is_error


def test_answer_text_and_value(store: SessionStore, three: list[str]) -> None:
    c = three[2]
    store.image_path("img-1-1-1.png").unlink()
    value, text, is_error = _render(store, {"limit": 3})
    assert not is_error
    lines = text.splitlines()
    assert lines[0] == texts.IMAGE_RECENT.format(n=3, total=4)
    path = store.image_path("img-1-2-0.png")
    assert lines[1] == f"1. [图片：（img-1-2-0.png，文件：{path}）]"
    assert lines[2] == f"   所属记忆：{c} · 归档于 2026-11-18 周三 19:08 · 标题：网关架构图"
    assert lines[3] == f"   媒体类型：image/png · 尺寸：800×600 · 大小：{len(PNG)} 字节"
    assert text.count("（缺失）") == 2  # the missing image, and the hint that names the mark
    assert re.search(r"^3\. \[图片：（img-1-1-1\.png，文件：.*）\]（缺失）$", text, re.M)
    assert lines[-2:] == [texts.IMAGE_READ_HINT, texts.IMAGE_MISSING_HINT]
    assert value["count"] == 3 and value["total"] == 4 and value["limit"] == 3
    first = value["images"][0]
    assert first["path"] == str(path) and first["exists"] is True
    assert first["memoryId"] == c and first["createdAt"] == T0 + 120_000
    assert first["archivedAt"] == "2026-11-18 周三 19:08"
    assert value["images"][2]["exists"] is False
    orjson.dumps(value)  # JSON all the way


def test_answer_headers_for_filters_misses_and_refusals(
    store: SessionStore, three: list[str]
) -> None:
    _, b, _ = three
    _, text, _ = _render(store, {"memoryId": b, "limit": 1})
    assert text.splitlines()[0] == texts.IMAGE_FOUND_PART.format(total=2, n=1, limit=1)
    _, text, _ = _render(store, {"memoryId": b})
    assert text.splitlines()[0] == texts.IMAGE_FOUND.format(total=2)
    value, text, is_error = _render(store, {"query": "没有这个"})
    assert (text, is_error, value["images"]) == (texts.IMAGE_NOT_FOUND, False, [])
    value, text, is_error = _render(store, {"memoryId": "mem-20200101T000000Z-0001"})
    assert is_error and text == texts.IMAGE_UNKNOWN_MEMORY.format(
        memory_id="mem-20200101T000000Z-0001"
    )


def test_answer_when_nothing_was_archived(tmp_path: Path) -> None:
    empty = open_session(tmp_path, "empty")
    _, text, is_error = _render(empty, {})
    assert (text, is_error) == (texts.IMAGE_NONE, False)
    ids = archive(empty, [(T0, "无图", [], [])])
    _, text, _ = _render(empty, {"memoryId": ids[0]})
    assert text == texts.IMAGE_NONE_IN_MEMORY.format(memory_id=ids[0])


# ---- texts against the reference (DESIGN.md: NFKC, the extraction's line breaks) ------


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


@pytest.mark.skipif(not SPEC.exists(), reason="reference text not available")
def test_description_and_parameters_are_the_references_phrases() -> None:
    spec = _squash(SPEC.read_text(encoding="utf-8"))
    fragments = [
        "回忆块里图片只显示文件名与文件路径;",
        "要按关键词/记忆id/文件名查找,",
        "用这个只读工具:",
        "在当前会话的归档里按记忆关键词/标题/文件名(query)、记忆文件夹id(memoryId)或图片文件名子串(name)过滤",
        "(都可选,不带过滤时返回最近归档的图片)",
        ";",
        "返回每张图的绝对路径、是否还存在、媒体类型/尺寸/大小、所属记忆id与归档时间;然后模型用read_image读取该路径即可查看图片",
        "。",
        "工具只读,不修改任何文件。",
    ]
    assert _squash(texts.IMAGE_DESCRIPTION) == "".join(fragments)
    for fragment in fragments:
        assert fragment in spec, fragment
    for text in (
        texts.IMAGE_PARAM_QUERY,
        texts.IMAGE_PARAM_MEMORY_ID,
        texts.IMAGE_PARAM_NAME,
        "limit?:" + texts.IMAGE_PARAM_LIMIT,
    ):
        assert _squash(text) in spec, text

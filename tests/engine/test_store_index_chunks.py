"""`index.json` read a few hundred rows at a time gives what parsing it whole gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.store import indexfile
from engine.store.indexfile import _rows_by_chunks, read_index, write_index
from engine.store.layout import SessionPaths, session_paths

TRICKY = '\n    },\n    {\n  "folders": [\n  ]'  # every cut mark, inside a string


def _rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"mem-20260101T{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}Z-0001",
            "createdAt": 1_767_225_600_000 + i,
            "alpha": 0.5,
            "keywords": ["星港", TRICKY][: 1 + i % 2],
            "title": TRICKY if i % 3 == 0 else f"第{i}段",
            "timeTags": [{"kind": "day", "nested": {"folders": [1, {"x": []}]}}],
            "futureField": {"rows": [{"a": 1}, {"b": [{}]}]} if i % 5 == 0 else [],
        }
        for i in range(n)
    ]


def _paths(tmp_path: Path) -> SessionPaths:
    paths = session_paths(tmp_path, "s1", per_session=True)
    paths.dir.mkdir(parents=True)
    return paths


def _whole(paths: SessionPaths) -> tuple[list[Any], dict[str, Any], str]:
    return read_index(paths)


@pytest.mark.parametrize("n", [1, 2, 511, 512, 513, 1100])
def test_an_index_we_wrote_is_read_in_chunks_as_whole(tmp_path: Path, n: int) -> None:
    paths = _paths(tmp_path)
    rows = _rows(n)
    write_index(paths, rows, {"generator": "dsh-rofm 1.5.6", "nested": {"folders": []}})
    data = paths.index.read_bytes()
    chunked = _rows_by_chunks(data, lambda row: row)
    assert chunked is not None, "the layout write_index writes is read in chunks"
    doc = orjson.loads(data)
    assert chunked == (doc["folders"], {k: v for k, v in doc.items() if k != "folders"})
    assert read_index(paths, lambda row: row) == _whole(paths) == (rows, chunked[1], "ok")


def test_the_reference_layout_with_rows_not_last_is_read_in_chunks(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    doc = {"version": 1, "folders": _rows(700), "generator": "dsh-rofm"}
    paths.index.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    chunked = _rows_by_chunks(paths.index.read_bytes(), lambda row: row)
    assert chunked == (doc["folders"], {"version": 1, "generator": "dsh-rofm"})


@pytest.mark.parametrize(
    "text",
    [
        '{"version": 1, "folders": [{"id": "a", "createdAt": 1}]}',  # compact
        '[\n  {\n    "id": "a",\n    "createdAt": 1\n  }\n]',  # a bare list
        '{\n  "folders": [\n    {\n      "id": "a"\n    }\n  ],\n  "folders": []\n}',
        '{\n  "folders": [\n    {\n      "id": "a"\n    },\n    {\n      "id": "b"\n    }\n  ]\n}x',
        '{\n  "folders": [\n    {\n      "id": "a"\n    },\n    {\n      "id": "b"\n  ]\n}',
    ],
)
def test_other_files_read_as_parsing_them_whole(tmp_path: Path, text: str) -> None:
    paths = _paths(tmp_path)
    paths.index.write_text(text, encoding="utf-8")
    assert read_index(paths, lambda row: row) == _whole(paths)


def test_every_torn_index_reads_as_parsing_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexfile, "ROWS_PER_CHUNK", 2)
    paths = _paths(tmp_path)
    write_index(paths, _rows(5), {"generator": "x"})
    data = paths.index.read_bytes()
    for cut in range(len(data)):
        paths.index.write_bytes(data[:cut])
        assert read_index(paths, lambda row: row) == _whole(paths), cut


def test_rows_are_converted_as_they_are_parsed(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    write_index(paths, _rows(1100), {})
    seen: list[str] = []

    def convert(row: dict[str, Any]) -> str:
        seen.append(row["id"])
        return str(row["id"])

    rows, _, status = read_index(paths, convert)
    assert status == "ok" and rows == seen == [r["id"] for r in _rows(1100)]

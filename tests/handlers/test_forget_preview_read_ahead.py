"""A `memory_forget` preview asks the disk at once for the candidates' `context.json`
(the one file it reads of each: `engine.store.folders.read_ahead`), reads each from the
file it opened, and leaves none open."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.recall.forget import ForgetCall
from handlers import tool_forget
from tests.engine.recall_fixtures import write_folders
from tests.handlers.app_fixtures import make_app

BASE_MS = 1_790_000_000_000


async def test_a_preview_asks_for_each_candidates_context_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(tmp_path)
    state = await app.sessions.get("s1")
    ids = write_folders(
        state.store,
        [
            {
                "createdAt": BASE_MS + i * 1000,
                "alpha": 0.8,
                "keywords": ["星港项目", f"词{i}"],
                "messages": [{"role": "user", "content": f"星港项目第{i}条"}],
            }
            for i in range(3)
        ],
    )
    advised: list[str] = []
    opened: list[str] = []
    names: dict[int, str] = {}
    real_open, real_advise = os.open, os.posix_fadvise

    def open_(path: object, flags: int, *args: object, **kw: object) -> int:
        fd = real_open(path, flags, *args, **kw)  # type: ignore[arg-type]
        names[fd] = "/".join(str(path).split("/")[-2:])
        opened.append(names[fd])
        return fd

    def advise(fd: int, offset: int, length: int, advice: int) -> None:
        advised.append(names[fd])
        real_advise(fd, offset, length, advice)

    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(os, "posix_fadvise", advise)
    fds = len(os.listdir("/dev/fd"))
    preview = tool_forget._preview(app, state, ForgetCall(keywords=("星港项目",)))
    assert len(os.listdir("/dev/fd")) == fds
    assert sorted(r["id"] for r in preview.rows) == sorted(ids)
    assert all(r["snippet"].startswith("星港项目第") for r in preview.rows)
    wanted = sorted(f"{fid}/context.json" for fid in ids)
    assert sorted(advised) == wanted
    assert sorted(n for n in opened if n.split("/")[0] in ids) == wanted  # once each

"""The daemon's side of onebot image staging (handlers.media_staging, reference §3.2.7):
when staged copies go (a committed archive releases them, an aborted one keeps them for
the next archive of the same messages) and how often the age sweep runs (the first
user message after start, then every 64th)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.compat.media import STAGING_DIR, media_roots, stage_images, staging_name
from handlers.app import App
from handlers.context import RequestContext
from handlers.inbox import InboxParams, agent_inbox_inserted
from handlers.media_staging import CLEAN_EVERY
from handlers.pre_step import (
    ArchiveAbortParams,
    ArchiveCommitParams,
    PreStepParams,
    archive_abort,
    archive_commit,
    pre_step,
)
from tests.archive_fixtures import T0, Surface, floored_params
from tests.handlers.app_fixtures import make_app, request_ctx

PNG = b"\x89PNG\r\n\x1a\n" + b"\x05" * 48
NOW = T0 + 3_600_000
DAY = 86_400_000
SID = "onebot-group-777"


@pytest.fixture
def media(tmp_path: Path) -> Path:
    root = tmp_path / "media"
    root.mkdir()
    (root / "a.png").write_bytes(PNG)
    return root


@pytest.fixture
def app(tmp_path: Path, media: Path) -> App:
    layer = {"compat": {"qqBots": "on", "mediaRoots": [str(media)]}}
    return make_app(tmp_path / "mem", layer)


def ctx(method: str, now_ms: int = NOW) -> RequestContext:
    return request_ctx(method, now_ms, SID)


def message(mid: str, text: str) -> dict[str, Any]:
    return {
        "id": mid,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "plugin:dsh-onebot"},
    }


async def inbox(app: App, msg: dict[str, Any], now_ms: int = NOW) -> None:
    params = InboxParams.model_validate({"session": {"id": SID}, "message": msg})
    await agent_inbox_inserted(app, params, ctx("agent/inbox/inserted", now_ms))


def picture_surface(media: Path) -> Surface:
    s = Surface()
    s.system()
    s.user(f"[09:41 张三(123)] 看 [图片:{media / 'a.png'}]")["message"]["source"] = {
        "kind": "plugin:dsh-onebot"
    }
    s.assistant("看到了。")
    for i in range(30):
        s.turn_pair(i, 300)
    return s


async def archive(app: App, s: Surface) -> dict[str, Any]:
    params = PreStepParams.model_validate(floored_params(s, SID))
    comp: dict[str, Any] = (await pre_step(app, params, ctx("agent/pre-step")))["compaction"]
    assert comp is not None
    return comp


async def test_a_committed_archive_releases_and_an_aborted_one_keeps(app: App, media: Path) -> None:
    s = picture_surface(media)
    msg = s.nodes[1]["message"]
    await inbox(app, msg)
    staged = app.memory_root() / STAGING_DIR / staging_name(SID, msg["id"])
    assert (staged / "0.png").read_bytes() == PNG
    first = await archive(app, s)
    session = {"session": {"id": SID}, "token": first["token"]}
    await archive_abort(app, ArchiveAbortParams.model_validate(session), ctx("archive/abort"))
    # the next pre-step archives the same messages again, from the same staged copy
    second = await archive(app, s)
    assert second["token"] != first["token"]
    images = app.memory_root() / "sessions" / SID / "images"
    assert [p.read_bytes() for p in images.iterdir() if p.name.startswith("qq-")] == [PNG]
    assert staged.is_dir()  # answered, not yet final
    session = {"session": {"id": SID}, "token": second["token"]}
    await archive_commit(app, ArchiveCommitParams.model_validate(session), ctx("archive/commit"))
    assert not staged.exists()


async def test_the_sweep_runs_at_the_first_message_then_every_64th(
    app: App, media: Path, tmp_path: Path
) -> None:
    root = app.memory_root()
    roots = media_roots([str(media)], home=tmp_path, cwd=tmp_path)

    def stage_old(mid: str) -> Path:
        out = stage_images(
            root,
            SID,
            mid,
            [str(media / "a.png")],
            roots=roots,
            max_bytes=1 << 20,
            now_ms=NOW - 2 * DAY,
        )
        assert out.staged is not None
        return out.staged.dir

    old = stage_old("old-1")
    await inbox(app, message("u1", "你好"))
    assert not old.exists()
    old = stage_old("old-2")
    for n in range(2, CLEAN_EVERY + 1):
        await inbox(app, message(f"u{n}", "你好"))
    assert old.exists()  # 64 messages: one sweep so far
    await inbox(app, message("u65", "你好"))
    assert not old.exists()

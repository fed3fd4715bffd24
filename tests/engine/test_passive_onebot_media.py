"""The passive path makes of a onebot channel's messages what a pre-step archive would
(reference §3.2.6 with §3.2.7): voice notes folded, staged images taken into
``images/`` (then their staged copies removed); a session that is not a channel keeps
its text as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine import texts
from engine.compat.media import STAGING_DIR, media_roots, stage_images
from engine.config.model import MemoryConfig
from engine.passive import PassiveInput, archive_passive
from engine.store import SessionStore, open_session
from tests.passive_fixtures import SessionLog

NOW = 1_793_700_000_000
PNG = b"\x89PNG\r\n\x1a\n" + b"\x03" * 48


def _passive(store: SessionStore, log: SessionLog, *, channel: bool) -> list[dict[str, Any]]:
    span = list(range(log.next_seq))
    summary, _ = log.compaction(span)
    out = archive_passive(
        store,
        PassiveInput(
            session_id=log.session_id,
            event=summary,
            shadowed=log.by_seq(span),
            now_ms=NOW,
            cfg=MemoryConfig.defaults(),
            archiver_version="rofmd-test",
            channel=channel,
        ),
    )
    assert out.outcome == "archived", out
    return [m for e in store.index for m in store.read_context(e.id) if m["role"] == "user"]


def _log(sid: str, picture: str) -> SessionLog:
    log = SessionLog(sid)
    log.exchange(picture)
    log.exchange("[语音]")
    log.exchange("（语音转写：帮我记一下周五开会）")
    return log


def test_channel_passive_archive_takes_staged_images_and_folds_voice(tmp_path: Path) -> None:
    media = tmp_path / "media"
    media.mkdir()
    (media / "a.png").write_bytes(PNG)
    root = tmp_path / "memory"
    sid = "onebot-group-42"
    picture = f"看 [图片:{media / 'a.png'}]"
    log = _log(sid, picture)
    mid = log.events[0]["data"]["id"]
    roots = media_roots([str(media)], home=tmp_path, cwd=tmp_path)
    staged = stage_images(
        root, sid, mid, [str(media / "a.png")], roots=roots, max_bytes=1 << 20, now_ms=NOW
    ).staged
    assert staged is not None
    store = open_session(root, sid)
    users = [m["content"] for m in _passive(store, log, channel=True)]
    (name,) = [p.name for p in store.paths.images_dir.iterdir() if p.name != "index.json"]
    assert name.startswith("qq-") and (store.paths.images_dir / name).read_bytes() == PNG
    assert users == [
        "看 " + texts.ARCHIVE_IMAGE_PLACEHOLDER.format(name=name),
        "[语音] 帮我记一下周五开会",
    ]
    assert not staged.dir.exists() and list((root / STAGING_DIR).iterdir()) == []


def test_a_session_that_is_not_a_channel_keeps_its_text(tmp_path: Path) -> None:
    log = _log("web-1", "看 [图片:/srv/a.png]")
    store = open_session(tmp_path / "memory", "web-1")
    users = [m["content"] for m in _passive(store, log, channel=False)]
    assert users == ["看 [图片:/srv/a.png]", "[语音]", "（语音转写：帮我记一下周五开会）"]
    assert not store.paths.images_dir.exists()

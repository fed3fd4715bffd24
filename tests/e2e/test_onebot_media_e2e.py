"""onebot images and voice notes through the real socket (issue 14, reference §3.2.7).

A onebot private chat with ``compat.qqBots: on`` and one media root: the message's
image inside the root is staged when the message arrives, archived into ``images/`` by
the pre-step (placeholder in ``context.json``, image index row, found by
``memory_image``, recalled as its absolute path), and its staged copy removed once the
archive is committed; a path outside the root and a symlink escaping it are refused
(logged with the reason), never copied. A voice mark and its transcript read as one
``[语音] …``. A WebUI session with the same words is archived exactly as before."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine import texts
from engine.compat.media import STAGING_DIR, staging_name
from tests.archive_fixtures import Surface
from tests.e2e.client import Client, folder_messages, session_dir
from tests.e2e.harness import DaemonProcess, running_daemon, short_tmpdir

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x07" * 40
ONEBOT = {"kind": "plugin:dsh-onebot"}
WRAP = '<user_message qq="10001" nickname="小明">\n{}\n</user_message>'
TRANSCRIPT = "（语音转写：帮我记一下周五开会）"


@dataclass
class Files:
    media: Path
    outside: Path

    @property
    def ok(self) -> str:
        return str(self.media / "猫咪 照片.png")

    @property
    def secret(self) -> str:
        return str(self.outside / "secret.png")

    @property
    def escape(self) -> str:
        return str(self.media / "escape.png")


@pytest.fixture(scope="module")
def files() -> Iterator[Files]:
    base = short_tmpdir()
    f = Files(base / "media", base / "outside")
    f.media.mkdir()
    f.outside.mkdir()
    Path(f.ok).write_bytes(PNG)
    Path(f.secret).write_bytes(PNG)
    Path(f.escape).symlink_to(f.secret)
    yield f
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon(files: Files) -> Iterator[DaemonProcess]:
    config = {"compat": {"qqBots": "on", "mediaRoots": [str(files.media)]}}
    with running_daemon(config=config) as d:
        yield d


def picture_text(f: Files) -> str:
    return WRAP.format(f"看这张 [图片:{f.ok}] 还有 [图片:{f.secret}] 和 [图片:{f.escape}]")


def conversation(f: Files, source: dict[str, str]) -> Surface:
    """The picture message, a voice mark, its transcript steered in, then enough turns
    to archive them."""
    s = Surface()
    s.system()
    for text, answer in (
        (picture_text(f), "好可爱的猫。"),
        (WRAP.format("[语音]"), "我听一下。"),
        (TRANSCRIPT, "好的，周五开会已记下。"),
    ):
        s.user(text)["message"]["source"] = dict(source)
        s.assistant(answer)
    for i in range(30):
        s.turn_pair(i, 300)
    return s


def deliver(c: Client, sid: str, s: Surface) -> None:
    """Each of the first user messages as the host delivers it (`agent/inbox/inserted`)."""
    for node in s.nodes[1:6:2]:
        c.call("agent/inbox/inserted", {"session": {"id": sid}, "message": node["message"]})


def archived_messages(d: DaemonProcess, sid: str, folders: list[str]) -> list[dict[str, Any]]:
    return [m for fid in folders for m in folder_messages(d, sid, fid)]


def archive(c: Client, sid: str, s: Surface) -> list[str]:
    folders: list[str] = c.archive(s, sid)["folders"]
    return folders


def test_onebot_images_and_voice_notes(daemon: DaemonProcess, client: Client, files: Files) -> None:
    sid = "onebot-private-10001"
    s = conversation(files, ONEBOT)
    # the messages came to a session the plugin rebuilt since: one chat, one staging
    deliver(client, f"{sid}-mux0bhkw", s)
    picture_id = s.nodes[1]["message"]["id"]
    staged = daemon.memory_root / STAGING_DIR / staging_name(sid, picture_id)
    assert sorted(p.name for p in staged.iterdir()) == ["0.png", "staged.json"]
    assert (staged / "0.png").read_bytes() == PNG
    # only the picture message named images: nothing else was staged
    assert [p.name for p in (daemon.memory_root / STAGING_DIR).iterdir()] == [staged.name]
    refused = {
        (r.get("path"), r.get("reason"))
        for r in daemon.log_records()
        if r.get("event") == "onebot image refused"
    }
    assert refused == {
        (files.secret, "outside compat.mediaRoots"),
        (files.escape, "a symlink leading outside compat.mediaRoots"),
    }

    folders = archive(client, sid, s)
    base = session_dir(daemon, sid)
    stored = [p.name for p in (base / "images").iterdir() if p.name != "index.json"]
    assert len(stored) == 1 and stored[0].startswith("qq-") and stored[0].endswith("-1-0.png")
    (name,) = stored
    assert (base / "images" / name).read_bytes() == PNG
    placeholder = texts.ARCHIVE_IMAGE_PLACEHOLDER.format(name=name)
    messages = archived_messages(daemon, sid, folders)
    users = [m["content"] for m in messages if m["role"] == "user"]
    assert users[0] == WRAP.format(
        f"看这张 {placeholder} 还有 [图片:{files.secret}] 和 [图片:{files.escape}]"
    )
    assert users[1] == WRAP.format("[语音] 帮我记一下周五开会")
    assert all(TRANSCRIPT not in text for text in users)
    assert not any(files.ok in str(m) for m in messages)
    (folder,) = [
        fid for fid in folders if name in (base / fid / "meta.json").read_text(encoding="utf-8")
    ]
    meta = orjson.loads((base / folder / "meta.json").read_bytes())
    assert meta["images"] == [
        {
            "name": name,
            "placeholder": placeholder,
            "mediaType": "image/png",
            "bytes": len(PNG),
            "originalName": "猫咪 照片.png",
        }
    ]
    rows = orjson.loads((base / "images" / "index.json").read_bytes())["images"]
    assert [(r["name"], r["folderId"]) for r in rows] == [(name, folder)]
    assert not staged.exists()  # the archive is final: its staged copy is gone

    found = client.tool(sid, "memory_image", {"name": "qq-"})
    (hit,) = found["value"]["images"]
    path = str(base / "images" / name)
    assert (hit["name"], hit["path"], hit["exists"], hit["memoryId"]) == (name, path, True, folder)

    judged = client.tool(
        sid,
        "memory_judge",
        {
            "updates": [
                {"id": folder, "alpha": 0.8, "beta": 5, "keywords": ["猫咪", "照片", "周五开会"]}
            ]
        },
    )
    assert judged["isError"] is False, judged
    recalled = client.recall(sid, keywords=["猫咪"])
    text = recalled["content"][0]["text"]
    assert f"[图片：（{name}，文件：{path}）]" in text, text


def test_a_webui_session_keeps_its_text(
    daemon: DaemonProcess, client: Client, files: Files
) -> None:
    sid = "webui-session-1"
    s = conversation(files, {"kind": "user"})
    deliver(client, sid, s)
    assert not any(p.name.startswith(sid) for p in (daemon.memory_root / STAGING_DIR).glob("*"))
    folders = archive(client, sid, s)
    users = [m["content"] for m in archived_messages(daemon, sid, folders) if m["role"] == "user"]
    assert users[:3] == [picture_text(files), WRAP.format("[语音]"), TRANSCRIPT]
    assert not (session_dir(daemon, sid) / "images").exists()

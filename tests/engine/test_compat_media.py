"""onebot images (reference §3.2.7, §2.4 path rules, §7 v1.3.0 图片): paths read out of
message text, the mediaRoots whitelist, staging, its cleanup, and the archive's rewrite
of a staged path into the stored image's placeholder."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from engine import texts
from engine.archive.images import plan_staged_images, run_stamp
from engine.archive.plan import PreStepInput, plan_pre_step
from engine.archive.surface import parse_surface
from engine.compat.media import (
    STAGING_DIR,
    StagedImage,
    StagedMessage,
    check_image,
    clean_staging,
    image_paths,
    media_roots,
    release_staged,
    replace_image_paths,
    stage_images,
    staged_messages,
    staging_name,
)
from engine.config import build_config
from engine.jsonio import temp_path
from engine.store.image_copy import ImageRejected
from tests.archive_fixtures import Surface, floored_params

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
JPEG = b"\xff\xd8\xff\xe0" + b"\x01" * 64
NOW = 1_791_311_000_000
DAY = 86_400_000


# ---- paths in text -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        (
            "[图片:/home/u/.dsh/media/onebot/media_1_ab.jpg]",
            ["/home/u/.dsh/media/onebot/media_1_ab.jpg"],
        ),
        ("看[图片：/srv/q/A.PNG]这张", ["/srv/q/A.PNG"]),  # full-width colon, upper-case suffix
        (r"[图片:C:\Users\me\Pictures\QQ\a.jpeg]", [r"C:\Users\me\Pictures\QQ\a.jpeg"]),
        ("[图片:D:/media/b.webp]", ["D:/media/b.webp"]),
        (r"[图片:\\nas\share\c.gif]", [r"\\nas\share\c.gif"]),
        ('[图片:"/srv/q/my pics/a b.bmp"]', ["/srv/q/my pics/a b.bmp"]),
        ("[图片:'/srv/q/x].png']", ["/srv/q/x].png"]),  # quoted: a ] of its own
        ("[图片:/srv/q/猫咪照片.png]", ["/srv/q/猫咪照片.png"]),
        (
            "[图片:/srv/q/1.png] 和 [图片:/srv/q/2.jpg]\n[图片:/srv/q/1.png]",
            ["/srv/q/1.png", "/srv/q/2.jpg"],
        ),
        ("[视频:/srv/q/v.mp4] [文件:/srv/q/a.png]", []),  # not images
        ("[图片:一只猫]", []),
        ("[图片:cat.png]", []),  # relative: not a local path the plugin writes
        ("[图片:https://example.com/a.png]", []),
        ("[图片:/srv/q/notes.txt]", []),
        (texts.ARCHIVE_IMAGE_PLACEHOLDER.format(name="qq-1-2-0.png"), []),
        ("[图片:(img-1-2-0.png)]", []),
        ("/srv/q/a.png 没有标注", []),
        ("[图片]", []),  # Derpyu: a mark without a path
    ],
)
def test_image_paths(text: str, paths: list[str]) -> None:
    assert image_paths(text) == paths


def test_replace_image_paths_touches_only_the_mapped_annotations() -> None:
    text = '看 [图片:/a/1.png] 和 [图片："/a/2.png"] 还有 [图片:/b/3.png]'
    out = replace_image_paths(text, {"/a/1.png": "<1>", "/a/2.png": "<2>"})
    assert out == "看 <1> 和 <2> 还有 [图片:/b/3.png]"
    assert replace_image_paths(text, {}) == text


# ---- the whitelist --------------------------------------------------------------------


@pytest.fixture
def media(tmp_path: Path) -> Path:
    root = tmp_path / "media"
    root.mkdir()
    (root / "ok.png").write_bytes(PNG)
    return root


def _roots(*roots: Path) -> tuple[str, ...]:
    return media_roots([str(r) for r in roots], home=Path("/nonexistent"), cwd=Path("/"))


def test_an_image_inside_a_root_is_accepted(media: Path) -> None:
    assert check_image(str(media / "ok.png"), _roots(media), 1 << 20) == str(
        (media / "ok.png").resolve()
    )


def _refusal(path: Path | str, roots: tuple[str, ...], max_bytes: int = 1 << 20) -> str:
    with pytest.raises(ImageRejected) as info:
        check_image(str(path), roots, max_bytes)
    return info.value.reason


def test_refusals(media: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.png"
    outside.write_bytes(PNG)
    (media / "escape.png").symlink_to(outside)
    (media / "dir.png").mkdir()
    (media / "big.png").write_bytes(PNG + b"\x00" * 2000)
    (media / "text.txt").write_bytes(b"secret")
    (media / "renamed.png").symlink_to(media / "text.txt")
    roots = _roots(media)
    assert _refusal(outside, roots) == "outside compat.mediaRoots"
    assert _refusal(media / "escape.png", roots) == "a symlink leading outside compat.mediaRoots"
    assert _refusal(media / ".." / "secret.png", roots) == "outside compat.mediaRoots"
    assert _refusal(media / "dir.png", roots) == "not a regular file"
    assert "larger than compat.maxImageBytes 1000" in _refusal(media / "big.png", roots, 1000)
    assert _refusal(media / "renamed.png", roots) == "its real file has no image suffix"
    assert _refusal(media / "gone.png", roots) == "the file is gone"
    assert _refusal(media / "ok.png", ()) == "compat.mediaRoots is empty: no image is archived"
    assert _refusal(r"C:\media\ok.png", roots) == "not an absolute path on this system"
    # a sibling whose name starts like the root is not inside it
    sibling = tmp_path / "media-other"
    sibling.mkdir()
    (sibling / "a.png").write_bytes(PNG)
    assert _refusal(sibling / "a.png", roots) == "outside compat.mediaRoots"


def test_roots_are_expanded_and_realpathed(media: Path, tmp_path: Path) -> None:
    link = tmp_path / "link-to-media"
    link.symlink_to(media)
    home = tmp_path
    roots = media_roots(["~/link-to-media"], home=home, cwd=Path("/"))
    assert roots == (str(media.resolve()),)
    # a message naming the real directory or the link is inside the same root
    assert check_image(str(link / "ok.png"), roots, 1 << 20) == str((media / "ok.png").resolve())
    assert media_roots(["", "  ", "rel"], home=home, cwd=tmp_path) == (
        str((tmp_path / "rel").resolve()),
    )
    # a symlink inside the root to another file inside it is fine
    (media / "alias.png").symlink_to(media / "ok.png")
    assert check_image(str(media / "alias.png"), roots, 1 << 20).endswith("ok.png")


# ---- staging --------------------------------------------------------------------------


def test_stage_copies_accepted_images_and_refuses_the_rest(media: Path, tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    (media / "photo.JPG").write_bytes(JPEG)
    (media / "fake.png").write_bytes(b"not an image at all")
    paths = [str(media / "ok.png"), str(media / "photo.JPG"), str(media / "fake.png"), "/etc/x.png"]
    out = stage_images(
        mem, "onebot-private-1", "msg-1", paths, roots=_roots(media), max_bytes=1 << 20, now_ms=NOW
    )
    assert out.staged is not None and not out.already
    assert [(i.path, i.file, i.kind, i.bytes) for i in out.staged.images] == [
        (str(media / "ok.png"), "0.png", "png", len(PNG)),
        (str(media / "photo.JPG"), "1.jpg", "jpeg", len(JPEG)),
    ]
    assert dict(out.refused) == {
        str(media / "fake.png"): "not an image by its first bytes",
        "/etc/x.png": "outside compat.mediaRoots",
    }
    directory = mem / STAGING_DIR / staging_name("onebot-private-1", "msg-1")
    assert sorted(p.name for p in directory.iterdir()) == ["0.png", "1.jpg", "staged.json"]
    assert (directory / "0.png").read_bytes() == PNG
    manifest = orjson.loads((directory / "staged.json").read_bytes())
    assert manifest["stagedAt"] == NOW and manifest["messageId"] == "msg-1"
    assert os.listdir(mem / STAGING_DIR) == [directory.name]  # no temp left behind
    # a retried delivery of the same message stages nothing again
    again = stage_images(
        mem, "onebot-private-1", "msg-1", paths, roots=_roots(media), max_bytes=1 << 20, now_ms=NOW
    )
    assert again.already and again.staged is None
    found = staged_messages(mem, "onebot-private-1", ["msg-1", "msg-2"])
    assert list(found) == ["msg-1"] and found["msg-1"].images == out.staged.images
    # another chat's staging is not this chat's
    assert staged_messages(mem, "onebot-private-2", ["msg-1"]) == {}


def test_nothing_accepted_stages_nothing(media: Path, tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    out = stage_images(
        mem, "onebot-group-5", "m", [str(media / "ok.png")], roots=(), max_bytes=100, now_ms=NOW
    )
    assert out.staged is None and out.refused and not (mem / STAGING_DIR).exists()


def test_a_file_removed_from_staging_is_not_offered(media: Path, tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    out = stage_images(
        mem, "k", "m", [str(media / "ok.png")], roots=_roots(media), max_bytes=1 << 20, now_ms=NOW
    )
    assert out.staged is not None
    (out.staged.dir / "0.png").unlink()
    assert staged_messages(mem, "k", ["m"]) == {}
    release_staged([out.staged.dir, out.staged.dir])  # idempotent
    assert not out.staged.dir.exists()


def test_staging_names_are_safe_and_distinct() -> None:
    a = staging_name("onebot-group-1", "m/../x")
    b = staging_name("onebot-group-1", "m_.._x")
    assert a != b and "/" not in a
    long = staging_name("onebot-group-1", "x" * 400)
    assert len(long) <= 200 and long != staging_name("onebot-group-1", "x" * 401)


def test_clean_staging_removes_only_what_is_older_than_the_ttl(media: Path, tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    roots, ok = _roots(media), [str(media / "ok.png")]
    old = stage_images(mem, "k", "old", ok, roots=roots, max_bytes=1 << 20, now_ms=NOW - 2 * DAY)
    new = stage_images(mem, "k", "new", ok, roots=roots, max_bytes=1 << 20, now_ms=NOW - DAY // 2)
    assert old.staged is not None and new.staged is not None
    # a crashed staging's temp directory goes by its mtime
    leftover = temp_path(mem / STAGING_DIR / "k-crashed")
    leftover.mkdir()
    os.utime(leftover, (NOW / 1000 - 3 * 86400, NOW / 1000 - 3 * 86400))
    removed = clean_staging(mem, NOW, DAY)
    assert sorted(removed) == sorted([old.staged.dir.name, leftover.name])
    assert new.staged.dir.exists() and not old.staged.dir.exists()
    assert clean_staging(mem, NOW, DAY) == []
    assert clean_staging(tmp_path / "no-memory", NOW, DAY) == []


# ---- the archive's rewrite ------------------------------------------------------------


def _user_node(seq: int, text: str, mid: str) -> dict[str, object]:
    return {
        "seq": seq,
        "type": "user/message",
        "message": {
            "id": mid,
            "role": "user",
            "content": [
                {"type": "text", "text": text},
                {"type": "image", "attachment": {"name": "block.png"}},
            ],
            "source": {"kind": "plugin:dsh-onebot"},
        },
    }


def test_plan_staged_images_rewrites_staged_paths_into_placeholders(tmp_path: Path) -> None:
    text = "看 [图片:/m/a.png] 和 [图片:/m/b.jpg]\n还有 [图片:/etc/refused.png]"
    nodes = parse_surface(
        [_user_node(7, text, "q1"), _user_node(8, "[图片:/m/a.png]", "q2")],
        user_kinds=["plugin:dsh-onebot"],
    )
    staged = {
        "q1": StagedMessage(
            tmp_path,
            "k",
            "q1",
            NOW,
            (
                StagedImage("/m/a.png", "0.png", "png", 10),
                StagedImage("/m/b.jpg", "1.jpg", "jpeg", 20),
            ),
        )
    }
    out, images = plan_staged_images(nodes, staged, stamp="20261031T101010123Z")
    a, b = "qq-20261031T101010123Z-7-0.png", "qq-20261031T101010123Z-7-1.jpg"
    placeholder = texts.ARCHIVE_IMAGE_PLACEHOLDER.format
    assert out[0].parts[0] == (
        "text",
        f"看 {placeholder(name=a)} 和 {placeholder(name=b)}\n还有 [图片:/etc/refused.png]",
    )
    assert out[1] == nodes[1]  # not staged: unchanged
    assert sorted(images) == [(0, 1), (0, 2)]  # after the node's one image block
    first = images[(0, 1)]
    assert (first.name, first.host_path) == (a, str(tmp_path / "0.png"))
    assert first.ref == {
        "name": a,
        "placeholder": placeholder(name=a),
        "mediaType": "image/png",
        "bytes": 10,
        "originalName": "a.png",
    }
    assert out[0].text({0: "img-x.png"}).endswith(placeholder(name="img-x.png"))


def test_the_pre_step_plan_archives_staged_images_with_their_placeholder_whole(
    tmp_path: Path,
) -> None:
    now = 1_791_311_000_997  # a run stamp the secrets detector takes for a random token
    s = Surface()
    s.system()
    s.user("看 [图片:/m/a.png] 和 [图片:/etc/refused.png]")["message"]["source"] = {
        "kind": "plugin:dsh-onebot"
    }
    s.assistant("好")
    for i in range(30):
        s.turn_pair(i, 300)
    p = floored_params(s, "onebot-private-1")
    layer = {"recall": {"triggerSourceKinds": ["user", "plugin:dsh-onebot"]}}
    staged = {
        "m1": StagedMessage(
            tmp_path, "onebot-private-1", "m1", NOW, (StagedImage("/m/a.png", "0.png", "png", 9),)
        )
    }
    inp = PreStepInput(
        session_id="onebot-private-1",
        turn=p["turn"],
        surface=p["surface"],
        node_tokens={n["seq"]: n["tokens"] for n in p["context"]["nodes"]},
        total_tokens=p["context"]["totalTokens"],
        host_window=p["context"]["contextWindow"],
        now_ms=now,
        cfg=build_config([("test", layer)]).config,
        channel=True,
        staged_images=staged,
    )
    plan = plan_pre_step(inp)
    assert plan.archives and plan.image_message_ids == ("m1",)
    name = f"qq-{run_stamp(now)}-1-0.png"
    first = plan.folders[0]
    assert first.messages[0]["content"] == (
        f"看 {texts.ARCHIVE_IMAGE_PLACEHOLDER.format(name=name)} 和 [图片:/etc/refused.png]"
    )
    assert [(img.name, img.host_path) for img in first.images] == [(name, str(tmp_path / "0.png"))]
    assert plan.staged_dirs == (tmp_path,)
    # the same archive of a session that is not a channel: the text as it was
    plain = plan_pre_step(replace(inp, channel=False))
    assert plain.folders[0].messages[0]["content"] == s.nodes[1]["message"]["content"][0]["text"]
    assert plain.folders[0].images == [] and plain.staged_dirs == ()

"""No single attachment can block archiving (issue 21): whatever its name, media type or
file, an image is either copied under a safe ASCII name or archived as its placeholder
with a warning, and the rest of the archive lands.

Plan and commit run as the daemon's pre-step runs them (`plan_pre_step`, then
`commit_plan`), with the readable-image check the pre-step makes (`image_kind`)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import texts
from engine.archive import PreStepInput, PreStepPlan, plan_pre_step
from engine.archive.commit import CommitOutcome, commit_plan
from engine.archive.image_check import image_kind
from engine.archive.images import IMAGE_EXTENSIONS, image_extension
from engine.config import build_config
from engine.store import SessionStore, open_session
from engine.store.ids import is_safe_name
from tests.archive_fixtures import T0, Surface

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(64))
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF" + bytes(range(64))
ROOT = Path(__file__).resolve().parents[2]


def surface(images: list[dict[str, Any]]) -> Surface:
    s = Surface()
    s.system()
    s.user("看这些图", images=images)
    for i in range(30):
        s.turn_pair(i, 300)
    return s


def readable(s: Surface) -> dict[str, str]:
    """What the pre-step finds readable (handlers.pre_step._readable_images)."""
    out: dict[str, str] = {}
    for node in s.nodes:
        for block in node["message"]["content"]:
            att = block.get("attachment") if block.get("type") == "image" else None
            path = att.get("hostPath") if isinstance(att, dict) else None
            if isinstance(path, str) and os.path.isabs(path):
                kind = image_kind(Path(path))
                if kind is not None:
                    out[path] = kind
    return out


def plan_for(s: Surface) -> PreStepPlan:
    window = max(40_000, int(s.total() * 100 / 70))
    scale = int(window * 0.7) / s.total()
    plan = plan_pre_step(
        PreStepInput(
            session_id="s1",
            turn=s.turn,
            surface=s.nodes,
            node_tokens={t["seq"]: max(1, int(t["tokens"] * scale)) for t in s.tokens()},
            total_tokens=int(window * 0.7),
            host_window=window,
            now_ms=T0 + 10**7,
            cfg=build_config([]).config,
            readable_images=readable(s),
        )
    )
    assert plan.archives, plan.warnings
    return plan


def archive(
    root: Path, images: list[dict[str, Any]], between: Callable[[], None] | None = None
) -> tuple[PreStepPlan, CommitOutcome, SessionStore]:
    """Plan, let ``between`` change the files, commit; the commit must land."""
    plan = plan_for(surface(images))
    if between is not None:
        between()
    store = open_session(root, "s1")
    out = commit_plan(
        store,
        plan,
        cfg=build_config([]).config,
        token="arc-t",
        now_ms=T0 + 10**7,
        turn=1,
        step=1,
        archiver_version="test",
    )
    assert out.ok, out.warnings
    assert set(out.folder_ids) == set(out.written) and len(out.written) == len(plan.folders)
    assert all(fid in store for fid in out.written)
    return plan, out, store


def first_meta(store: SessionStore, out: CommitOutcome) -> dict[str, Any]:
    meta: dict[str, Any] = orjson.loads(
        (store.paths.folder(out.written[0]) / "meta.json").read_bytes()
    )
    return meta


def image_files(store: SessionStore) -> dict[str, bytes]:
    d = store.paths.images_dir
    return (
        {p.name: p.read_bytes() for p in d.iterdir() if p.name != "index.json"}
        if d.exists()
        else {}
    )


def warnings_of(out: CommitOutcome, plan: PreStepPlan) -> list[str]:
    return [m for k, m in [*plan.warnings, *out.warnings] if k == "image-placeholder"]


def test_a_full_width_extension_with_an_unknown_media_type_archives(tmp_path: Path) -> None:
    src = tmp_path / "photo.ｐｎｇ"
    src.write_bytes(PNG)
    att = {"attachmentId": "a1", "mediaType": "application/x-weird", "name": "photo.ｐｎｇ"}
    plan, out, store = archive(tmp_path / "mem", [{**att, "hostPath": str(src)}])
    (ref,) = first_meta(store, out)["images"]
    assert ref["name"].isascii() and ref["name"].endswith(".png") and is_safe_name(ref["name"])
    assert ref["originalName"] == "photo.ｐｎｇ" and ref["mediaType"] == "application/x-weird"
    assert image_files(store) == {ref["name"]: PNG}
    assert texts.ARCHIVE_IMAGE_PLACEHOLDER.format(name=ref["name"]) in str(
        store.read_context(out.written[0])
    )
    assert warnings_of(out, plan) == []
    index = orjson.loads(store.paths.images_index.read_bytes())["images"]
    assert [(r["name"], r["originalName"]) for r in index] == [(ref["name"], "photo.ｐｎｇ")]


def test_the_same_name_without_a_readable_file_is_a_placeholder_and_a_warning(
    tmp_path: Path,
) -> None:
    att = {"attachmentId": "a1", "name": "photo.ｐｎｇ", "hostPath": str(tmp_path / "gone.png")}
    plan, out, store = archive(tmp_path / "mem", [att])
    assert "images" not in first_meta(store, out)
    assert image_files(store) == {}
    (warning,) = warnings_of(out, plan)
    assert "placeholder only" in warning
    text = str(store.read_context(out.written[0]))
    assert "[图片：（img-" in text and "-1-0.png）]" in text


def test_the_stored_extension_follows_the_first_bytes(tmp_path: Path) -> None:
    src = tmp_path / "x.png"
    src.write_bytes(JPEG)  # named and typed as a PNG, is a JPEG
    att = {"mediaType": "image/png", "name": "x.png", "hostPath": str(src)}
    _, out, store = archive(tmp_path / "mem", [att])
    (ref,) = first_meta(store, out)["images"]
    assert ref["name"].endswith(".jpg") and image_files(store) == {ref["name"]: JPEG}


def test_whatever_happens_to_an_image_between_plan_and_commit_only_that_image_is_lost(
    tmp_path: Path,
) -> None:
    names = ["ok", "vanished", "directory", "fifo", "loop", "key", "huge", "dangling"]
    paths = {n: tmp_path / f"{n}.png" for n in names}
    for p in paths.values():
        p.write_bytes(PNG)
    atts = [
        {"attachmentId": n, "mediaType": "image/png", "hostPath": str(p)} for n, p in paths.items()
    ]

    def between() -> None:
        paths["vanished"].unlink()
        paths["directory"].unlink()
        paths["directory"].mkdir()
        paths["fifo"].unlink()
        os.mkfifo(paths["fifo"])
        paths["loop"].unlink()
        paths["loop"].symlink_to(paths["loop"])
        paths["key"].write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----\n")
        os.truncate(paths["huge"], 300 * 1000 * 1000)
        paths["dangling"].unlink()
        paths["dangling"].symlink_to(tmp_path / "nowhere.png")

    plan, out, store = archive(tmp_path / "mem", atts, between)
    assert len(plan.folders[0].images) == len(names)  # all were images when planned
    warnings = warnings_of(out, plan)
    assert len(warnings) == len(names) - 1, warnings
    joined = "\n".join(warnings)
    for reason in ("gone", "directory", "FIFO", "symlink loop", "not an image", "limit"):
        assert reason in joined, (reason, joined)
    (ref,) = first_meta(store, out)["images"]
    assert ref["attachmentId"] == "ok"
    assert image_files(store) == {ref["name"]: PNG}  # no temp file left either
    text = str(store.read_context(out.written[0]))
    assert text.count("[图片：（img-") == len(names)
    index = orjson.loads(store.paths.images_index.read_bytes())["images"]
    assert [r["name"] for r in index] == [ref["name"]]
    # the store reopens clean: nothing to repair
    again = open_session(tmp_path / "mem", "s1")
    assert again.load_report.temp_removed == [] and len(again) == len(store)


def test_a_taken_image_name_drops_that_image_not_the_archive(tmp_path: Path) -> None:
    src = tmp_path / "a.png"
    src.write_bytes(PNG)
    plan = plan_for(surface([{"hostPath": str(src)}]))
    store = open_session(tmp_path / "mem", "s1")
    taken = plan.folders[0].images[0].name
    store.paths.images_dir.mkdir(parents=True)
    store.paths.image(taken).write_bytes(b"someone else's")
    out = commit_plan(
        store, plan, cfg=build_config([]).config, token="arc-t", now_ms=T0, turn=1,
        step=1, archiver_version="test",
    )  # fmt: skip
    assert out.ok and len(out.written) == len(plan.folders)
    assert any("already used" in m for k, m in out.warnings if k == "image-placeholder")
    assert store.paths.image(taken).read_bytes() == b"someone else's"
    assert "images" not in first_meta(store, out)


# ---- no name, media type or file can make the commit fail ----------------------------

_FIXTURE_FILES = {"png": PNG, "jpeg": JPEG, "key": b"-----BEGIN RSA PRIVATE KEY-----\n"}
_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=2),
)
_NAMES = st.one_of(
    st.text(max_size=60),
    st.builds(lambda stem, ext: f"{stem}.{ext}", st.text(max_size=20), st.text(max_size=8)),
    st.sampled_from(
        ["photo.ｐｎｇ", "a.PNG", "../../etc/passwd", "x.", ".", "a.b.c.jpeg", "图.jpg"]
    ),
)
_MEDIA = st.one_of(
    _JUNK,
    st.sampled_from(["image/png", "IMAGE/JPEG; q=1", "image/svg+xml", "application/x-weird"]),
)
_PATHS = st.sampled_from(["png", "jpeg", "key", "missing", "dir", "relative", "none", "odd"])


@st.composite
def attachments(draw: st.DrawFn) -> dict[str, Any]:
    att: dict[str, Any] = {
        "name": draw(_NAMES),
        "mediaType": draw(_MEDIA),
        "attachmentId": draw(st.one_of(st.text(max_size=30), _JUNK)),
        "width": draw(_JUNK),
        "height": draw(_JUNK),
        "bytes": draw(_JUNK),
    }
    att["hostPath"] = draw(_PATHS)
    return {k: v for k, v in att.items() if draw(st.booleans()) or k == "hostPath"}


def _host_path(root: Path, which: str) -> str | None:
    if which in _FIXTURE_FILES:
        return str(root / f"f.{which}")
    return {
        "missing": str(root / "missing.png"),
        "dir": str(root),
        "relative": "f.png",
        "none": None,
        "odd": str(root / "ｏｄｄ 名字.ｐｎｇ"),
    }[which]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(attachments(), min_size=1, max_size=4))
def test_no_attachment_can_make_the_commit_fail(atts: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for kind, data in _FIXTURE_FILES.items():
            (root / f"f.{kind}").write_bytes(data)
        (root / "ｏｄｄ 名字.ｐｎｇ").write_bytes(PNG)
        for att in atts:
            path = _host_path(root, att.pop("hostPath"))
            if path is not None:
                att["hostPath"] = path
        plan, out, store = archive(root / "mem", atts)
        planned = [img for f in plan.folders for img in f.images]
        assert len(planned) == len(atts)
        files = image_files(store)
        refs = [ref for fid in out.written for ref in store.get_meta(fid).images or ()]
        for img in planned:
            _, _, ext = img.name.rpartition(".")
            assert is_safe_name(img.name) and img.name.isascii() and ext in IMAGE_EXTENSIONS
        assert sorted(r.name for r in refs) == sorted(files)  # every ref has its file
        # one warning for each image archived as its placeholder only
        assert len(planned) - len(refs) == len(warnings_of(out, plan))
        text = "".join(str(store.read_context(fid)) for fid in out.written)
        assert text.count("[图片：（img-") == len(atts)


@given(st.dictionaries(st.sampled_from(["name", "mediaType"]), st.one_of(st.text(), _JUNK)))
def test_image_extension_is_always_a_known_ascii_one(att: dict[str, Any]) -> None:
    for kind in (None, "png", "jpeg", "heif", "avif", "svg", "nonsense"):
        assert image_extension(att, kind) in IMAGE_EXTENSIONS


def test_image_extension_sources_in_order() -> None:
    assert image_extension({"name": "photo.ｐｎｇ"}) == "png"
    assert unicodedata.normalize("NFKC", "ｊｐｅｇ") == "jpeg"
    assert image_extension({"name": "photo.ＪＰＥＧ"}) == "jpg"
    assert image_extension({"name": "a.exe", "mediaType": "text/html"}) == "png"
    assert image_extension({"name": "a.gif", "mediaType": "image/webp"}) == "webp"
    assert image_extension({"name": "a.gif", "mediaType": "image/webp"}, "jpeg") == "jpg"
    assert image_extension({"mediaType": "Image/SVG+XML; charset=utf-8"}) == "svg"


# ---- bounded memory ------------------------------------------------------------------

_RSS_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from tests.engine.test_archive_image_robustness import PNG, archive, image_files
    from engine.store.image_copy import copy_image

    def peak_mib():
        # VmHWM: this process's peak resident set (ru_maxrss would also count the
        # parent's, inherited across fork and exec)
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        raise RuntimeError("no VmHWM")

    root = Path(sys.argv[1])
    big = root / "big.png"
    big.write_bytes(PNG)  # an image when the archive is planned ...

    def grow():
        os.truncate(big, 300 * 1000 * 1000)  # ... 300 MB when it is committed

    archive(root / "warm", [{"hostPath": str(root / "small.png")}])  # imports, caches
    before = peak_mib()
    plan, out, store = archive(root / "mem", [{"hostPath": str(big)}], grow)
    assert image_files(store) == {}, "the 300 MB file must not be copied"
    after_archive = peak_mib()
    # a copy of 64 MiB (cap raised for the test) streams through one chunk of memory
    os.truncate(big, 64 * 1024 * 1024)
    copy_image(big, root / "copy.tmp", max_bytes=128 * 1024 * 1024)
    assert (root / "copy.tmp").stat().st_size == 64 * 1024 * 1024
    after_copy = peak_mib()
    print(before, after_archive, after_copy)
    """
)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_archiving_a_300_mb_image_keeps_memory_small(tmp_path: Path) -> None:
    (tmp_path / "small.png").write_bytes(PNG)
    proc = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    before, after_archive, after_copy = (float(x) for x in proc.stdout.split())
    print(f"peak RSS MiB: before {before:.1f}, archive {after_archive:.1f}, copy {after_copy:.1f}")
    assert after_archive - before < 24, (before, after_archive)
    assert after_copy - before < 24, (before, after_copy)

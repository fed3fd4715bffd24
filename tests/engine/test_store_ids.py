"""Session ids become safe directory names; nothing escapes the memory root.

(Distinct ids never sharing a directory, and the migration of stores named by the
old mapping: tests/engine/test_session_dirs.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.store import open_session, safe_session_id, session_paths
from engine.store.ids import (
    DIGEST_HEX,
    FOLDER_ID_RE,
    MAX_NAME_LENGTH,
    FolderIdAllocator,
    folder_ids_among,
    folder_stamp,
    is_folder_id,
    is_safe_name,
    is_session_dir_name,
    legacy_session_dir_name,
    make_idempotency_key,
    previous_session_dir_name,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("session-abc123", "session-abc123"),
        ("onebot-group-12345", "onebot-group-12345"),
        ("a/b", "a_b"),
        ("a\\b", "a_b"),
        ("a/../../b", "a_.._.._b"),
        ("../etc", ".._etc"),
        ("nul\x00byte", "nul_byte"),
        ("日本", "__"),
        ("with space", "with_space"),
        ("C:\\Windows", "C__Windows"),
        ("~user", "_user"),
        ("a:b*c?d", "a_b_c_d"),
    ],
)
def test_legacy_session_dir_name_table(raw: str, expected: str) -> None:
    """The original mapping (kept to find stores it named): unsafe characters → `_`."""
    assert legacy_session_dir_name(raw) == expected


@pytest.mark.parametrize(
    ("raw", "prefix"),
    [
        ("session-abc123", None),
        ("onebot-group-12345", None),
        ("a.b_c-d", None),
        ("a/b", "a_b"),
        ("a\\b", "a_b"),
        ("a/../../b", "a_.._.._b"),
        ("../etc", "_etc"),
        ("nul\x00byte", "nul_byte"),
        ("日本", "_"),
        ("with space", "with_space"),
        ("C:\\Windows", "C_Windows"),
        ("~user", "_user"),
        ("a:b*c?d", "a_b_c_d"),
        ("Chat", "Chat"),
        (".hidden", "hidden"),
    ],
)
def test_safe_session_id_table(raw: str, prefix: str | None) -> None:
    """Lower-case safe ids are their own name; anything else `<prefix>~<digest>`."""
    name = safe_session_id(raw)
    if prefix is None:
        assert name == raw
    else:
        assert name.startswith(prefix + "~")
        assert len(name) == len(prefix) + 1 + DIGEST_HEX
    assert is_session_dir_name(name)


@pytest.mark.parametrize("raw", ["", ".", "..", "...", "...."])
def test_special_ids_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="session id"):
        safe_session_id(raw)
    with pytest.raises(ValueError, match="session id"):
        legacy_session_dir_name(raw)


def test_long_ids_are_shortened_and_stay_distinct() -> None:
    a = safe_session_id("x" * 1000 + "a")
    b = safe_session_id("x" * 1000 + "b")
    assert len(a) <= MAX_NAME_LENGTH and len(b) <= MAX_NAME_LENGTH
    assert a != b
    assert is_session_dir_name(a)
    old_a, old_b = (
        legacy_session_dir_name("x" * 1000 + "a"),
        legacy_session_dir_name("x" * 1000 + "b"),
    )
    assert old_a != old_b and len(old_a) == MAX_NAME_LENGTH and is_safe_name(old_a)


def test_per_session_false_uses_root(tmp_path: Path) -> None:
    paths = session_paths(tmp_path, "anything/../x", per_session=False)
    assert paths.dir == tmp_path.resolve()
    assert paths.index == tmp_path.resolve() / "index.json"


def test_per_session_layout(tmp_path: Path) -> None:
    store = open_session(tmp_path, "qqb-g-1/abc", per_session=True)
    assert store.dir == tmp_path.resolve() / "sessions" / safe_session_id("qqb-g-1/abc")
    assert store.dir.name.startswith("qqb-g-1_abc~")
    assert store.dir.is_dir()
    assert open_session(tmp_path, "qqb-g-1", per_session=True).dir.name == "qqb-g-1"


def test_symlinked_sessions_dir_escaping_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "sessions").symlink_to(outside)
    with pytest.raises(ValueError, match="escapes"):
        session_paths(root, "s1", per_session=True)


@settings(max_examples=300, deadline=None)
@given(raw=st.text(min_size=0, max_size=300))
def test_no_session_id_escapes_root(raw: str) -> None:
    root = Path("/srv/memory-root")
    try:
        safe = safe_session_id(raw)
    except ValueError:
        return
    assert is_session_dir_name(safe)
    assert "/" not in safe and "\\" not in safe and "\x00" not in safe
    assert safe not in {".", ".."}
    target = (root / "sessions" / safe).resolve()
    assert target.parent == root / "sessions"
    paths = session_paths(root, raw, per_session=True)
    assert paths.dir.is_relative_to(root / "sessions")


def test_folder_ids_are_utc_and_unique() -> None:
    alloc = FolderIdAllocator()
    now = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    assert folder_stamp(now) == "20260101T000000Z"
    ids = [alloc.allocate(now + 5) for _ in range(3)]
    assert ids == [
        "mem-20260101T000000Z-0001",
        "mem-20260101T000000Z-0002",
        "mem-20260101T000000Z-0003",
    ]
    assert all(FOLDER_ID_RE.match(i) for i in ids)
    alloc.observe("mem-20260101T000001Z-0041")
    assert alloc.allocate(now + 1000) == "mem-20260101T000001Z-0042"


def test_idempotency_key_is_unambiguous() -> None:
    a = make_idempotency_key("s|1", 2, 3, 4, "h", 0)
    b = make_idempotency_key("s", 12, 3, 4, "h", 0)
    assert a != b
    assert make_idempotency_key("s", 1, 2, 3, "h", 0) != make_idempotency_key("s", 1, 2, 3, "h", 1)


_ODD_IDS = st.sampled_from(
    [
        "mem-20260101T000000Z-12345",  # five digits
        "mem-20260101T000001Z-0009\n",  # `$` takes a trailing line break
        "mem-20260101T000002Z-٣٣٣٣",  # other digits
        "mem-legacy-folder",
        "mem-20260101T000003Z-0000",
        "not-a-folder",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.builds(
                lambda day, sec, seq: f"mem-202601{day:02d}T0000{sec:02d}Z-{seq:04d}",
                st.integers(1, 3),
                st.integers(0, 3),
                st.integers(0, 9999),
            ),
            _ODD_IDS,
        ),
        max_size=40,
    ),
    st.lists(st.integers(0, 3 * 86_400_000), max_size=6),
)
def test_observing_ids_at_once_is_observing_them_one_by_one(
    ids: list[str], times: list[int]
) -> None:
    one, bulk = FolderIdAllocator(), FolderIdAllocator()
    for folder_id in ids:
        one.observe(folder_id)
    bulk.observe_all(ids[: len(ids) // 2])
    bulk.observe_all(ids[len(ids) // 2 :])
    assert sorted(one.newest()) == bulk.newest()
    for t in times:
        now = 1_767_225_600_000 + t
        assert one.allocate(now) == bulk.allocate(now)
    assert sorted(one.newest()) == bulk.newest()


@given(
    st.lists(
        st.one_of(
            st.builds(
                "mem-2026010{}T00000{}Z-{:04d}".format,
                st.integers(1, 3),
                st.integers(0, 3),
                st.integers(0, 9999),
            ),
            _ODD_IDS,
        ),
        max_size=30,
    ),
    st.lists(st.integers(0, 3), max_size=4),
    st.lists(st.integers(0, 3 * 86_400_000), min_size=1, max_size=4),
)
def test_ids_observed_at_once_count_before_the_first_id_handed_out(
    ids: list[str], singles: list[int], times: list[int]
) -> None:
    """Bulk ids are laid out when an id is first asked for: one observed one by one
    after them, and the first allocation, see them all (no `newest` call first)."""
    one, bulk = FolderIdAllocator(), FolderIdAllocator()
    for folder_id in ids:
        one.observe(folder_id)
    bulk.observe_all(tuple(ids))
    for n in singles:
        extra = f"mem-20260102T00000{n}Z-9999"
        one.observe(extra)
        bulk.observe(extra)
    for t in times:
        now = 1_767_225_600_000 + t
        assert one.allocate(now) == bulk.allocate(now)
    assert sorted(one.newest()) == bulk.newest()


@given(st.lists(st.text(alphabet="mem-0123456789TZab.\n_/", max_size=12), max_size=30))
def test_folder_ids_among_a_listing_are_what_is_folder_id_accepts(names: list[str]) -> None:
    assert folder_ids_among(names) == [n for n in names if is_folder_id(n)]


@given(
    st.lists(
        st.one_of(
            st.text(alphabet="mem-0123456789TZab.\n_/", max_size=12),
            st.builds(
                "mem-{}".format,
                st.one_of(
                    st.text(alphabet="0123456789TZab._-", max_size=8),
                    st.text(max_size=6),  # anything: line breaks, spaces, non-ASCII
                    st.text(alphabet="ab", min_size=252, max_size=253),  # about 255
                ),
            ),
        ),
        max_size=30,
    )
)
def test_folder_ids_among_mem_names_are_what_is_folder_id_accepts(names: list[str]) -> None:
    """Listings made mostly of ``mem-`` names, clean or not (the fast path and the
    regular-expression pass must agree with the one-name rule)."""
    assert folder_ids_among(names) == [n for n in names if is_folder_id(n)]


def test_folder_ids_among_a_clean_listing_is_its_mem_names_in_order() -> None:
    names = ["index.json", "mem-20260101T000000Z-0002", "images", "mem-20260101T000000Z-0001"]
    assert folder_ids_among(names) == [names[1], names[3]]
    assert folder_ids_among([*names, "mem-"]) == [names[1], names[3]]
    assert folder_ids_among([*names, "mem-a b"]) == [names[1], names[3]]


# ---- whole ids: `$` matched before a final line break ----------------------------------


def test_an_id_ending_in_a_line_break_is_encoded_not_its_own_name() -> None:
    """`abc` followed by a line break was its own directory name, break included (the
    readable pattern ended in `$`); it is an id like `chat/a` now: encoded, ASCII and
    printable, and never the name of `abc`."""
    name = safe_session_id("abc\n")
    assert name.startswith("abc_~") and name.isprintable() and is_session_dir_name(name)
    assert name != safe_session_id("abc") == "abc"
    assert not is_session_dir_name("abc\n")
    assert previous_session_dir_name("abc\n") == "abc\n"


@pytest.mark.parametrize("raw", ["abc", "abc\n\n", "Abc\n", "chat/a\n", "\n", "x" * 96 + "\n"])
def test_only_a_readable_id_with_one_final_line_break_had_a_previous_name(raw: str) -> None:
    assert previous_session_dir_name(raw) is None


@given(st.text(alphabet="ab-.\n/A", min_size=1, max_size=12))
def test_a_previous_name_is_always_one_todays_mapping_gives_no_id(raw: str) -> None:
    """So a directory at a previous name is never another id's current store."""
    if raw.strip(".") == "":
        return
    name = safe_session_id(raw)
    assert "\n" not in name and name.isprintable()
    old = previous_session_dir_name(raw)
    if old is not None:
        assert old != name and not is_session_dir_name(old)


@pytest.mark.parametrize(
    "name", ["mem-20260101T000000Z-0001\n", "mem-20260101T000000Z-٠٠٠١", "mem-x\n"]
)
def test_folder_names_and_ids_are_whole(name: str) -> None:
    assert not is_folder_id(name)
    assert FOLDER_ID_RE.match(name) is None
    assert folder_ids_among([name, "mem-20260101T000000Z-0002"]) == ["mem-20260101T000000Z-0002"]


def test_safe_names_are_whole() -> None:
    assert is_safe_name("abc") and not is_safe_name("abc\n")

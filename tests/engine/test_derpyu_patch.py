"""The Derpyu whitelist text patch (reference §3.2.5): the four names inserted once, in
the file's own style, every other byte kept; any other shape left exactly as it was."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.compat.derpyu_patch import MARKER, PATCH_NAMES, patch_text, strip_patch

GUARD = """\
// A QQ chat guard in the shape Derpyu's qq-tool-restrict.mjs has.
export const name = 'qq-tool-restrict'

const SAFE_PREFIXES = [
  'mcp__snowluma__',
  'mcp__web-search-safe__',
]

// Harmless model-side tools.
const SAFE_EXACT = new Set([
  'ask_user_question',
  'todo_write',
])

export function allowed(name) {
  if (SAFE_EXACT.has(name)) return true
  return SAFE_PREFIXES.some((prefix) => name.startsWith(prefix))
}
"""

PATCHED_BODY = """\
const SAFE_EXACT = new Set([
  'ask_user_question',
  'todo_write',
  'memory_judge', // rofm-autopatch: 自动补丁注入
  'memory_recall', // rofm-autopatch: 自动补丁注入
  'memory_image', // rofm-autopatch: 自动补丁注入
  'memory_group_recall', // rofm-autopatch: 自动补丁注入
])
"""


def _set(*body: str, eol: str = "\n", closer: str = "])") -> str:
    return eol.join(["const SAFE_EXACT = new Set([", *body, closer]) + eol


def test_inserts_the_four_names_before_the_closer_and_keeps_the_rest() -> None:
    result = patch_text(GUARD)
    assert result.status == "patched"
    assert result.added == PATCH_NAMES
    original_body = "const SAFE_EXACT = new Set([\n  'ask_user_question',\n  'todo_write',\n])\n"
    assert result.text == GUARD.replace(original_body, PATCHED_BODY)
    assert strip_patch(result.text) == GUARD


def test_a_second_patch_changes_nothing() -> None:
    once = patch_text(GUARD)
    twice = patch_text(once.text)
    assert twice.status == "already"
    assert twice.text == once.text
    assert twice.added == ()


def test_only_the_missing_names_are_added_in_reference_order() -> None:
    src = _set("  'memory_image',", "  'todo_write', // keep")
    result = patch_text(src)
    assert result.added == ("memory_judge", "memory_recall", "memory_group_recall")
    assert result.text == _set(
        "  'memory_image',",
        "  'todo_write', // keep",
        f"  'memory_judge', {MARKER}",
        f"  'memory_recall', {MARKER}",
        f"  'memory_group_recall', {MARKER}",
    )


def test_a_name_in_a_comment_is_not_an_entry() -> None:
    src = _set("  // 'memory_judge',", "  'todo_write',")
    assert patch_text(src).added == PATCH_NAMES


def test_double_quotes_and_tab_indent_are_the_files() -> None:
    src = _set('\t"ask_user_question",', "", '\t"todo_write", // trailing note')
    result = patch_text(src)
    assert result.status == "patched"
    added = result.text.splitlines()[4:8]
    assert added == [f'\t"{name}", {MARKER}' for name in PATCH_NAMES]


def test_mixed_quotes_follow_the_majority() -> None:
    src = _set('  "a",', '  "b",', "  'c',")
    assert f'  "memory_judge", {MARKER}' in patch_text(src).text


def test_crlf_line_ends_are_kept_everywhere() -> None:
    src = GUARD.replace("\n", "\r\n")
    result = patch_text(src)
    assert result.status == "patched"
    assert result.text.count("\n") == result.text.count("\r\n") == GUARD.count("\n") + 4
    assert result.text == patch_text(GUARD).text.replace("\n", "\r\n")


def test_a_file_without_final_newline_keeps_none() -> None:
    src = _set("  'todo_write',").rstrip("\n")
    result = patch_text(src)
    assert result.status == "patched"
    assert result.text.endswith(f"'memory_group_recall', {MARKER}\n])")


def test_the_closer_may_carry_a_semicolon_and_the_opener_a_comment() -> None:
    src = "export const SAFE_EXACT = new Set([ // allow\n  'todo_write',\n]);\nfoo()\n"
    result = patch_text(src)
    assert result.status == "patched"
    assert result.text.endswith(f"  'memory_group_recall', {MARKER}\n]);\nfoo()\n")


def test_a_last_entry_without_comma_gets_one_and_nothing_else_changes() -> None:
    src = _set("  'ask_user_question',", "  'todo_write' // last")
    result = patch_text(src)
    assert result.status == "patched"
    assert result.text.splitlines()[2] == "  'todo_write', // last"
    assert strip_patch(result.text) == src.replace("'todo_write' //", "'todo_write', //")


def test_an_empty_set_is_patched() -> None:
    result = patch_text("const SAFE_EXACT = new Set([\n])\n")
    assert (
        result.text
        == "const SAFE_EXACT = new Set([\n"
        + "".join(f"  '{name}', {MARKER}\n" for name in PATCH_NAMES)
        + "])\n"
    )


UNKNOWN = {
    "no set": "const SAFE = new Set([\n  'todo_write',\n])\n",
    "two declarations": _set("  'a',") + "const SAFE_EXACT = new Set([\n  'b',\n])\n",
    "declared twice in a comment": "// const SAFE_EXACT = new Set([\n" + _set("  'a',"),
    "let, not const": "let SAFE_EXACT = new Set([\n  'a',\n])\n",
    "built from a variable": "const SAFE_EXACT = new Set(LIST)\n",
    "one line": "const SAFE_EXACT = new Set(['todo_write', 'ask_user_question'])\n",
    "entry on the opener": "const SAFE_EXACT = new Set(['todo_write',\n  'a',\n])\n",
    "entry on the closer": _set("  'a',", closer="  'b'])"),
    "spread": _set("  ...BASE,", "  'todo_write',"),
    "variable entry": _set("  TODO_WRITE,", "  'todo_write',"),
    "two entries on a line": _set("  'a', 'b',"),
    "template literal": _set("  `todo_write`,"),
    "escape in a literal": _set("  'it\\'s',"),
    "block comment": _set("  /* safe */ 'a',"),
    "missing comma inside": _set("  'a'", "  'b',"),
    "bracket on its own line": "const SAFE_EXACT = new Set(\n[\n  'a',\n])\n",
    "no closer": "const SAFE_EXACT = new Set([\n  'a',\n",
    "split closer": _set("  'a',", closer="]\n)"),
}


@pytest.mark.parametrize("src", list(UNKNOWN.values()), ids=list(UNKNOWN))
def test_an_unknown_shape_is_left_byte_identical(src: str) -> None:
    result = patch_text(src)
    assert result.status == "unknown"
    assert result.text is src
    assert result.added == ()
    assert result.reason


_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-.:*0123456789", min_size=1, max_size=24)


@given(
    names=st.lists(st.one_of(_NAME, st.sampled_from(PATCH_NAMES)), unique=True, max_size=12),
    quote=st.sampled_from(["'", '"']),
    eol=st.sampled_from(["\n", "\r\n"]),
    indent=st.sampled_from(["", "  ", "    ", "\t"]),
    last_comma=st.booleans(),
    final_newline=st.booleans(),
)
def test_patching_is_idempotent_and_adds_each_name_once(
    names: list[str], quote: str, eol: str, indent: str, last_comma: bool, final_newline: bool
) -> None:
    body = [f"{indent}{quote}{n}{quote}," for n in names]
    if body and not last_comma:
        body[-1] = body[-1][:-1]
    src = "const x = 1" + eol + _set(*body, eol=eol)
    if not final_newline:
        src = src[: -len(eol)]
    once = patch_text(src)
    twice = patch_text(once.text)
    assert once.status == ("already" if set(PATCH_NAMES) <= set(names) else "patched")
    assert twice.status == "already"
    assert twice.text == once.text
    added_quote = quote if names else "'"  # an empty set has no style to follow
    for name in PATCH_NAMES:
        assert once.text.count(f"{added_quote}{name}{added_quote}") == 1
    if eol == "\r\n":
        assert once.text.count("\n") == once.text.count("\r\n")
    comma_added = once.status == "patched" and bool(body) and not last_comma
    expected_base = src.replace(body[-1] + eol, body[-1] + "," + eol, 1) if comma_added else src
    assert strip_patch(once.text) == expected_base


def _node() -> str | None:
    found = shutil.which("node")
    if found is None and os.environ.get("CI"):
        pytest.fail("node not found: .ci/run installs it (apt-get install nodejs)")
    return found


@pytest.mark.parametrize("variant", ["lf", "crlf-no-comma"])
def test_the_patched_guard_still_loads_and_allows_the_tools_in_node(
    tmp_path: Path, variant: str
) -> None:
    """The point of the patch: Derpyu's guard, once patched, is valid JavaScript that lets
    rofmd's tools through and still refuses others."""
    node = _node()
    if node is None:
        pytest.skip("node not found: install Node.js to run the guard")
    src = GUARD
    if variant == "crlf-no-comma":
        src = GUARD.replace("  'todo_write',\n])", "  'todo_write'\n])").replace("\n", "\r\n")
    module = tmp_path / "qq-tool-restrict.mjs"
    module.write_bytes(patch_text(src).text.encode("utf-8"))
    script = (
        f"const m = await import({str(module.as_uri())!r});"
        "const names = ['memory_judge','memory_recall','memory_image','memory_group_recall',"
        "'todo_write','mcp__snowluma__send','dev_build_plugin'];"
        "console.log(JSON.stringify(names.map((n) => m.allowed(n))));"
    )
    done = subprocess.run(
        [node, "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[true,true,true,true,true,true,false]"

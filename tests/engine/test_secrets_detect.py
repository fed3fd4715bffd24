"""The secret detector and `secrets.mode` on one text (issue 19): every seeded kind is
found and replaced, ordinary text of similar shape (hashes, UUIDs, images, paths, code
about passwords) is left alone, placeholders are deterministic and reveal nothing."""

from __future__ import annotations

import random
import re
import string
from pathlib import Path

import pytest

from engine import texts
from engine.config.validate import validate_tree
from engine.secrets import detect
from engine.secrets.detect import find_secrets, has_secret
from engine.secrets.randomness import looks_random
from engine.secrets.redact import placeholder, query_text, redact_text, strip_secrets
from tests.secrets_corpus import ORDINARY, PLACEHOLDER_LINE, PLANTED

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("planted", PLANTED, ids=lambda p: f"{p.kind}-{p.role}")
def test_every_seeded_secret_is_redacted_to_its_kind(planted: object) -> None:
    from tests.secrets_corpus import Planted

    assert isinstance(planted, Planted)
    out = redact_text(planted.text, "redact")
    assert planted.value not in out.text
    assert out.kinds[planted.kind] >= 1
    assert f"[secret:{planted.kind}" in out.text


def test_at_least_twelve_kinds_in_both_languages() -> None:
    assert len({p.kind for p in PLANTED}) >= 12
    assert any(re.search("[\u4e00-\u9fff]", p.text) for p in PLANTED)
    assert {p.role for p in PLANTED} == {"user", "assistant", "tool", "tool-call"}


@pytest.mark.parametrize("text", ORDINARY, ids=lambda t: t[:24])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert find_secrets(text) == []
    assert redact_text(text, "redact").text == text


def test_the_projects_own_code_and_docs_have_no_false_positive() -> None:
    # ~1 MB of Python that names tokens, passwords, keys and hashes all the time
    files = [
        p
        for folder in ("engine", "handlers", "rofmd")
        for p in sorted((REPO / folder).rglob("*.py"))
        if "secrets" not in p.parts
    ]
    hits = [
        (p.name, p.read_text()[f.start : f.end][:20])
        for p in files
        for f in find_secrets(p.read_text())
    ]
    assert hits == []


def test_random_tokens_are_found_and_hashes_are_not() -> None:
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + "+/"
    tokens = ["".join(rng.choice(alphabet) for _ in range(28)) for _ in range(500)]
    assert sum(looks_random(t) for t in tokens) >= 0.95 * len(tokens)
    hexes = ["".join(rng.choice("0123456789abcdef") for _ in range(n)) for n in (7, 40, 64)]
    uuids = ["123e4567-e89b-12d3-a456-426614174000", "550E8400-E29B-41D4-A716-446655440000"]
    for value in [*hexes, *uuids]:
        assert find_secrets(f"see {value} here") == []


def test_placeholders_are_deterministic_and_reveal_nothing() -> None:
    text = "\n".join(p.text for p in PLANTED)
    first, second = redact_text(text, "redact"), redact_text(text, "redact")
    assert first == second
    # idempotent: a redacted text redacts to itself
    assert redact_text(first.text, "redact").text == first.text
    assert redact_text(PLACEHOLDER_LINE, "redact").text == PLACEHOLDER_LINE
    tagged = re.findall(r"\[secret:[a-z-]+ …([0-9a-f]{4})\]", first.text)
    assert tagged  # machine-made values carry a 16-bit tag
    for p in PLANTED:
        assert p.value[-4:] not in tagged  # the tag is a hash, not the value's tail
    # a person's password never gets a tag: 16 bits of a hash would narrow a dictionary
    assert placeholder("password", "hunter2", random=False) == "[secret:password]"
    assert redact_text("password=hunter2", "redact").text == "password=[secret:password]"
    a = placeholder("api-key", "A" * 30, random=True)
    b = placeholder("api-key", "B" * 30, random=True)
    assert a != b and a == placeholder("api-key", "A" * 30, random=True)


def test_drop_mode_removes_values_and_notes_how_many() -> None:
    text = f"key {PLANTED[0].value} and {PLANTED[2].value}"
    out = redact_text(text, "drop")
    assert out.count == 2
    assert "[secret:" not in out.text and PLANTED[0].value not in out.text
    assert out.text.endswith(texts.SECRET_DROPPED_NOTE.format(n=2))
    assert find_secrets(out.text) == []  # the note does not redact itself
    assert redact_text(text, "off").text == text


def test_queries_lose_their_secret_values_only() -> None:
    text = f"我的密码是 {PLANTED[18].value}，部署端口是多少？"
    stripped, n = strip_secrets(text)
    assert n == 1 and PLANTED[18].value not in stripped and "部署端口是多少" in stripped
    assert query_text(text, "off") == text
    assert has_secret(PLANTED[2].value) and not has_secret("部署端口 8080")


def test_the_format_hint_covers_every_format_literal() -> None:
    for kind, literals, _ in detect._FORMATS:
        for literal in literals:
            hinted = detect._FORMAT_HINT.search(b"x " + literal + b" y")
            assert hinted or literal in detect._FORMAT_HINT_APART, (kind, literal)


def test_pem_in_json_and_unterminated_blocks() -> None:
    body = PLANTED[11].value
    escaped = '{"k": "-----BEGIN EC PRIVATE KEY-----\\n' + body + "\\n" + body + '"}'
    out = redact_text(escaped, "redact").text
    assert body not in out and out.startswith('{"k": "[secret:private-key')
    bare = "-----BEGIN OPENSSH PRIVATE KEY-----\\n"  # a probe of a file type: no key
    assert find_secrets(bare) == []


def test_wrong_mode_falls_back_with_a_warning() -> None:
    tree, warnings = validate_tree({"secrets": {"mode": "maybe"}})
    assert tree["secrets"]["mode"] == "redact"
    assert any("secrets.mode" in w for w in warnings)
    tree, warnings = validate_tree({"secrets": {"mode": "DROP"}})
    assert tree["secrets"]["mode"] == "drop"

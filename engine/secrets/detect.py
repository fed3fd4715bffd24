"""Finding secrets in conversation text: keys, tokens, passwords, private keys.

Why our own detector and not `detect-secrets`: measured on the archive bench surface
(176k characters), its line scanner takes 462 ms, three times the whole archive it would
guard, and flags the bench's own filler as "high entropy"; our budget is a tenth of the
archive. This module is a focused set of the same rule families, each a regular
expression run only when a literal it needs is in the text (a ``str.find`` at C speed):

* format tokens, whose shape alone says what they are (a cloud key, a GitHub / GitLab /
  Slack / Stripe / Google / npm / PyPI / Hugging Face / SendGrid / Telegram token, an
  OpenAI-style ``sk-`` key, a JWT) and PEM private-key blocks, also inside a
  JSON-escaped string (``\\n`` for the line ends);
* contexts that say a value is secret: ``password=…``, ``"api_key": "…"``,
  ``--token …``, ``密码是…``, the password of a ``scheme://user:pass@host`` URL and the
  credential of an ``Authorization: Bearer / Basic / token …`` header; only the value is
  a finding, the key stays readable;
* a long random-looking token anywhere (``engine.secrets.randomness``, which also holds
  the false-positive policy: hashes, UUIDs, word paths and data blobs are left alone).

Deterministic: the same text gives the same findings, in text order, never overlapping
(a more specific rule wins over a general one covering the same characters).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from engine.secrets.randomness import BLOB_MAX, looks_random

__all__ = ["PLACEHOLDER_RE", "Finding", "find_secrets", "has_secret"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One secret value: its span in the text, its kind, and whether its characters are
    machine-made randomness (then a short hash of it cannot be inverted, see
    ``engine.secrets.redact``)."""

    start: int
    end: int
    kind: str
    random: bool


PLACEHOLDER_RE = re.compile(r"\[secret:[a-z0-9-]+(?: …[0-9a-f]{4})?\]")
"""A placeholder written by an earlier redaction: never a finding itself."""

# --- format tokens: (kind, literals one of which must occur, pattern) ------------------

_FORMATS: tuple[tuple[str, tuple[bytes, ...], re.Pattern[str]], ...] = (
    (
        "aws-key",
        (b"AKIA", b"ASIA", b"AGPA", b"AIDA", b"AROA", b"ANPA", b"ANVA", b"APKA", b"ABIA", b"ACCA"),
        re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|APKA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    ),
    (
        "github-token",
        (b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_"),
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    ),
    ("gitlab-token", (b"glpat-",), re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("slack-token", (b"xox",), re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    (
        "slack-webhook",
        (b"hooks.slack.com",),
        re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9_/-]{20,}"),
    ),
    ("stripe-key", (b"_live_", b"_test_"), re.compile(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("google-api-key", (b"AIza",), re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("npm-token", (b"npm_",), re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("pypi-token", (b"pypi-",), re.compile(r"\bpypi-AgE[A-Za-z0-9_-]{50,}")),
    ("huggingface-token", (b"hf_",), re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    (
        "sendgrid-key",
        (b"SG.",),
        re.compile(r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b"),
    ),
    ("telegram-token", (b":AA",), re.compile(r"\b\d{8,10}:AA[A-Za-z0-9_-]{33}\b")),
    (
        "api-key",
        (b"sk-",),
        re.compile(r"\bsk-(?:proj-|ant-(?:api|admin)\d\d-|svcacct-)?[A-Za-z0-9_-]{20,}"),
    ),
    (
        "jwt",
        (b"eyJ",),
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
)

_FORMAT_HINT = re.compile(
    rb"A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|PKA|BIA|CCA|Iza)|g(?:h[pousr]_|ithub_pat_|lpat-)"
    rb"|hooks\.slack\.com|_(?:live|test)_|npm_|pypi-|hf_|SG\.|:AA|sk-|eyJ"
)
"""Every literal of :data:`_FORMATS` in one pattern, spelt as a trie so that the regular
expression engine skips the characters no literal starts with: one pass tells whether
any format can occur (a test keeps the two lists equal)."""
_FORMAT_HINT_APART = (b"xox",)
"""Literals searched on their own: a run of ``x`` (filler, a masked value) would stop
the hint pattern at every character."""

# --- PEM private keys ------------------------------------------------------------------

_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----")
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\s\\:,.-]*")
"""What follows an unterminated BEGIN line: base64, headers, (escaped) line ends."""
_PEM_SCAN_MAX = 65_536
_PEM_BODY_MIN = 40
"""Base64 characters a block must hold to be a key (the shortest, Ed25519, has ~300)."""
_BASE64_CHARS = re.compile(r"[A-Za-z0-9+/]")

# --- contexts that say a value is secret --------------------------------------------------

_KEYWORD = re.compile(
    r"(?:pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|account[_-]?key|auth[_-]?key|credentials?)(?![a-z0-9])"
)
"""Run on the lower-cased text (a case-insensitive pattern is seven times slower)."""
_KEYWORD_LITERALS = (b"pass", b"pwd", b"secret", b"token", b"key", b"credential")
_PASSWORD_WORDS = ("pass", "pwd")

_ASSIGN = re.compile(
    r"""["']?[ \t]*(?P<op>=>|:=|=(?!=)|:(?!:)|：)[ \t]*"""
    r"""(?:"(?P<dq>[^"\n]{1,512})"|'(?P<sq>[^'\n]{1,512})'|`(?P<bq>[^`\n]{1,512})`"""
    r"""|(?P<bare>[^\s"'`,;&<>(){}\[\]]{1,512}))"""
)
_FLAG_VALUE = re.compile(
    r"""(?:=|[ \t]+)(?:"(?P<dq>[^"\n]{1,512})"|'(?P<sq>[^'\n]{1,512})'|(?P<bare>[^\s"'`]{1,512}))"""
)

_CJK_KEYWORD = re.compile(r"(?:密码|口令|密钥|秘钥|私钥|令牌)")
_CJK_ASSIGN = re.compile(
    r"[ \t]*(?:是|为|:|：|=)[ \t]*[「“\"']?(?P<bare>[!-~]{3,256}?)(?=[」”\"']|[^!-~]|$)"
)

_URL_PASSWORD = re.compile(
    r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,30}://[^\s:/@'\"]{0,128}:(?P<pw>[^\s@/'\"]{1,256})@[^\s/@'\"]"
)
_AUTH = re.compile(r"(?i)\b(?P<scheme>bearer|basic|token)[ \t]+(?P<cred>[A-Za-z0-9._~+/=-]{12,})")
_AUTH_LITERALS = (b"bearer", b"basic", b"authorization")

_BLOB_RUN = re.compile(rb"[A-Za-z0-9+/_-]{20}")
_BLOB = re.compile(r"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_-]{20,}={0,2}(?![A-Za-z0-9+/_=-])")
_BLOB_EXEMPT_BEFORE = re.compile(
    r"(?:base64,|ssh-(?:rsa|ed25519|dss) |ecdsa-sha2-nistp\d+ |sha(?:1|256|384|512)[-:])$"
)
"""A data URI, a public key, a checksum: data of a known kind, not a secret."""
_BLOB_EXEMPT_PREFIX = re.compile(r"sha(?:1|256|384|512)-")
"""Subresource integrity (``sha512-…`` in a lock file): a checksum."""

_PLACEHOLDER_VALUES = frozenset(
    {
        "null", "none", "nil", "true", "false", "undefined", "required", "optional",
        "string", "str", "int", "bool", "bytes", "number", "any", "object", "secret",
        "password", "token", "redacted", "hidden", "masked", "example", "xxx", "todo",
        "your_password", "your-password", "yourpassword", "your_token", "your_api_key",
        "env", "environ", "input", "prompt", "placeholder", "empty", "default", "self",
    }
)  # fmt: skip
_CODE_REF = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[A-Z][a-z]+(?:[A-Z][a-z]+)+"
)
_TRAILING = ".,;:!?)]}>'\""

# Rule ranks: a lower rank wins an overlap.
_RANK_PEM, _RANK_FORMAT, _RANK_URL, _RANK_AUTH, _RANK_KV, _RANK_BLOB = range(6)


def _placeholder_value(value: str) -> bool:
    low = value.lower()
    if low in _PLACEHOLDER_VALUES or len(set(value)) == 1:
        return True
    if value[0] in "$%<[{*#" or value.startswith(("...", "…")):
        return True
    return _CODE_REF.fullmatch(value) is not None


def _mixed(value: str) -> bool:
    """A bare value after ``key:`` in prose is a secret only if it is not a plain word."""
    if any(c.isdigit() for c in value) or not value.isalnum():
        return True
    return sum(c.isupper() for c in value) >= 2 and any(c.islower() for c in value)


def _credential_like(value: str) -> bool:
    """A token, key or secret someone generated: long, and not one kind of character.
    (A password may be anything a person chose: it has no such test.)"""
    if len(value) < 12:
        return False
    kinds = (
        any(c.islower() for c in value),
        any(c.isupper() for c in value),
        any(c.isdigit() for c in value),
    )
    return sum(kinds) >= 2


def _line_prefix(text: str, start: int) -> str:
    """What precedes the identifier that ends at ``start`` on its line."""
    i = start
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_.-"):
        i -= 1
    line_start = text.rfind("\n", 0, i) + 1
    return text[line_start:i].strip(" \t\"'")


def _config_line(text: str, key_start: int, value_end: int) -> bool:
    """``key: value`` is a line of its own (YAML, an .ini, a header), not a sentence."""
    line_end = text.find("\n", value_end)
    rest = text[value_end : line_end if line_end >= 0 else len(text)].strip()
    return _line_prefix(text, key_start) in ("", "-", "#", "//") and rest in ("", "#")


def _kind_of_keyword(word: str) -> str:
    low = word.lower()
    if low.startswith(_PASSWORD_WORDS):
        return "password"
    if "token" in low:
        return "token"
    if "key" in low:
        return "api-key"
    return "secret"


def _value_span(m: re.Match[str]) -> tuple[int, int, bool] | None:
    groups = m.groupdict()
    for group, quoted in (("dq", True), ("sq", True), ("bq", True), ("bare", False)):
        if groups.get(group) is not None:
            start, end = m.span(group)
            return start, end, quoted
    return None


def _keyword_findings(text: str, ascii_low: bytes) -> Iterator[tuple[int, Finding]]:
    if not any(w in ascii_low for w in _KEYWORD_LITERALS):
        return
    low = text.lower()
    if len(low) != len(text):  # a character lower-cases to two: offsets would drift
        low = "".join(c.lower()[:1] for c in text)
    for m in _KEYWORD.finditer(low):
        start = m.start()
        prev = text[start - 1] if start else ""
        if prev.isalpha() and not (prev.islower() and text[start].isupper()):
            continue  # inside a word ("bypass", "compass"), not a camelCase boundary
        flag = text[max(0, start - 2) : start] == "--"
        tail = (_FLAG_VALUE if flag else _ASSIGN).match(text, m.end())
        if tail is None:
            continue
        span = _value_span(tail)
        if span is None:
            continue
        vstart, vend, quoted = span
        if not quoted:
            while vend > vstart and text[vend - 1] in _TRAILING:
                vend -= 1
        value = text[vstart:vend]
        kind = _kind_of_keyword(m.group(0))
        if len(value) < 3 or _placeholder_value(value):
            continue
        if kind != "password" and not _credential_like(value):
            continue  # "token": "arc-1", token=41000: an id or a count, not a credential
        op = tail.groupdict().get("op")
        if not quoted and not flag:
            if vend < len(text) and text[vend] in "([.":
                continue  # code: token = make_token(...), token = answer["token"]
            if op in (":", "：") and not _mixed(value) and not _config_line(text, start, vend):
                continue  # prose: "password: please enter it"
        yield _RANK_KV, Finding(vstart, vend, kind, looks_random(value, min_len=16))


def _cjk_findings(text: str) -> Iterator[tuple[int, Finding]]:
    if text.isascii():
        return
    for m in _CJK_KEYWORD.finditer(text):
        tail = _CJK_ASSIGN.match(text, m.end())
        if tail is None:
            continue
        vstart, vend = tail.span("bare")
        while vend > vstart and text[vend - 1] in _TRAILING:
            vend -= 1
        value = text[vstart:vend]
        if len(value) < 3 or _placeholder_value(value):
            continue
        kind = "password" if m.group(0) in ("密码", "口令") else "secret"
        yield _RANK_KV, Finding(vstart, vend, kind, looks_random(value, min_len=16))


def _pem_findings(text: str, ascii_text: bytes) -> Iterator[tuple[int, Finding]]:
    if b"PRIVATE KEY" not in ascii_text:
        return
    for m in _PEM_BEGIN.finditer(text):
        end_marker = f"-----END {m.group(1)}PRIVATE KEY{m.group(2) or ''}-----"
        stop = text.find(end_marker, m.end(), m.end() + _PEM_SCAN_MAX)
        if stop >= 0:
            end = stop + len(end_marker)
        else:
            body = _PEM_BODY.match(text, m.end(), m.end() + _PEM_SCAN_MAX)
            end = body.end() if body else m.end()
        if len(_BASE64_CHARS.findall(text, m.end(), end)) < _PEM_BODY_MIN:
            continue  # a bare BEGIN line (a file-type probe, a how-to): no key in it
        yield _RANK_PEM, Finding(m.start(), end, "private-key", True)


def _format_findings(text: str, ascii_text: bytes) -> Iterator[tuple[int, Finding]]:
    if _FORMAT_HINT.search(ascii_text) is None and not any(
        lit in ascii_text for lit in _FORMAT_HINT_APART
    ):
        return
    for kind, literals, pattern in _FORMATS:
        if not any(lit in ascii_text for lit in literals):
            continue
        for m in pattern.finditer(text):
            if kind == "api-key" and not looks_random(m.group(0), min_len=20):
                continue
            yield _RANK_FORMAT, Finding(m.start(), m.end(), kind, True)


def _url_findings(text: str, ascii_text: bytes) -> Iterator[tuple[int, Finding]]:
    if b"://" not in ascii_text:
        return
    for m in _URL_PASSWORD.finditer(text):
        value = m.group("pw")
        if _placeholder_value(value):
            continue
        start, end = m.span("pw")
        yield _RANK_URL, Finding(start, end, "password", looks_random(value, min_len=16))


def _auth_findings(text: str, ascii_low: bytes) -> Iterator[tuple[int, Finding]]:
    if not any(w in ascii_low for w in _AUTH_LITERALS):
        return
    for m in _AUTH.finditer(text):
        cred = m.group("cred").rstrip(".,;")
        before = text[max(0, m.start() - 40) : m.start()].lower()
        header = "authorization" in before
        if not header and not (len(cred) >= 16 and _mixed(cred) and any(c.isdigit() for c in cred)):
            continue  # "Basic authentication", "token limits": words, not credentials
        if _placeholder_value(cred):
            continue
        scheme = m.group("scheme").lower()
        kind = "basic-auth" if scheme == "basic" else "bearer-token"
        start = m.start("cred")
        yield _RANK_AUTH, Finding(start, start + len(cred), kind, looks_random(cred, min_len=16))


def _blob_findings(text: str, ascii_text: bytes) -> Iterator[tuple[int, Finding]]:
    if _BLOB_RUN.search(ascii_text) is None:
        return
    for m in _BLOB.finditer(text):
        token = m.group(0)
        if len(token) > BLOB_MAX or _BLOB_EXEMPT_PREFIX.match(token) or not looks_random(token):
            continue
        if _BLOB_EXEMPT_BEFORE.search(text, max(0, m.start() - 24), m.start()):
            continue
        yield _RANK_BLOB, Finding(m.start(), m.end(), "high-entropy", True)


def _candidates(text: str) -> Iterator[tuple[int, Finding]]:
    # The ASCII letters of the text, in order: every rule but the Chinese one needs a
    # literal of its own in there, and bytes are searched at memchr speed (projecting
    # costs a tenth of one regular-expression pass over a Chinese text).
    ascii_text = text.encode("ascii", "ignore")
    ascii_low = ascii_text.lower()
    yield from _pem_findings(text, ascii_text)
    yield from _format_findings(text, ascii_text)
    yield from _url_findings(text, ascii_text)
    yield from _auth_findings(text, ascii_low)
    yield from _keyword_findings(text, ascii_low)
    yield from _cjk_findings(text)
    yield from _blob_findings(text, ascii_text)


def find_secrets(text: str) -> list[Finding]:
    """The secrets in ``text``, in order, without overlaps (module docstring)."""
    if len(text) < 8:
        return []
    found = sorted(_candidates(text), key=lambda rf: (rf[0], rf[1].start, -rf[1].end))
    if not found:
        return []
    taken: list[tuple[int, int]] = [m.span() for m in PLACEHOLDER_RE.finditer(text)]
    out: list[Finding] = []
    for _, f in found:
        if any(f.start < end and start < f.end for start, end in taken):
            continue
        taken.append((f.start, f.end))
        out.append(f)
    out.sort(key=lambda f: f.start)
    return out


def has_secret(text: str) -> bool:
    """True when ``text`` holds at least one secret."""
    return bool(find_secrets(text))

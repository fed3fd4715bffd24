"""Text -> terms, without a dictionary (reference §1.3 step 1, ``engine/tokenize.js``).

Pipeline (every step is deterministic and locale-independent):

1. **Surrogate repair** (:func:`fix_surrogates`). Text arriving through JSON can hold
   UTF-16 surrogates as separate code points ("\\ud83d\\ude00"). A valid high+low pair is
   joined back into its real character; a lone surrogate becomes a space. Output terms
   therefore never contain half a character, and orjson can always encode them.
2. **Normalisation** (:func:`normalize_text`): NFKC (full-width ``ＡＢＣ１２３`` ->
   ``ABC123``, the same normalisation ``memory_judge`` keywords get), then zero-width
   characters and C0 controls are removed/blanked.
3. **Scan** into Latin tokens and maximal CJK runs; everything else (punctuation, spaces,
   emoji, symbols) separates. Emoji are never keywords and never split, because a code
   point is the smallest unit we ever cut at.
4. **Latin tokens** are word characters (ASCII letters/digits, ``_``, Latin-1/Extended,
   Greek, Cyrillic) joined by inner ``.`` or ``-``, so ``v1.2.0``, ``3.14``, ``node.js``,
   ``gray-release``, ``snake_case`` and ``CamelCase`` stay whole; a trailing ``++``/``#``
   keeps ``C++``/``C#``, a ``%`` after a digit keeps ``10%``. A sentence-final ``.`` is
   not inner and is dropped. Tokens shorter than 2 characters (``a``, ``I``, ``7``) or
   longer than 64 (hashes, base64 blobs) are not terms. The original case is kept for
   display; matching decides about case (``match.expandLatinCase``).
5. **CJK runs** are segmented at stopwords (see :mod:`engine.stopwords`): multi-character
   stopwords and particle characters cut the run, edge characters are trimmed from
   segment ends, protected words stay whole, longest entry wins at a position. Segments
   of 2..8 characters are terms as they are (a phrase between two particles, e.g.
   星港项目接口网关, is usually one noun phrase, and keeping it whole lets a shorter query
   term match inside it). Longer segments are unsegmented prose; they are cut into
   near-equal chunks of at most 4 characters (most Chinese words are 2-4 characters),
   deterministic by position. Single characters are dropped: one Han character is too
   ambiguous to be a keyword, and contains-matching still finds it inside longer terms.

The result keeps text order and duplicates; ranking and deduplication are
:func:`engine.keywords.extract_keywords`' job.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from engine.charclass import CJK_CLASS as CJK_CLASS
from engine.charclass import LATIN_WORD_CLASS as LATIN_WORD_CLASS
from engine.charclass import is_cjk_char as is_cjk_char
from engine.charclass import is_latin_word_char as is_latin_word_char
from engine.stopwords import StopwordTable, stopword_table

MIN_TERM_CHARS: Final = 2
MAX_CJK_TERM_CHARS: Final = 8
CJK_CHUNK_CHARS: Final = 4
MAX_LATIN_TERM_CHARS: Final = 64

_SCAN = re.compile(
    rf"(?P<lat>[{LATIN_WORD_CLASS}]+(?:[.\-][{LATIN_WORD_CLASS}]+)*(?:\+\+|#|(?<=[0-9])%)?)"
    rf"|(?P<cjk>[{CJK_CLASS}]+)"
)
_ALNUM = re.compile(r"[^\W_]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_PAIR = re.compile("([\ud800-\udbff])([\udc00-\udfff])")

_DELETE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"))
_BLANK = dict.fromkeys([*range(0x00, 0x20), 0x7F], " ")
_CLEAN: Final[dict[int, str | None]] = {**_DELETE, **_BLANK}
_CLEAN_ANY = re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(_CLEAN)) + "]")
"""Any character `_CLEAN` changes: `str.translate` with a table looks up every character
of a non-ASCII text (about 50 ns each), a character class scans for them at C speed, and
most texts hold none."""


def fix_surrogates(text: str) -> str:
    """Join UTF-16 surrogate pairs into one code point; blank lone surrogates.

    Python strings may carry surrogates when JSON escapes were decoded one unit at a time.
    Joining keeps an emoji or a supplementary Han character (𠮷) intact; blanking a lone
    half makes it a separator instead of an unencodable part of a keyword.
    """
    if _SURROGATE.search(text) is None:
        return text
    joined = _SURROGATE_PAIR.sub(
        lambda m: chr(0x10000 + ((ord(m[1]) - 0xD800) << 10) + (ord(m[2]) - 0xDC00)), text
    )
    return _SURROGATE.sub(" ", joined)


_FULLWIDTH: Final = re.compile("[\u3000\uff01-\uff5e]")
_FULLWIDTH_ASCII: Final = {
    chr(c): unicodedata.normalize("NFKC", chr(c)) for c in (0x3000, *range(0xFF01, 0xFF5F))
}
"""The ideographic space and the full-width forms of ASCII, each to the one ASCII
character that is its NFKC form."""


def _fullwidth_ascii(match: re.Match[str]) -> str:
    return _FULLWIDTH_ASCII[match[0]]


def nfkc(text: str) -> str:
    """``unicodedata.normalize("NFKC", text)``, fast for Chinese text.

    Chinese text is rarely NFKC as written: its full-width punctuation (，：！？（）) and
    the ideographic space have ASCII compatibility forms, and normalising a whole text
    for them costs about 150 ns a character, most of the CPU time of archiving a long
    message. Those characters are replaced first, at C speed but for one call per
    replacement; if that leaves the text normalised, it is the NFKC form: NFKC is the
    canonical composition of the compatibility decomposition, each of these characters
    decomposes to exactly its ASCII replacement (a starter, as it was), so the
    replacement has the same decomposition as the text, and a normalised string is its
    own NFKC form. Otherwise (a combining mark after one, an ellipsis, a half-width
    katakana) the replacement is normalised: the same result, by the same argument."""
    if unicodedata.is_normalized("NFKC", text):
        return text
    folded = _FULLWIDTH.sub(_fullwidth_ascii, text)
    if unicodedata.is_normalized("NFKC", folded):
        return folded
    return unicodedata.normalize("NFKC", folded)


def normalize_text(text: str) -> str:
    """Surrogate repair, NFKC, zero-width removal, control characters to spaces.

    This is the text every extracted keyword occurs in (up to case). NFKC is skipped when
    the text is already normalised, which is the common case and keeps extraction fast,
    and made cheap for full-width punctuation (:func:`nfkc`).
    """
    text = nfkc(fix_surrogates(text))
    return text.translate(_CLEAN) if _CLEAN_ANY.search(text) else text


def _chunks(seg: str) -> list[str]:
    """Cut an over-long CJK segment into near-equal chunks of <= CJK_CHUNK_CHARS."""
    n = len(seg)
    parts = -(-n // CJK_CHUNK_CHARS)
    base, extra = divmod(n, parts)
    out: list[str] = []
    pos = 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append(seg[pos : pos + size])
        pos += size
    return out


def _emit(pieces: list[tuple[str, bool]], table: StopwordTable, out: list[str]) -> None:
    """Trim edge characters from both ends of a segment, then emit its term(s)."""
    lo, hi = 0, len(pieces)
    while lo < hi and pieces[lo][1]:
        lo += 1
    while hi > lo and pieces[hi - 1][1]:
        hi -= 1
    seg = "".join(p for p, _ in pieces[lo:hi]) if hi - lo != 1 else pieces[lo][0]
    n = len(seg)
    if n < MIN_TERM_CHARS:
        return
    if n <= MAX_CJK_TERM_CHARS:
        if seg not in table.words:
            out.append(seg)
        return
    out.extend(c for c in _chunks(seg) if len(c) >= MIN_TERM_CHARS and c not in table.words)


def segment_cjk(run: str, table: StopwordTable | None = None) -> list[str]:
    """Segment one run of CJK characters into terms (rule in the module docstring).

    Scanning left to right, the longest table entry starting at a position wins: a
    protected word is appended whole (never trimmed or cut), a stopword closes the
    current segment and is skipped, an edge character is appended as a piece that
    :func:`_emit` may trim from the segment's ends. Text between entries is kept as is.
    """
    if table is None:
        table = stopword_table()
    first = table.cjk_first
    search = table.cjk_starts.search
    startswith = run.startswith
    out: list[str] = []
    pieces: list[tuple[str, bool]] = []
    pos = 0
    n = len(run)
    m = search(run)
    while m is not None:
        i = m.start()
        for entry in first[run[i]]:
            if startswith(entry[0], i):
                break
        else:  # e.g. 首 starts 首都 but is no entry itself: plain text
            m = search(run, i + 1)
            continue
        word, kind = entry
        if i > pos:
            pieces.append((run[pos:i], False))
        if kind == "stop":
            if pieces:
                _emit(pieces, table, out)
                pieces = []
        else:
            pieces.append((word, kind == "edge"))
        pos = i + len(word)
        m = search(run, pos) if pos < n else None
    if pos < n:
        pieces.append((run[pos:], False))
    if pieces:
        _emit(pieces, table, out)
    return out


def terms(text: str, table: StopwordTable | None = None) -> list[str]:
    """All terms of ``text`` in text order, duplicates kept, stopwords removed.

    ``text`` is normalised first (:func:`normalize_text`), so every returned term is a
    substring of ``normalize_text(text)``.
    """
    if table is None:
        table = stopword_table()
    words = table.words
    out: list[str] = []
    for m in _SCAN.finditer(normalize_text(text)):
        lat = m.group("lat")
        if lat is not None:
            if (
                MIN_TERM_CHARS <= len(lat) <= MAX_LATIN_TERM_CHARS
                and _ALNUM.search(lat) is not None
                and lat.casefold() not in words
            ):
                out.append(lat)
        else:
            out.extend(segment_cjk(m.group("cjk"), table))
    return out

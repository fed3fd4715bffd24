"""The peer: plain `bm25s` over exactly the folders the daemon can recall.

Why this baseline: "put the right memories into the block" is a retrieval problem, and
BM25 over the archived text is what anyone would try first. The corpus is read from
disk after the conversation was played (every scored folder's ``context.json``, each
folder one document: its messages rendered ``role: text`` per line, as the recall block
renders them), so both sides see the same folders with the same words.

Tokenisation, the same for corpus and query:

* English: ``bm25s.tokenize`` with its English stopwords and the PyStemmer English
  stemmer;
* Chinese: CJK character bigrams (a lone CJK character between non-CJK text is kept
  as a unigram) plus lowercased Latin words and numbers, the usual strong choice for
  BM25 on Chinese without a segmenter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s  # type: ignore[import-untyped]
import orjson
import Stemmer  # type: ignore[import-not-found]  # a C extension without stubs

from bench.eval.generate import Lang

_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[a-z0-9]+")
_STEMMER = Stemmer.Stemmer("english")


@dataclass(frozen=True, slots=True)
class Folder:
    """One archived folder as stored on disk."""

    id: str
    text: str
    scored: bool
    messages: int
    keywords: tuple[str, ...] = ()
    """Its judged keywords (heuristic ones in the eval)."""


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b
        )
    return ""


def read_folders(session_dir: Path) -> list[Folder]:
    """Every folder of a session directory, in id order, with its scored flag."""
    folders = []
    for path in sorted(session_dir.glob("mem-*")):
        context = path / "context.json"
        meta = path / "meta.json"
        if not context.is_file() or not meta.is_file():
            continue
        messages = orjson.loads(context.read_bytes()).get("messages", [])
        lines = [
            f"{m.get('role', '')}: {_message_text(m.get('content'))}"
            for m in messages
            if isinstance(m, dict)
        ]
        doc = orjson.loads(meta.read_bytes())
        scored = bool(doc.get("scored"))
        keywords = tuple(str(k) for k in doc.get("keywords") or ())
        folders.append(Folder(path.name, "\n".join(lines), scored, len(lines), keywords))
    return folders


def chinese_tokens(text: str) -> list[str]:
    """CJK bigrams (unigrams for one-character runs) and lowercased Latin/number words."""
    lowered = text.lower()
    tokens: list[str] = []
    pos = 0
    for run in _CJK_RUN.finditer(lowered):
        tokens.extend(_WORD.findall(lowered, pos, run.start()))
        chars = run.group()
        if len(chars) == 1:
            tokens.append(chars)
        else:
            tokens.extend(chars[i : i + 2] for i in range(len(chars) - 1))
        pos = run.end()
    tokens.extend(_WORD.findall(lowered, pos))
    return tokens


def tokenize(texts: Sequence[str], lang: Lang) -> list[list[str]]:
    """The baseline's tokens of each text."""
    if lang == "zh":
        return [chinese_tokens(t) for t in texts]
    tokens: list[list[str]] = bm25s.tokenize(
        list(texts), stopwords="en", stemmer=_STEMMER, return_ids=False, show_progress=False
    )
    return [list(t) for t in tokens]


class Bm25:
    """A `bm25s` index over folders; `top` gives the best folder positions for a query."""

    def __init__(self, folders: Sequence[Folder], lang: Lang) -> None:
        self.folders = list(folders)
        self.lang = lang
        self._retriever = bm25s.BM25()
        if self.folders:
            self._retriever.index(
                tokenize([f.text for f in self.folders], lang), show_progress=False
            )

    def top(self, query: str, k: int) -> list[Folder]:
        """The ``k`` best folders for ``query`` (fewer when the corpus is smaller)."""
        k = min(k, len(self.folders))
        if k <= 0:
            return []
        tokens = tokenize([query], self.lang)
        docs, _scores = self._retriever.retrieve(tokens, k=k, show_progress=False)
        return [self.folders[int(i)] for i in docs[0]]

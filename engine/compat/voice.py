"""QQ voice notes in archived channel text (reference §3.2.7, 语音归档).

dsh-onebot-qq renders an inbound voice message as ``[语音]`` and, when speech-to-text is
available, delivers the transcript as ``（语音转写：…）``: in the same message right
after the mark (older versions) or as a message of its own steered in later. Recalled
months on, neither form says both "this was a voice message" and what was said, so the
archive folds them into one: ``[语音] 帮我记一下周五开会``; a mark whose transcript never
came reads ``[语音]（未转写）``, so the model knows the words are missing rather than
empty. Both the full-width forms the plugin writes and their ASCII forms (the
reference's normalised text) are read.

A pure string transform, and idempotent (its output contains neither a transcript nor a
lone mark), so text archived once, re-archived or read back is never changed twice.
Applied to QQ channel sessions only (``engine.archive.messages``): elsewhere a
``[语音]`` is just what someone typed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine import texts

__all__ = ["merge_voice_notes", "voice_note_text"]

_END = r"(?=[ \t]*(?:\r?\n|$))"
"""Only at the end of a line: a mark or a transcript is a line of its own (inside the
``<user_message>`` wrapper too), so words a user typed after it are left alone."""

_OPEN = r"[（(]语音转写[：:][ \t]*"
_BODY = r"((?:(?!\[语音\]|[（(]语音转写[：:]).)*?)[ \t]*[）)]"
"""A transcript's words up to its closing parenthesis (parentheses of its own
included), never across another mark or transcript."""
_TRANSCRIPT = re.compile(r"(?:\[语音\][ \t]*)?" + _OPEN + _BODY + _END, re.S)
_LONE_MARK = re.compile(r"\[语音\]" + _END)
_BARE_TRANSCRIPT = re.compile(r"\s*" + _OPEN + _BODY + r"\s*", re.S)


def _note(transcript: str) -> str:
    transcript = transcript.strip()
    if not transcript:
        return texts.ARCHIVE_VOICE_UNTRANSCRIBED
    return texts.ARCHIVE_VOICE_NOTE.format(transcript=transcript)


def _with_transcripts(text: str) -> str:
    if "语音转写" not in text:
        return text
    return _TRANSCRIPT.sub(lambda m: _note(m.group(1)), text)


def _untranscribed(text: str) -> str:
    if "[语音]" not in text:
        return text
    return _LONE_MARK.sub(texts.ARCHIVE_VOICE_UNTRANSCRIBED, text)


def voice_note_text(text: str) -> str:
    """One message: every transcript (after its mark or alone) → ``[语音] …``, every mark
    left without one → ``[语音]（未转写）``."""
    return _untranscribed(_with_transcripts(text))


def merge_voice_notes(user_texts: Sequence[str]) -> list[str | None]:
    """A conversation's user messages, in order: each as :func:`voice_note_text` makes
    it, except that a message ending its voice marks with a lone one takes the transcript
    the next user message consists of (``[语音]`` then ``（语音转写：X）`` → ``[语音] X``
    in the first); that second message is then None (its words live in the first)."""
    out: list[str | None] = []
    i = 0
    while i < len(user_texts):
        text = user_texts[i]
        if "语音" not in text:
            out.append(text)
            i += 1
            continue
        merged = _with_transcripts(text)
        lone = list(_LONE_MARK.finditer(merged))
        nxt = user_texts[i + 1] if i + 1 < len(user_texts) else None
        bare = _BARE_TRANSCRIPT.fullmatch(nxt) if nxt is not None and lone else None
        if bare is not None:
            last = lone[-1]
            merged = merged[: last.start()] + _note(bare.group(1)) + merged[last.end() :]
        out.append(_untranscribed(merged))
        if bare is not None:
            out.append(None)
            i += 2
        else:
            i += 1
    return out

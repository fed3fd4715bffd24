"""The cue patterns (`engine.heuristic.compile_cues`) match exactly where the plain
patterns of the same phrases do: ``cjk|…|(?<![word])(?:latin|…)end``, the shape they
had before they were grouped by first character for the regex engine's skip. Checked on
every phrase at every word boundary the look-arounds care about, on shuffled phrase
soup, and on the lines of generated English and Chinese conversations."""

from __future__ import annotations

import random
import re
from functools import cache

import pytest

from bench.eval.generate import generate
from engine import heuristic
from engine.heuristic import CUES, Cues, compile_cues, has_cue
from engine.tokenizer import normalize_text


def _bar(blob: str) -> list[str]:
    return blob.split("|")


SAMPLES = [
    *_bar("decided|decide to|decision|settled on|settle on|let's go with|we'll go with"),
    *_bar("we will go with|i'll go with|i will go with|we go with|we chose|we picked"),
    *_bar("we'll choose|we will use|chosen|switch to|switched to|finalized|finalised"),
    *_bar("the plan is|agreed|we agree|let's agree|promise|promises|promised|promisex"),
    *_bar("i'll make sure|remember to|remember that|please remember|don't forget"),
    *_bar("do not forget|from now on|it's a deal|deal?|deal|count on me|i owe you"),
    *_bar("i prefer|we prefer|prefer to|prefers the|preferred a|my favorite|favorite food"),
    *_bar("my favourites|i'm a big fan of|i'm fan of|i'm allergic|allergic to|i'm vegan"),
    *_bar("i really love hiking|i love it|i like you|i hate mornings|i can't stand rain"),
    *_bar("i enjoy the way|must|must be|must have been|must say|mustard|never ever"),
    *_bar("always use|always be|never push|do not ever|make sure to|make sure you"),
    *_bar("mandatory|is required|not allowed|the rule is|house rule|house rules|as a rule"),
    *_bar("rule of thumb|policy is|my name is|my name's|call me|i live in|i'm from"),
    *_bar("i was born|my birthday|my phone|my number is|i work as|i work at"),
    *_bar("i'm 32 years old|i am 7 years old|my wife is|my son's name is|disagreed"),
    *_bar("undecided|rechosen|决定|定下|敲定|最终方案|确定了|约定|说好|一言为定|偏好"),
    *_bar("不吃了|不吃|不喝了|我喜欢你|我喜欢|我很喜欢|我不太喜欢吃|必须|千万不要"),
    *_bar("以后都|我叫|住在|我今年"),
]
BEFORE = ["", " ", "x", "a", "'", "’", "_", "9", "我", "-", ".", "\t", "é"]
AFTER = ["", " ", "x", "s", "d", "'", "_", "9", "我", "?", ".", " it", " to", " you"]
AFTER += [" the", " a", " be", " hiking", "了", "你"]


def _plain(*markers: Cues) -> re.Pattern[str]:
    """The reference shape: the phrases as one alternation, Latin ones behind one
    word-start look-behind."""
    parts: list[str] = []
    for cues in markers:
        parts += cues.cjk
        parts.append(f"(?<![a-z0-9_'’])(?:{'|'.join(cues.latin)}){cues.latin_end}")
    return re.compile("|".join(parts))


@cache
def _lines() -> list[str]:
    lines = [a + s + b for s in SAMPLES for a in BEFORE for b in AFTER]
    rng = random.Random(5)
    words = [*SAMPLES, "the", "we", "i", "go", "with", "to", "了"]
    lines += [" ".join(rng.choices(words, k=rng.randint(1, 6))) for _ in range(4000)]
    for lang in ("en", "zh"):
        for i in range(2):
            for m in generate(11 + i, lang, i).messages():
                lines += [normalize_text(line).casefold() for line in m.text.split("\n")]
    return lines


@pytest.mark.parametrize("name", sorted(CUES))
def test_each_marker_matches_where_its_plain_pattern_does(name: str) -> None:
    fast, plain = compile_cues(CUES[name]), _plain(CUES[name])
    differ = [s for s in _lines() if (fast.search(s) is None) != (plain.search(s) is None)]
    assert differ == []
    assert sum(plain.search(s) is not None for s in _lines()) > 50  # the check has teeth


def test_markers_together_match_where_any_of_them_does() -> None:
    names = ("decision", "agreement")
    plain = _plain(*(CUES[n] for n in names))
    for line in _lines():
        assert has_cue(line, names) == (plain.search(line) is not None), line


def test_the_feature_patterns_are_the_compiled_cues() -> None:
    assert {n: p.pattern for n, p in heuristic._MARKERS.items()} == {
        n: compile_cues(c).pattern for n, c in CUES.items()
    }


@pytest.mark.parametrize("phrase", ["(?:a|b)c", "[ab]c", "\\bword", ".x", "a?b", "a*b"])
def test_a_phrase_that_does_not_start_with_a_plain_character_is_refused(phrase: str) -> None:
    with pytest.raises(ValueError, match="plain character"):
        compile_cues(Cues(cjk=(), latin=(phrase,)))

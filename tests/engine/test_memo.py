"""engine.memo empties every memo cache of the engine (issue 21: memory given back)."""

from __future__ import annotations

import functools
import importlib
import pkgutil
import sys

import engine
from engine.keywords import match_key
from engine.memo import clear_memo_caches
from engine.relevance.analyzer import stem_word


def _engine_caches() -> list[functools._lru_cache_wrapper[object]]:
    """Every module-level lru_cache of every engine module, found independently."""
    for info in pkgutil.walk_packages(engine.__path__, "engine."):
        importlib.import_module(info.name)
    found: list[functools._lru_cache_wrapper[object]] = []
    for name, module in sorted(sys.modules.items()):
        if module is None or not (name == "engine" or name.startswith("engine.")):
            continue
        for value in vars(module).values():
            if isinstance(value, functools._lru_cache_wrapper) and value.__module__ == name:
                found.append(value)
    return found


def test_every_engine_cache_is_emptied_and_still_answers() -> None:
    caches = _engine_caches()
    assert len(caches) >= 8  # keywords, stems, stopwords, session dir names, time zones, …
    before = (match_key("Deploy Plan", expand_latin_case=True), stem_word("deployments"))
    assert sum(c.cache_info().currsize for c in caches) > 0
    dropped = clear_memo_caches()
    assert dropped > 0
    assert all(c.cache_info().currsize == 0 for c in caches)
    assert (match_key("Deploy Plan", expand_latin_case=True), stem_word("deployments")) == before
    assert clear_memo_caches() >= 1  # what the calls just cached (the stem at least)

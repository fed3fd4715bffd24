"""`engine.concurrent_io.together`: writes issued at once, every one ended before the
caller hears of a failure, the first failure (in argument order) raised."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest

from engine.concurrent_io import together

WAIT_S = 5.0


def test_the_calls_run_at_the_same_time() -> None:
    # each waits for the other: one after the other, the first would wait in vain
    both = threading.Barrier(2, timeout=WAIT_S)
    ran: list[str] = []
    together(lambda: ran.append(f"first {both.wait()}"), lambda: ran.append(f"other {both.wait()}"))
    assert sorted(r.split()[0] for r in ran) == ["first", "other"]


def test_the_first_runs_in_the_callers_thread_the_others_elsewhere() -> None:
    threads: dict[str, int] = {}

    def note(name: str) -> None:
        threads[name] = threading.get_ident()

    together(lambda: note("first"), lambda: note("b"), lambda: note("c"))
    assert threads["first"] == threading.get_ident()
    assert threads["b"] != threading.get_ident() and threads["c"] != threading.get_ident()


def test_a_failing_first_is_raised_after_the_others_ended() -> None:
    ended = threading.Event()

    def slow_other() -> None:
        time.sleep(0.05)
        ended.set()

    def failing() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        together(failing, slow_other)
    assert ended.is_set()


def test_a_failing_other_is_raised_after_the_first_ended() -> None:
    ended = threading.Event()

    def slow_first() -> None:
        time.sleep(0.05)
        ended.set()

    def failing() -> None:
        raise OSError("read-only file system")

    with pytest.raises(OSError, match="read-only"):
        together(slow_first, failing)
    assert ended.is_set()


def test_the_first_failure_in_argument_order_wins() -> None:
    def fails(message: str) -> None:
        raise ValueError(message)

    with pytest.raises(ValueError, match=r"^one$"):
        together(lambda: fails("one"), lambda: fails("two"))
    with pytest.raises(ValueError, match=r"^two$"):
        together(lambda: None, lambda: fails("two"), lambda: fails("three"))


def test_calls_made_together_from_many_threads_all_end() -> None:
    # more callers than the pool has threads: none waits on another's work forever
    done: list[int] = []
    lock = threading.Lock()

    def caller(n: int) -> None:
        def note() -> None:
            with lock:
                done.append(n)

        together(note, note, note)

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert sorted(done) == sorted(n for n in range(12) for _ in range(3))


REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")


def test_the_others_see_the_callers_context() -> None:
    seen: list[str] = []
    token = REQUEST.set("r-42")
    try:
        together(lambda: seen.append(REQUEST.get()), lambda: seen.append(REQUEST.get()))
    finally:
        REQUEST.reset(token)
    assert seen == ["r-42", "r-42"]

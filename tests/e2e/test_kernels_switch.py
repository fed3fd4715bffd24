"""`ROFMD_KERNELS=false` runs the ranked recall on its NumPy path (and every other
compiled module's caller on its Python path), and `status` says which path runs."""

from __future__ import annotations

from engine import json_spans
from engine.relevance import kernels
from engine.store import dir_listing
from tests.e2e.harness import LineSocket, running_daemon


def test_the_switch_turns_the_compiled_loops_off_and_status_says_so() -> None:
    built = kernels.available()
    for value, expected in (("false", "off"), ("true", "on")):
        with running_daemon(env={"ROFMD_KERNELS": value}) as d:
            s = LineSocket(d.socket_path)
            status = s.call(1, "status")["result"]
            assert status["kernels"] == (expected if built else "not built")
            # each module by name: one switch for all of them
            assert status["compiled"] == {
                "recallLoops": status["kernels"],
                "surfaceLookup": json_spans.state(value == "true"),
                "storeListing": dir_listing.state(value == "true"),
            }
            assert status["compiled"]["storeListing"] == (
                expected if dir_listing.state(True) == "on" else "not built"
            )
            s.close()

"""Properties of archive plans over random conversations (hypothesis).

For any conversation: the archived folders plus the kept surface hold every original
message exactly once, in order; the fragments of a message concatenate to its text;
no tool call is separated from its result; no fragment has a lone surrogate.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.archive import PreStepInput, plan_pre_step
from engine.archive.surface import parse_surface
from engine.config import build_config
from tests.archive_fixtures import T0, Surface

ALPHABET = st.sampled_from(
    [*"abc xyz0123.!?;\n中文句子。！？；…」😀𠮷v", "3.14", "v1.2.0", " ", "。\n"]
)
TEXT = st.lists(ALPHABET, min_size=0, max_size=120).map("".join)


@st.composite
def conversations(draw: Any) -> Surface:
    s = Surface()
    s.system()
    for t in range(draw(st.integers(1, 12))):
        s.user(draw(TEXT) * draw(st.integers(1, 8)))
        for c in range(draw(st.integers(0, 3))):
            cid = f"c{t}-{c}"
            s.assistant(draw(TEXT), [(cid, "tool", "{}")])
            if draw(st.booleans()):
                s.pinned(draw(st.sampled_from(["runtime-context", "tool-jobs", "x-new"])), "p")
            s.tool(cid, draw(TEXT) * draw(st.integers(1, 20)))
        s.assistant(draw(TEXT))
    return s


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    s=conversations(),
    percent=st.floats(61, 99),
    target=st.integers(20, 800),
    min_chunk=st.integers(0, 200),
    keep=st.integers(0, 4),
    protect=st.booleans(),
    floor=st.booleans(),
)
def test_every_message_exactly_once(
    s: Surface,
    percent: float,
    target: int,
    min_chunk: int,
    keep: int,
    protect: bool,
    floor: bool,
) -> None:
    config = build_config(
        [
            (
                "t",
                {
                    "compress": {
                        "targetChunkChars": target,
                        "minChunkChars": min_chunk,
                        "keepRecentMessages": keep,
                        "protectCurrentTurn": protect,
                        "releaseFloorEnabled": floor,
                        "minMessagesToCompress": 1,
                        "minContextTokens": 0,
                    }
                },
            )
        ]
    ).config
    window = 100_000
    total_raw = s.total()
    scale = window * percent / 100 / max(1, total_raw)
    measured = {t["seq"]: max(1, int(t["tokens"] * scale)) for t in s.tokens()}
    plan = plan_pre_step(
        PreStepInput(
            session_id="p",
            turn=s.turn,
            surface=s.nodes,
            node_tokens=measured,
            total_tokens=int(window * percent / 100),
            host_window=window,
            now_ms=T0,
            cfg=config,
        )
    )
    nodes = parse_surface(s.nodes)
    conv = [n for n in nodes if n.cls == "conversation"]
    if not plan.archives:
        assert plan.folders == []
        return
    shadowed = set(plan.shadowed_seqs)
    archived_docs = [m for f in plan.folders for m in f.messages]
    # fragments concatenate to the message text; messages appear once, in order
    by_seq: dict[int, str] = {}
    order: list[int] = []
    for doc in archived_docs:
        if doc["seq"] not in by_seq:
            order.append(doc["seq"])
            by_seq[doc["seq"]] = ""
        else:
            assert order[-1] == doc["seq"], "fragments of a message are contiguous"
        by_seq[doc["seq"]] += doc["content"]
        assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in doc["content"])
    kept = [n.seq for n in conv if n.seq not in shadowed]
    assert order + kept == [n.seq for n in conv]
    for n in conv:
        if n.seq in by_seq:
            assert by_seq[n.seq] == n.text()
    # the replaced span is exactly the archived messages plus non-conversation nodes
    assert {n.seq for n in conv} & shadowed == set(order)
    # no tool call separated from its result
    archived = set(order)
    calls = {cid: n.seq for n in conv for cid in n.tool_call_ids}
    for n in conv:
        if n.tool_result_id in calls:
            assert (n.seq in archived) == (calls[n.tool_result_id] in archived)
    # protected current turn
    if protect:
        cur_user = max(n.seq for n in conv if n.is_user)
        assert cur_user not in archived

"""memory_recall through a real daemon (issue 11): archive + judge, then search by keywords,
pages, a read-only pagination, strikes, warnings, and the schema `initialize` lists."""

from __future__ import annotations

import re
from collections.abc import Iterator

import orjson
import pytest

from engine import texts
from engine.recall.state import peek_state_file
from engine.recall.state_log import log_path
from tests.e2e.client import GATEWAY, Client, gateway_conversation, session_dir
from tests.e2e.harness import DaemonProcess, running_daemon

_ENTRY = re.compile(r"^### 回忆 \d+ · ", re.M)


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    with running_daemon() as d:
        yield d


def archive_and_judge(d: DaemonProcess, c: Client, sid: str) -> tuple[str, list[str]]:
    """Archive a conversation through pre-step + commit and judge every folder: the one
    about the gateway gets its keywords, the others (turns about a config file) share
    "配置文件" with distinct α. Returns (gateway folder, config folders by α desc)."""
    comp = c.archive(gateway_conversation(30), sid)
    assert len(comp["folders"]) >= 4
    gateway = ""
    others: list[str] = []
    updates = []
    for i, fid in enumerate(comp["folders"]):
        meta = orjson.loads((session_dir(d, sid) / fid / "meta.json").read_bytes())
        if meta["title"].startswith("星港项目"):
            gateway = fid
            update = {"keywords": ["星港项目", "接口网关", "端口 8080"], "alpha": 0.9, "beta": 8}
        else:
            others.append(fid)
            alpha = round(0.8 - 0.05 * i, 2)
            update = {"keywords": ["配置文件", f"问题{i}", "读取文件"], "alpha": alpha, "beta": 1}
        updates.append({"id": fid, **update, "reason": "测试"})
    judged = c.tool(sid, "memory_judge", {"updates": updates})
    assert judged["isError"] is False, judged
    assert gateway
    return gateway, others


def entries(text: str) -> list[str]:
    """The `### 回忆 N · …` entries of a text, without their numbers."""
    starts = [m.start() for m in _ENTRY.finditer(text)]
    out = []
    for a, b in zip(starts, [*starts[1:], len(text)], strict=True):
        body = text[a:b].strip()
        out.append(_ENTRY.sub("### 回忆 · ", body, count=1).split("\n\n")[0])
    return out


def test_initialize_lists_memory_recall(client: Client) -> None:
    [tool] = [t for t in client.init["tools"] if t["name"] == "memory_recall"]
    assert tool["description"] == texts.RECALL_TOOL_DESCRIPTION
    props = tool["parameters"]["properties"]
    assert props["keywords"]["description"] == texts.RECALL_PARAM_KEYWORDS
    assert props["limit"]["description"] == texts.RECALL_PARAM_LIMIT
    assert props["offset"]["description"] == texts.RECALL_PARAM_OFFSET
    assert (props["limit"]["minimum"], props["limit"]["maximum"]) == (1, 20)
    assert set(props) >= {"timeFrom", "timeTo", "granularity", "event", "events"}
    assert set(props) >= {"locations", "persons", "timeText", "assistantSaid"}
    names = [t["name"] for t in client.init["tools"]]
    assert names.index("memory_judge") < names.index("memory_recall")


def test_recall_finds_a_judged_memory_in_the_block_form(
    daemon: DaemonProcess, client: Client
) -> None:
    sid = "recall-tool-archive"
    gateway, _ = archive_and_judge(daemon, client, sid)
    res = client.recall(sid, keywords="接口网关，星港项目")
    assert res["isError"] is False
    value, text = res["value"], res["content"][0]["text"]
    assert value["ids"][0] == gateway and value["missType"] is None
    assert value["keywords"] == ["接口网关", "星港项目"]
    assert text.startswith(texts.RECALL_TOOL_HEADING + "\n")
    heading = text[text.index("### 回忆 1 · ") :].splitlines()[0]
    assert re.fullmatch(
        r"### 回忆 1 · 归档于 \d{4}-\d\d-\d\d 周. \d\d:\d\d（事件时间 [^）]+） · α=0\.90 · β=\+8\.0"
        r" · 第1代 · 关键词：星港项目、接口网关、端口 8080",
        heading,
    ), heading
    assert "user: " + GATEWAY[0] in text
    assert texts.RECALL_TOOL_TRUST_NOTE in text
    # the same memory in the automatic recall block: the same entry, heading and body
    block = client.ask(sid, "星港项目的接口网关端口是多少？")
    assert gateway in block["recalled"]
    recall_text = block["sections"][0]["text"]
    tool_entry = entries(text)[0]
    assert tool_entry in entries(recall_text)
    # now it is in the block: an unpaginated search leaves it out and says so
    again = client.recall(sid, keywords="接口网关")
    assert again["value"]["found"] == 0 and again["value"]["missType"] == "excluded"
    assert again["content"][0]["text"].splitlines()[2] == texts.RECALL_TOOL_MISS_IN_BLOCK.format(
        n=1
    )
    assert again["value"]["strikes"] == 0  # the keywords were right: no strike


def test_pages_are_disjoint_and_complete(daemon: DaemonProcess, client: Client) -> None:
    sid = "recall-tool-pages"
    _, others = archive_and_judge(daemon, client, sid)
    first = client.recall(sid, keywords="配置文件", limit=1, offset=0)["value"]
    second = client.recall(sid, keywords="配置文件", limit=1, offset=1)["value"]
    both = client.recall(sid, keywords="配置文件", limit=2, offset=0)["value"]
    assert len(first["ids"]) == len(second["ids"]) == 1
    assert first["ids"] != second["ids"]
    assert first["ids"] + second["ids"] == both["ids"]
    assert first["page"] == {"offset": 0, "limit": 1, "hasMore": True, "nextOffset": 1}
    # every page of limit 3 together: each folder about the config file exactly once (the
    # gateway folder's text mentions it too), hasMore exact
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = client.recall(sid, keywords="配置文件", limit=3, offset=offset)["value"]
        seen += page["ids"]
        assert page["page"]["hasMore"] == (page["page"]["nextOffset"] is not None)
        offset = page["page"]["nextOffset"]
    assert set(others) <= set(seen) and len(seen) == len(set(seen))
    # the full-page hint comes before the first entry; the pagination line after them
    text = client.recall(sid, keywords="配置文件", limit=2, offset=0)["content"][0]["text"]
    hint = texts.RECALL_TOOL_FULL_PAGE.format(limit=2, found=2)
    assert text.index(hint) < text.index("### 回忆 1 · ")
    assert text.index("### 回忆 2 · ") < text.index(texts.RECALL_TOOL_MORE.format(next=2))
    # past the end: no entries, not a strike
    end = client.recall(sid, keywords="配置文件", limit=3, offset=len(seen))["value"]
    assert end["found"] == 0 and end["missType"] == "offset" and end["strikes"] == 0
    stats = session_dir(daemon, sid) / "stats.jsonl"
    tool_records = [
        r
        for r in map(orjson.loads, stats.read_bytes().splitlines())
        if r.get("type") == "recall" and r.get("trigger") == "tool"
    ]
    assert tool_records and {"offset", "limit", "hasMore", "missType"} <= set(tool_records[0])
    assert tool_records[0]["offset"] == 0 and tool_records[0]["limit"] == 1
    assert tool_records[0]["hasMore"] is True


def test_warnings_for_unsupported_filters_and_too_many_keywords(client: Client) -> None:
    sid = "recall-tool-warnings"
    res = client.recall(sid, keywords="网关", persons=[1])
    warning = texts.RECALL_TOOL_WARN_LABELS.format(field="persons", given="[1]")
    assert warning in res["value"]["warnings"] and warning in res["content"][0]["text"]
    assert res["value"]["ignored"] == []
    only = client.recall(sid, event="日本旅行")  # an event no memory carries (issue 12)
    assert only["isError"] is False and only["value"]["found"] == 0
    assert only["value"]["missType"] == "event"
    assert only["value"]["strikes"] == res["value"]["strikes"]  # not a strike
    words = " ".join(f"词{i}" for i in range(20))
    many = client.recall(sid, keywords=words)["value"]
    assert many["keywords"] == [f"词{i}" for i in range(16)]
    unused = "、".join(f"词{i}" for i in range(16, 20))
    cap = texts.RECALL_TOOL_WARN_KEYWORDS_CAP.format(n=20, dropped=unused)
    assert cap in many["warnings"]
    nothing = client.recall(sid)
    assert nothing["isError"] is True
    assert nothing["content"][0]["text"] == texts.RECALL_TOOL_NEED_KEYWORDS


def test_strikes_warn_at_three_disable_at_six_and_a_user_message_restores(
    client: Client,
) -> None:
    sid = "recall-tool-strikes"
    warn = texts.RECALL_TOOL_STRIKE_WARN + texts.RECALL_TOOL_ASK_TIME_EVENT
    for n in range(1, 6):
        res = client.recall(sid, keywords=f"不存在的词{n}")
        text = res["content"][0]["text"]
        assert res["isError"] is False and res["value"]["missType"] == "keyword"
        assert res["value"]["strikes"] == n
        assert (warn in text) == (n >= 3), (n, text)
        if n == 2:  # a call with filters only is no keyword miss
            assert client.recall(sid, locations=["北京"])["value"]["strikes"] == 2
    sixth = client.recall(sid, keywords="不存在的词6")
    assert sixth["isError"] is True and sixth["value"]["disabled"] is True
    disabled = texts.RECALL_TOOL_STRIKE_DISABLED + texts.RECALL_TOOL_ASK_TIME_EVENT
    assert disabled in sixth["content"][0]["text"]
    seventh = client.recall(sid, keywords="随便")
    assert seventh["isError"] is True
    assert seventh["content"][0]["text"].startswith(texts.RECALL_TOOL_REFUSED.format(n=6))
    # a host message is no user message: still refused
    client.ask(sid, "runtime note", kind="runtime-context")
    assert client.recall(sid, keywords="随便")["isError"] is True
    # the next real user message opens a new turn: the tool is back, counting from 1
    client.ask(sid, "我们继续")
    back = client.recall(sid, keywords="还是不存在")
    assert back["isError"] is False and back["value"]["strikes"] == 1


def test_pagination_writes_no_recall_state_in_fair_mode() -> None:
    """fair keeps lane state: a paginated call must leave recall-state.json byte-identical
    (while an unpaginated one records what it showed in the ledger)."""
    sid = "recall-tool-fair"
    with running_daemon(config={"recall": {"mode": "fair"}}) as d:
        c = Client(d)
        gateway, others = archive_and_judge(d, c, sid)
        assert gateway in c.ask(sid, "星港项目的接口网关端口是多少？")["recalled"]
        path = session_dir(d, sid) / "recall-state.json"

        def files() -> tuple[bytes, bytes | None]:  # the snapshot and its log
            log = log_path(path)
            return path.read_bytes(), log.read_bytes() if log.exists() else None

        before = files()
        pages = [c.recall(sid, keywords="配置文件", limit=1, offset=k)["value"] for k in (0, 1)]
        both = c.recall(sid, keywords="配置文件", limit=2, offset=0)["value"]
        assert pages[0]["ids"] + pages[1]["ids"] == both["ids"]
        assert pages[0]["ids"] != pages[1]["ids"]
        assert files() == before
        # the block is excluded from pages, the ledger is not
        assert c.recall(sid, keywords="接口网关", offset=0)["value"]["found"] == 0
        shown = c.recall(sid, keywords="配置文件", limit=2)["value"]["ids"]
        assert shown and set(shown) <= set(others)
        assert set(shown) <= set(peek_state_file(path).ledger)
        # unpaginated again: what was shown is not shown twice (G4), pages still see it
        again = c.recall(sid, keywords="配置文件", limit=2)["value"]["ids"]
        assert not set(again) & set(shown)
        assert set(shown) <= set(
            c.recall(sid, keywords="配置文件", limit=20, offset=0)["value"]["ids"]
        )
        c.close()

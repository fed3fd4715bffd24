"""`secrets.mode` on the archive path (issue 19): the plan's folders, titles, 你说过
phrases, content hash and telemetry see only the redacted text; images stay images."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from engine import texts
from engine.archive import PreStepInput, PreStepPlan, plan_pre_step
from engine.archive.commit import folder_meta
from engine.archive.surface import parse_surface
from engine.config import build_config
from engine.config.model import MemoryConfig
from tests.archive_fixtures import T0, Surface
from tests.secrets_corpus import PLANTED, SECRET_VALUES

GITHUB = next(p for p in PLANTED if p.kind == "github-token").value
DSN = next(p for p in PLANTED if "postgres://" in p.text)
FILE_NAME = "a8F3kL9qZ2xW7mN4pR6tQ.pdf"


def config(mode: str) -> MemoryConfig:
    return build_config([("test", {"secrets": {"mode": mode}})]).config


def surface() -> Surface:
    s = Surface()
    s.system()
    # a title made of a secret: the first user message of its folder
    s.user(f"token {GITHUB} 先存着")
    s.assistant(f"好的。连接串我也记下：{DSN.text}")
    att = {"attachmentId": "att-Q7xK2pLm9QwZ3vB8nR4tY6uW", "name": "Q7xK2pLm9QwZ3vB8nR4tY6uW.png"}
    node = s.user("看这张截图", images=[att])
    node["message"]["content"].append({"type": "file", "attachment": {"name": FILE_NAME}})
    s.assistant("截图收到。")
    for i in range(30):
        s.turn_pair(i, 200)
    return s


def plan(mode: str) -> PreStepPlan:
    s = surface()
    out = plan_pre_step(
        PreStepInput(
            session_id="s1",
            turn=s.turn,
            surface=s.nodes,
            node_tokens={t["seq"]: t["tokens"] for t in s.tokens()},
            total_tokens=70_000,
            host_window=100_000,
            now_ms=T0 + 10**7,
            cfg=config(mode),
        )
    )
    assert out.archives
    return out


def dump(p: PreStepPlan) -> str:
    return orjson.dumps([(f.title, f.messages) for f in p.folders]).decode()


def test_redact_mode_keeps_no_value_and_a_typed_placeholder() -> None:
    p = plan("redact")
    text = dump(p)
    assert GITHUB not in text and DSN.value not in text
    assert p.folders[0].title == "token [secret:github-tok"  # 24 code points
    assert "postgres://app_user:[secret:password]@db.example.com" in text
    assert p.secrets == {"github-token": 1, "password": 1}
    # an image is not text: its placeholder stays, and its folder finds it by it
    img = texts.ARCHIVE_IMAGE_PLACEHOLDER.format(name=p.folders[0].images[0].name)
    assert img in text
    # a file attachment's placeholder is a name, not something said: kept
    assert texts.ARCHIVE_FILE_PLACEHOLDER.format(name=FILE_NAME) in text
    # 你说过 phrases come from the redacted messages
    meta = folder_meta(
        "mem-20260101T000000Z-0001", p.folders[0], turn=1, now_ms=T0, archiver_version="t"
    )
    assert DSN.value not in orjson.dumps(meta.model_dump()).decode()


def test_drop_mode_removes_the_value_and_notes_it() -> None:
    text = dump(plan("drop"))
    assert GITHUB not in text and DSN.value not in text and "[secret:" not in text
    assert texts.SECRET_DROPPED_NOTE.format(n=1) in text
    assert "先存着" in text


def test_off_mode_archives_verbatim() -> None:
    p = plan("off")
    assert GITHUB in dump(p) and not p.secrets


def test_redaction_is_deterministic_across_plans() -> None:
    a, b = plan("redact"), plan("redact")
    assert dump(a) == dump(b)
    assert [f.idempotency_key for f in a.folders] == [f.idempotency_key for f in b.folders]


@pytest.mark.parametrize("mode", ["redact", "drop"])
def test_every_planted_kind_through_the_planner(mode: str) -> None:
    s = Surface()
    s.system()
    for i, planted in enumerate(PLANTED):
        s.user(planted.text)
        s.assistant(f"第{i}条。")
    for i in range(40):
        s.turn_pair(i, 200)
    nodes: list[dict[str, Any]] = s.nodes
    p = plan_pre_step(
        PreStepInput(
            session_id="s2",
            turn=s.turn,
            surface=nodes,
            node_tokens={t["seq"]: t["tokens"] for t in s.tokens()},
            total_tokens=70_000,
            host_window=100_000,
            now_ms=T0,
            cfg=config(mode),
        )
    )
    text = dump(p)
    archived = {m["seq"] for f in p.folders for m in f.messages}
    assert {n.seq for n in parse_surface(nodes)[1 : 2 * len(PLANTED)]} <= archived
    assert not [v for v in SECRET_VALUES if v in text or orjson.dumps(v).decode()[1:-1] in text]

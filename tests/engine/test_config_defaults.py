"""Engine defaults, the packaged config.json and the typed model agree key for key."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import BaseModel

from engine.config import (
    BEYOND_REFERENCE,
    ENGINE_DEFAULTS,
    PRODUCT_OVERRIDES,
    MemoryConfig,
    build_config,
    packaged_config_path,
)
from engine.config.defaults import engine_defaults, product_defaults
from engine.config.validate import SCHEMA, Rule

REPO_ROOT = Path(__file__).resolve().parents[2]

# Values whose keys are open objects: their entries are data, not config keys.
OPEN_OBJECTS = {"importance.weights", "recall.categoryMatch.classes"}


def leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) for every leaf; open objects count as one leaf."""
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and path not in OPEN_OBJECTS:
            yield from leaves(value, path + ".")
        else:
            yield path, value


def diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Every place two JSON trees differ: missing / extra keys, type or value changes."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in a.keys() | b.keys():
            where = f"{path}.{key}" if path else key
            if key not in b:
                out.append(f"{where}: missing")
            elif key not in a:
                out.append(f"{where}: extra")
            else:
                out.extend(diff(a[key], b[key], where))
        return out
    if type(a) is not type(b) or a != b:
        return [path]
    return []


def test_packaged_config_differs_from_engine_defaults_in_exactly_six_places() -> None:
    """Six documented reference differences, plus the product's own (rollback switches)."""
    packaged = orjson.loads((REPO_ROOT / "config.json").read_bytes())
    overrides = {**PRODUCT_OVERRIDES, **BEYOND_REFERENCE}
    assert sorted(diff(ENGINE_DEFAULTS, packaged)) == sorted(overrides)
    for dotted, value in overrides.items():
        node: Any = packaged
        for part in dotted.split("."):
            node = node[part]
        assert node == value
    assert len(PRODUCT_OVERRIDES) == 6
    assert BEYOND_REFERENCE == {"recall.mode": "ranked"}
    assert ENGINE_DEFAULTS["recall"]["mode"] == "fair"


def test_the_six_differences_are_the_documented_ones() -> None:
    assert {k: v for k, v in PRODUCT_OVERRIDES.items()} == {
        "time.mode": "constrain",
        "event.mode": "constrain",
        "location.mode": "constrain",
        "person.mode": "constrain",
        "timeTag.mode": "constrain",
        "time.timezone": "Asia/Shanghai",
    }
    for section in ("time", "event", "location", "person", "timeTag"):
        assert ENGINE_DEFAULTS[section]["mode"] == "index"
    assert ENGINE_DEFAULTS["time"]["timezone"] == ""


def test_packaged_file_is_pretty_json_of_the_product_defaults() -> None:
    text = (REPO_ROOT / "config.json").read_bytes()
    assert text == orjson.dumps(product_defaults(), option=orjson.OPT_INDENT_2) + b"\n"
    packaged = orjson.loads(text)
    assert packaged["compat"]["ownerIds"] == []
    assert packaged["compat"]["mediaRoots"] == []


def test_packaged_config_path_finds_the_repo_root_file() -> None:
    assert packaged_config_path() == REPO_ROOT / "config.json"


def test_packaged_config_validates_without_warnings() -> None:
    packaged = orjson.loads((REPO_ROOT / "config.json").read_bytes())
    build = build_config([("packaged", packaged)])
    assert build.warnings == ()
    assert build.unknown == ()
    assert build.config.to_json() == packaged


def test_every_packaged_key_is_a_model_field_with_a_rule() -> None:
    # The model is the one source of the tree; the packaged file is written by hand-run
    # tooling, so a key there that the model does not name would be silently ignored.
    packaged = orjson.loads((REPO_ROOT / "config.json").read_bytes())
    packaged_paths = sorted(path for path, _ in leaves(packaged))
    assert packaged_paths == sorted(model_paths(MemoryConfig))
    for path in packaged_paths:
        node: Any = SCHEMA
        for part in path.split("."):
            node = node[part]
        assert isinstance(node, Rule), path


# Numbers the reference leaves unbounded on purpose; every other number has a range.
UNBOUNDED_NUMBERS = {"recall.mu"}


def test_every_number_has_its_bound() -> None:
    numbers: dict[str, Rule] = {}
    for path, _ in leaves(ENGINE_DEFAULTS):
        node: Any = SCHEMA
        for part in path.split("."):
            node = node[part]
        if isinstance(node, Rule) and node.kind in ("int", "float"):
            numbers[path] = node
    assert len(numbers) > 90  # the walker found the numeric fields
    unbounded = {
        path
        for path, rule in numbers.items()
        if (rule.kind == "int" and rule.lo is not None and rule.lo < 0)
        or (rule.kind == "float" and rule.lo is None and rule.hi is None)
    }
    assert unbounded == UNBOUNDED_NUMBERS
    assert numbers["compress.triggerPercent"] == Rule("float", 1, 100)
    assert numbers["recall.sigma"] == Rule("float", 0, lo_open=True)
    assert numbers["keywords.max"] == Rule("int", 3, 16)
    assert numbers["compat.crossChat.maxSnippetChars"] == Rule("int", 80, 2000)
    assert numbers["timeTag.weekStart"] == Rule("int", 1, 7)


def test_every_default_is_accepted_by_its_own_rule() -> None:
    for path, value in leaves(ENGINE_DEFAULTS):
        node: Any = SCHEMA
        for part in path.split("."):
            node = node[part]
        assert isinstance(node, Rule)
        messages: list[str] = []
        assert node.apply(value, value, path, messages.append) == value, path
        assert messages == [], (path, messages)


def model_paths(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    for name, field in model.model_fields.items():
        alias = field.alias or name
        path = f"{prefix}{alias}"
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from model_paths(annotation, path + ".")
        else:
            yield path


def test_model_fields_mirror_the_defaults_tree() -> None:
    assert sorted(model_paths(MemoryConfig)) == sorted(path for path, _ in leaves(ENGINE_DEFAULTS))


def test_model_of_defaults_dumps_back_to_the_defaults() -> None:
    cfg = MemoryConfig.defaults()
    assert cfg.to_json() == ENGINE_DEFAULTS
    assert cfg.to_json(include_unknown=False) == ENGINE_DEFAULTS
    # The dump is plain JSON (lists, not tuples), so it can be written back verbatim.
    assert orjson.loads(orjson.dumps(cfg.to_json())) == ENGINE_DEFAULTS


def test_key_count() -> None:
    # 1 top-level switch + every leaf of every section; a guard against silent loss.
    # 161 of the reference + the 4 keys of recall.ranked and secrets.mode (ours).
    assert len(list(leaves(ENGINE_DEFAULTS))) == 166


def test_engine_defaults_returns_an_independent_copy() -> None:
    copy = engine_defaults()
    copy["recall"]["fairness"]["rareTerm"]["ratio"] = 0.5
    assert ENGINE_DEFAULTS["recall"]["fairness"]["rareTerm"]["ratio"] == 0.002


# Every default the reference's tables state, read from the reference (§3, §3.2.9).
REFERENCE_DEFAULTS: dict[str, Any] = {
    "enabled": True,
    "compress.enabled": True,
    "compress.triggerPercent": 60,
    "compress.compressPercent": 20,
    "compress.releaseTargetPercent": 50,
    "compress.releaseFloorEnabled": True,
    "compress.contextWindowTokens": 0,
    "compress.minContextTokens": 512,
    "compress.minMessagesToCompress": 4,
    "compress.minChunkChars": 200,
    "compress.targetChunkChars": 1200,
    "compress.maxFoldersPerRun": 500,
    "compress.maxFoldersPerStep": 500,
    "compress.keepRecentMessages": 2,
    "compress.maxBoundaryOvershoot": 1.25,
    "compress.protectCurrentTurn": True,
    "compress.allowSmallWindow": False,
    "compress.smallWindowTokens": 20000,
    "compress.hardLimitStop": True,
    "compress.applyToSubagents": False,
    "compress.applyToMainSessions": True,
    "compress.preStepEnabled": True,
    "compress.emergencyPercent": 85,
    "compress.emergencyCompressPercent": 40,
    "compress.maxExtraPasses": 2,
    "compress.hardLimitPercent": 95,
    "importance.min": 0.01,
    "importance.max": 1,
    "importance.warnAbove": 0.8,
    "keywords.min": 3,
    "keywords.max": 16,
    "keywords.extraStopwords": [],
    "keywords.matchMode": "contains",
    "match.expandLatinCase": False,
    "match.cjkBigram": False,
    "recall.enabled": True,
    "recall.mode": "fair",
    "recall.firstGenMax": 10,
    "recall.hops": 0,
    "recall.maxRecalledBlocks": 64,
    "recall.maxRecalledChars": 120000,
    "recall.maxWindowPercent": 10,
    "recall.minAlpha": 0,
    "recall.persistInjected": True,
    "recall.categoryMatch.enabled": True,
    "recall.categoryMatch.alphaMin": 0.6,
    "recall.sort": "createdAt",
    "recall.fairness.thetaHigh": 0.6,
    "recall.fairness.exploreRatio": 0.2,
    "recall.fairness.specificProbeSlots": 1,
    "recall.fairness.rareTerm.ratio": 0.002,
    "recall.fairness.rareTerm.minPosting": 8,
    "recall.fairness.rareTerm.scanCap": 512,
    "recall.fairness.register.lookahead": 3,
    "recall.fairness.register.capFactor": 8,
    "recall.fairness.register.ttlRounds": 2,
    "recall.fairness.queryBoost": True,
    "recall.fairness.recycle.enabled": True,
    "recall.fairness.recycle.cooldownRounds": 15,
    "recall.fairness.recycle.maxPerRound": 1,
    "recall.fairness.ledger.maxEntries": 10000,
    "recall.fairness.ledger.overflow": "evict-lowest-alpha-last-seen",
    "recall.fairness.blockTrim.policy": "priority",
    "recall.fairness.blockTrim.protectCurrentQuery": True,
    "recall.fairness.blockTrim.pinHigh": True,
    "recall.fairness.roundBudget.maxChars": 20000,
    "recall.mu": 5,
    "recall.sigma": 3,
    "recall.maxGeneration": 0,
    "recall.probabilityScale": 1,
    "recall.seed": 0,
    "recall.triggerSourceKinds": ["user"],
    "recall.applyToSubagents": False,
    "recall.applyToMainSessions": True,
    "recall.espEmptyHint": True,
    "recall.adaptiveQuota.enabled": True,
    "recall.adaptiveQuota.complexQuota": 20,
    "recall.adaptiveQuota.complexMinClauses": 2,
    "recall.adaptiveQuota.complexMinChars": 160,
    "recall.adaptiveQuota.complexMinKeywords": 8,
    "recall.clauseSplit.enabled": True,
    "recall.clauseSplit.maxClauses": 8,
    "recall.clauseSplit.minClauseChars": 2,
    "recall.tagMentions.enabled": True,
    "recall.tagMentions.maxTagsPerKind": 4,
    "recall.assistantSaid.enabled": True,
    "recall.assistantSaid.reserveSlots": 2,
    "recall.showTags": True,
    "recall.highRelevance.enabled": True,
    "recall.highRelevance.minMatches": 2,
    "recall.highRelevance.reserveSlots": 2,
    "time.minRangeDays": 3,
    "time.maxRangeDays": 366,
    "time.centerDayPriority": True,
    "time.fallback": ["day3", "month", "year", "all"],
    "time.fallbackMinResults": 1,
    "time.windowScanMax": 4096,
    "time.askUserHint": True,
    "time.judgeEventTime": False,
    "event.maxLabelLength": 60,
    "event.similarity.metric": "dice",
    "event.similarity.threshold": 0.72,
    "event.similarity.maxCandidates": 5,
    "event.askUserHint": True,
    "event.maxPerFolder": 4,
    "event.mergeRequiresApproval": True,
    "event.showExisting": True,
    "event.showExistingLimit": 24,
    "location.maxLabelLength": 60,
    "location.maxPerFolder": 8,
    "location.autoMention": True,
    "person.maxLabelLength": 60,
    "person.maxPerFolder": 8,
    "person.autoMention": True,
    "timeTag.maxPerFolder": 8,
    "timeTag.weekStart": 1,
    "timeTag.maxSpanDays": 366,
    "rules.enabled": True,
    "scoring.includeLegacy": False,
    "scoring.maxPending": 200,
    "scoring.fallback": "onPressure",
    "scoring.autoHeuristicAfterRounds.plain": 4,
    "scoring.autoHeuristicAfterRounds.channel": 2,
    "scoring.taskBudgetPercent": 15,
    "scoring.taskMaxTokens": 12000,
    "scoring.order": "newest",
    "scoring.warnUniformAlpha": True,
    "scoring.maxItemsPerJudge": 100,
    "scoring.categoryKeyword.enabled": True,
    "scoring.categoryKeyword.alphaMin": 0.6,
    "scoring.categoryKeyword.words": [
        "喜好", "偏好", "习惯", "约定", "承诺", "决定", "规则", "要求", "禁忌",
    ],
    "scoring.judgeTelemetry": True,
    "storage.dir": "memory",
    "storage.perSession": True,
    "storage.maxFolders": 10000,
    "logging.enabled": True,
    "logging.verbose": False,
    "test.dryRun": False,
    "compat.qqBots": "auto",
    "compat.ownerIds": [],
    "compat.memberMinAlpha": 0.5,
    "compat.autoPatchDerpyu": True,
    "compat.channelScore": "model",
    "compat.mediaRoots": [],
    "compat.maxImageBytes": 8388608,
    "compat.stagingTtlMs": 86400000,
    "compat.crossChat.enabled": True,
    "compat.crossChat.ownerOnly": True,
    "compat.crossChat.maxResults": 20,
    "compat.crossChat.maxSnippetChars": 400,
    "compat.crossChat.maxGroups": 50,
    "compat.crossChat.maxFoldersPerGroup": 5000,
}  # fmt: skip


@pytest.mark.parametrize(("path", "expected"), sorted(REFERENCE_DEFAULTS.items()))
def test_reference_default(path: str, expected: Any) -> None:
    node: Any = ENGINE_DEFAULTS
    for part in path.split("."):
        node = node[part]
    assert node == expected
    assert type(node) is type(expected)


def test_reference_table_covers_every_key() -> None:
    # Keys not in the table above are checked by their own tests: the mode switches and
    # timezone (six differences), computeDates (ambiguity, below) and the open objects.
    not_in_table = {
        *PRODUCT_OVERRIDES,
        "recall.computeDates",
        "importance.weights",
        "recall.categoryMatch.classes",
        # ours, beyond the reference (recall.mode = "ranked")
        "recall.ranked.minRelativeScore",
        "recall.ranked.alphaPrior",
        "recall.ranked.passageWeight",
        "recall.ranked.keepRounds",
        # ours, beyond the reference (README "Secrets")
        "secrets.mode",
    }
    assert set(REFERENCE_DEFAULTS) | not_in_table == {path for path, _ in leaves(ENGINE_DEFAULTS)}


def test_compute_dates_is_the_shipped_value_on_both_sides() -> None:
    # The reference says engine false / packaged true but also "exactly six differences";
    # we keep the six and ship the feature (true) on both sides.
    packaged = orjson.loads((REPO_ROOT / "config.json").read_bytes())
    assert ENGINE_DEFAULTS["recall"]["computeDates"] is True
    assert packaged["recall"]["computeDates"] is True


def test_weights_are_the_heuristic_scorers_features() -> None:
    heuristic = pytest.importorskip("engine.heuristic")
    assert ENGINE_DEFAULTS["importance"]["weights"] == heuristic.DEFAULT_WEIGHTS


def test_category_classes_are_the_six_builtin_ones() -> None:
    classes = ENGINE_DEFAULTS["recall"]["categoryMatch"]["classes"]
    assert list(classes) == ["preference", "agreement", "decision", "rule", "requirement", "taboo"]
    labels = [c["label"] for c in classes.values()]
    assert labels == ["喜好", "约定", "决定", "规则", "要求", "禁忌"]
    assert classes["preference"]["words"][:5] == ["喜好", "偏好", "喜欢", "爱好", "口味"]
    assert classes["agreement"]["words"][:4] == ["约定", "说好", "承诺", "以后都"]
    for entry in classes.values():
        assert 0 < len(entry["words"]) <= 64
        assert len(set(entry["words"])) == len(entry["words"])


def test_typed_attributes() -> None:
    cfg = MemoryConfig.defaults()
    assert cfg.enabled is True
    assert cfg.compress.trigger_percent == 60
    assert cfg.recall.mode == "fair"
    assert cfg.storage.per_session is True
    assert cfg.storage.max_folders == 10000
    assert cfg.storage.dir == "memory"
    assert cfg.recall.fairness.register_.cap_factor == 8
    assert cfg.recall.category_match.classes["taboo"].label == "禁忌"
    assert cfg.time_tag.week_start == 1
    assert cfg.compat.cross_chat.max_folders_per_group == 5000
    assert cfg.time.fallback == ("day3", "month", "year", "all")
    assert cfg.compress.release_floor_active is True
    assert cfg.time.effective_fallback_min_results == 1


def test_model_is_frozen() -> None:
    cfg = MemoryConfig.defaults()
    with pytest.raises(ValueError, match="frozen"):
        cfg.recall.mode = "legacy"  # type: ignore[misc]

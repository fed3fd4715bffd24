"""Per-key validation: wrong types fall back, out-of-range numbers clamp, never a crash."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import ENGINE_DEFAULTS, MemoryConfig, build_config, fingerprint
from tests.engine.test_config_defaults import leaves


def build(tree: dict[str, Any], source: str = "user") -> tuple[dict[str, Any], list[str]]:
    """Validate one layer over the engine defaults; the camelCase result and warnings."""
    result = build_config([(source, tree)])
    return result.config.to_json(), list(result.warnings)


def nest(dotted: str, value: Any) -> dict[str, Any]:
    tree: Any = value
    for part in reversed(dotted.split(".")):
        tree = {part: tree}
    result: dict[str, Any] = tree
    return result


def get(tree: dict[str, Any], dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        node = node[part]
    return node


# --- clamping -------------------------------------------------------------------------

CLAMPS = [
    # (key, value given, value after clamping)
    ("compress.triggerPercent", 150, 100),
    ("compress.triggerPercent", 0, 1),
    ("compress.releaseTargetPercent", -5, 0),
    ("compress.emergencyPercent", 101.5, 100),
    ("compress.maxBoundaryOvershoot", 0.5, 1),
    ("compress.keepRecentMessages", -3, 0),
    ("compress.maxFoldersPerRun", 0, 1),
    ("compress.minChunkChars", 1e30, 2**53 - 1),
    ("importance.min", 0, 0.01),
    ("importance.max", 2, 1),
    ("importance.warnAbove", 1.5, 1),
    ("keywords.min", 1, 3),
    ("keywords.max", 30, 16),
    ("recall.firstGenMax", -1, 0),
    ("recall.minAlpha", 1.2, 1),
    ("recall.maxWindowPercent", 250, 100),
    ("recall.fairness.thetaHigh", -0.1, 0),
    ("recall.fairness.rareTerm.ratio", 3, 1),
    ("recall.fairness.rareTerm.minPosting", 0, 1),
    ("recall.adaptiveQuota.complexQuota", 50, 20),
    ("recall.adaptiveQuota.complexQuota", 0, 1),
    ("recall.tagMentions.maxTagsPerKind", 33, 32),
    ("recall.tagMentions.maxTagsPerKind", 0, 1),
    ("recall.probabilityScale", -1, 0),
    ("event.similarity.threshold", 1.5, 1),
    ("event.similarity.maxCandidates", 11, 10),
    ("event.similarity.maxCandidates", 0, 1),
    ("timeTag.weekStart", 8, 7),
    ("timeTag.weekStart", 0, 1),
    ("scoring.taskBudgetPercent", 120, 100),
    ("compat.memberMinAlpha", -1, 0),
    ("compat.crossChat.maxResults", 0, 1),
    ("compat.crossChat.maxResults", 100, 20),
    ("compat.crossChat.maxSnippetChars", 10, 80),
    ("compat.crossChat.maxSnippetChars", 5000, 2000),
    ("compat.crossChat.maxGroups", 0, 1),
    ("compat.crossChat.maxGroups", 501, 500),
    ("compat.crossChat.maxFoldersPerGroup", 0, 1),
    ("compat.crossChat.maxFoldersPerGroup", 10**6, 100000),
]


@pytest.mark.parametrize(("key", "given_value", "expected"), CLAMPS)
def test_out_of_range_values_are_clamped_with_a_warning(
    key: str, given_value: float, expected: float
) -> None:
    cfg, warnings = build(nest(key, given_value))
    assert get(cfg, key) == expected
    assert any(w.startswith(f"user: {key}: ") and "clamped" in w for w in warnings), warnings


def test_in_range_values_pass_silently() -> None:
    tree = {
        "compress": {"triggerPercent": 75, "compressPercent": 30, "maxBoundaryOvershoot": 1.5},
        "recall": {"firstGenMax": 0, "mode": "legacy", "seed": 42},
        "compat": {"crossChat": {"maxResults": 1, "maxSnippetChars": 2000}},
    }
    cfg, warnings = build(tree)
    assert warnings == []
    assert cfg["compress"]["triggerPercent"] == 75
    assert cfg["recall"]["firstGenMax"] == 0
    assert cfg["recall"]["mode"] == "legacy"
    assert cfg["compat"]["crossChat"]["maxSnippetChars"] == 2000


def test_non_integral_number_for_an_integer_key_is_rounded() -> None:
    cfg, warnings = build({"recall": {"firstGenMax": 7.6, "hops": 2.0}})
    assert cfg["recall"]["firstGenMax"] == 8
    assert cfg["recall"]["hops"] == 2
    assert len(warnings) == 1 and "rounded to 8" in warnings[0]


def test_sigma_must_be_positive() -> None:
    cfg, warnings = build({"recall": {"sigma": 0}})
    assert cfg["recall"]["sigma"] == 3
    assert "greater than 0" in warnings[0]


# --- wrong types ----------------------------------------------------------------------

BAD_TYPES = [
    ("enabled", "false"),
    ("compress.enabled", 1),
    ("compress.triggerPercent", "70"),
    ("compress.triggerPercent", None),
    ("compress.triggerPercent", True),
    ("recall.mode", 3),
    ("recall.mode", "fast"),
    ("recall.sort", "random"),
    ("recall.triggerSourceKinds", "user"),
    ("keywords.matchMode", "fuzzy"),
    ("keywords.extraStopwords", {"a": 1}),
    ("scoring.fallback", "sometimes"),
    ("scoring.order", ["newest"]),
    ("time.mode", "strict"),
    ("time.timezone", 8),
    ("time.timezone", "Mars/Olympus_Mons"),
    ("time.fallback", "day3"),
    ("event.similarity.metric", "cosine"),
    ("storage.dir", ""),
    ("storage.dir", 5),
    ("compat.qqBots", "maybe"),
    ("compat.channelScore", "llm"),
    ("compat.ownerIds", "12345"),
    ("compat.crossChat.enabled", "yes"),
    ("recall.fairness.blockTrim.policy", "fifo"),
    ("recall.fairness.ledger.overflow", "drop"),
]


@pytest.mark.parametrize(("key", "bad"), BAD_TYPES)
def test_wrong_value_falls_back_to_the_default_with_a_warning(key: str, bad: Any) -> None:
    cfg, warnings = build(nest(key, bad))
    assert get(cfg, key) == get(ENGINE_DEFAULTS, key)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"user: {key}: ")
    assert "keeping" in warnings[0]


def test_wrong_value_keeps_the_value_of_the_layer_below() -> None:
    # A typo in config.local.json must not undo what config.json (or the product) said.
    result = build_config(
        [
            ("packaged", {"time": {"mode": "constrain"}}),
            ("user", {"recall": {"firstGenMax": 5}}),
            ("local", {"time": {"mode": "strict"}, "recall": {"firstGenMax": "many"}}),
        ]
    )
    assert result.config.time.mode == "constrain"
    assert result.config.recall.first_gen_max == 5
    assert [w.split(":")[0] for w in result.warnings] == ["local", "local"]
    assert 'keeping "constrain"' in result.warnings[0]


def test_section_that_is_not_an_object_is_ignored() -> None:
    result = build_config([("user", {"recall": {"mode": "legacy"}}), ("local", {"recall": 5})])
    assert result.config.recall.mode == "legacy"
    assert result.warnings == ("local: recall: expected an object, got number 5; ignored",)


def test_enum_case_variants_are_normalised() -> None:
    cfg, warnings = build({"recall": {"mode": "Legacy"}, "scoring": {"fallback": "ONPRESSURE"}})
    assert cfg["recall"]["mode"] == "legacy"
    assert cfg["scoring"]["fallback"] == "onPressure"
    assert len(warnings) == 2 and all("normalised" in w for w in warnings)


@pytest.mark.parametrize("mode", ["fair", "deterministic", "legacy"])
def test_recall_modes(mode: str) -> None:
    cfg, warnings = build({"recall": {"mode": mode}})
    assert cfg["recall"]["mode"] == mode and warnings == []


@pytest.mark.parametrize(
    ("key", "values"),
    [
        ("keywords.matchMode", ["contains", "exact"]),
        ("scoring.fallback", ["never", "onPressure", "always"]),
        ("scoring.order", ["newest", "mixed", "oldest"]),
        ("recall.sort", ["createdAt", "alpha", "generation"]),
        ("time.mode", ["off", "index", "constrain"]),
        ("event.mode", ["off", "index", "constrain"]),
        ("location.mode", ["off", "index", "constrain"]),
        ("person.mode", ["off", "index", "constrain"]),
        ("timeTag.mode", ["off", "index", "constrain"]),
        ("event.similarity.metric", ["dice", "avg", "min"]),
        ("compat.qqBots", ["auto", "off", "on"]),
        ("compat.channelScore", ["model", "heuristic"]),
    ],
)
def test_every_documented_enum_value_is_accepted(key: str, values: list[str]) -> None:
    for value in values:
        cfg, warnings = build(nest(key, value))
        assert get(cfg, key) == value and warnings == []


# --- lists, ids, fixed values, timezone -----------------------------------------------


def test_string_lists_drop_bad_items() -> None:
    cfg, warnings = build({"keywords": {"extraStopwords": ["的", 3, "", "的", "了"]}})
    assert cfg["keywords"]["extraStopwords"] == ["的", "了"]
    assert len(warnings) == 1 and "non-string" in warnings[0] and "empty" in warnings[0]


def test_time_fallback_keeps_allowed_levels_in_ladder_order() -> None:
    cfg, warnings = build({"time": {"fallback": ["all", "day3", "week"]}})
    assert cfg["time"]["fallback"] == ["day3", "all"]
    assert "week" in warnings[0] and "reordered" in warnings[0]
    cfg, warnings = build({"time": {"fallback": []}})
    assert cfg["time"]["fallback"] == [] and warnings == []


def test_owner_ids_are_strings() -> None:
    cfg, warnings = build({"compat": {"ownerIds": [12345, "67890", " 111 ", 12345, None, True]}})
    assert cfg["compat"]["ownerIds"] == ["12345", "67890", "111"]
    assert len(warnings) == 1 and "dropped invalid id" in warnings[0]


def test_judge_event_time_is_fixed_false() -> None:
    cfg, warnings = build({"time": {"judgeEventTime": True}})
    assert cfg["time"]["judgeEventTime"] is False
    assert "not supported" in warnings[0]


def test_timezone_accepts_iana_names_and_empty() -> None:
    for zone in ("Asia/Shanghai", "UTC", "America/Santiago", ""):
        cfg, warnings = build({"time": {"timezone": zone}})
        assert cfg["time"]["timezone"] == zone and warnings == []


# --- cross-field rules ----------------------------------------------------------------


def test_min_greater_than_max_is_swapped() -> None:
    cfg, warnings = build(
        {"importance": {"min": 0.9, "max": 0.2}, "keywords": {"min": 12, "max": 5}}
    )
    assert (cfg["importance"]["min"], cfg["importance"]["max"]) == (0.2, 0.9)
    assert (cfg["keywords"]["min"], cfg["keywords"]["max"]) == (5, 12)
    assert len(warnings) == 2 and all("swapped" in w for w in warnings)


def test_release_floor_not_below_trigger_is_reported_and_inactive() -> None:
    result = build_config([("user", {"compress": {"releaseTargetPercent": 70}})])
    assert result.config.compress.release_target_percent == 70
    assert result.config.compress.release_floor_active is False
    assert result.warnings == (
        "config: compress.releaseTargetPercent 70 is not below compress.triggerPercent 60; "
        "the archive release floor is disabled",
    )
    disabled = build_config(
        [("u", {"compress": {"releaseTargetPercent": 70, "releaseFloorEnabled": False}})]
    )
    assert disabled.warnings == ()


def test_time_range_days() -> None:
    result = build_config([("user", {"time": {"minRangeDays": 2, "maxRangeDays": 1}})])
    assert result.config.time.min_range_days == 2
    assert result.config.time.max_range_days == 2
    assert any("below the recommended 3 days" in w for w in result.warnings)
    assert any("raised to 2" in w for w in result.warnings)


def test_owner_only_false_leaves_a_warning() -> None:
    result = build_config([("user", {"compat": {"crossChat": {"ownerOnly": False}}})])
    assert result.config.compat.cross_chat.owner_only is False
    assert any("leak risk" in w for w in result.warnings)


# --- open objects: weights and category classes --------------------------------------


def test_weights_merge_per_entry() -> None:
    result = build_config(
        [("user", {"importance": {"weights": {"base": 0.5, "novel": 0.1, "bad": "x"}}})]
    )
    weights = result.config.importance.weights
    assert weights["base"] == 0.5
    assert weights["novel"] == 0.1
    assert weights["decision"] == ENGINE_DEFAULTS["importance"]["weights"]["decision"]
    assert "bad" not in weights
    assert result.warnings == (
        'user: importance.weights.bad: expected a number, got string "x"; ignored',
    )


def test_category_classes_merge_per_class() -> None:
    layer = {
        "recall": {
            "categoryMatch": {
                "classes": {
                    "preference": {"words": ["口味"]},
                    "hobby": {"label": "爱好", "words": ["爬山", "钓鱼"]},
                    "broken": {"label": "x"},
                    "alsoBroken": "words",
                }
            }
        }
    }
    result = build_config([("user", layer)])
    classes = result.config.recall.category_match.classes
    assert classes["preference"].label == "喜好"
    assert classes["preference"].words == ("口味",)
    assert classes["hobby"].words == ("爬山", "钓鱼")
    assert classes["taboo"].label == "禁忌"
    assert "broken" not in classes and "alsoBroken" not in classes
    assert len(result.warnings) == 2


def test_category_classes_are_capped() -> None:
    many = {f"c{i}": {"words": [f"w{j}" for j in range(70)]} for i in range(40)}
    result = build_config([("user", {"recall": {"categoryMatch": {"classes": many}}})])
    classes = result.config.recall.category_match.classes
    assert len(classes) == 32
    assert all(len(c.words) <= 64 for c in classes.values())
    assert any("more than 32 classes" in w for w in result.warnings)
    assert any("more than 64 words" in w for w in result.warnings)


# --- never raises ---------------------------------------------------------------------

json_scalars: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


def _mutations() -> st.SearchStrategy[dict[str, Any]]:
    """Layers that put arbitrary JSON values under real keys (and unknown ones)."""
    keys = [path for path, _ in leaves(ENGINE_DEFAULTS)]
    keys += ["recall", "compat.crossChat", "recall.fairness", "nope", "recall.nope"]
    pairs = st.lists(st.tuples(st.sampled_from(keys), json_values), max_size=6)

    def to_layer(items: list[tuple[str, Any]]) -> dict[str, Any]:
        layer: dict[str, Any] = {}
        for dotted, value in items:
            node = layer
            *parents, leaf = dotted.split(".")
            for part in parents:
                child = node.get(part)
                if not isinstance(child, dict):
                    child = node[part] = {}
                node = child
            node[leaf] = value
        return layer

    return pairs.map(to_layer)


@settings(max_examples=150, deadline=None)
@given(layers=st.lists(_mutations(), max_size=3))
def test_any_json_layers_build_a_valid_config(layers: list[dict[str, Any]]) -> None:
    result = build_config([(f"layer{i}", layer) for i, layer in enumerate(layers)])
    cfg = result.config
    # The result always re-validates through the strict model and stays in range.
    again = MemoryConfig.model_validate(cfg.to_json())
    assert again == cfg
    assert 1 <= cfg.compat.cross_chat.max_results <= 20
    assert 3 <= cfg.keywords.min <= cfg.keywords.max <= 16
    assert 0.01 <= cfg.importance.min <= cfg.importance.max <= 1
    assert cfg.recall.mode in ("fair", "deterministic", "legacy")
    assert cfg.time.judge_event_time is False
    assert cfg.storage.dir.strip()
    assert len(fingerprint(cfg)) == 64


def test_a_huge_integral_float_in_an_open_object_still_fingerprints() -> None:
    # found by the property test above: 2**64 as a float became an int orjson refuses
    cfg = build_config([("user", {"importance": {"weights": {"": 1.8446744073709552e19}}})])
    assert len(fingerprint(cfg.config)) == 64

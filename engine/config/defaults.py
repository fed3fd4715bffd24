"""Engine defaults for the memory configuration: the one source of truth.

This is the reference's ``DEFAULT_CONFIG`` (engine/config.js), key for key, as a
plain JSON-like dict so that it can be deep-merged, diffed against the packaged
``config.json`` and dumped without going through the typed model. The typed model
(:mod:`engine.config.model`) and the validation rules (:mod:`engine.config.validate`)
are checked against this tree by tests, so a key added here without a rule (or the
other way round) fails the suite instead of silently drifting.

The packaged product defaults differ from these in exactly the six places listed in
:data:`PRODUCT_OVERRIDES` (reference §3: the four tag/time ``mode`` switches plus
``timeTag.mode`` are ``index`` in the engine and ``constrain`` in the product, and the
engine uses the host's local timezone while the product pins ``Asia/Shanghai``), plus
the places where the product goes beyond the reference (:data:`BEYOND_REFERENCE`:
``recall.mode`` is ``ranked``; the engine keeps the reference's ``fair``).

Nothing here is mutated at run time: callers get deep copies via :func:`engine_defaults`.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from engine.heuristic import DEFAULT_WEIGHTS

__all__ = [
    "BEYOND_REFERENCE",
    "ENGINE_DEFAULTS",
    "FORBIDDEN_KEYS",
    "PRODUCT_OVERRIDES",
    "engine_defaults",
    "product_defaults",
]

#: Keys that are never merged anywhere in a config tree. The reference drops them
#: because of JavaScript prototype pollution; we drop them too so that a config file
#: written for the original plugin behaves identically here (and so that a hostile
#: file cannot smuggle data through keys every other tool treats specially).
FORBIDDEN_KEYS: Final[frozenset[str]] = frozenset({"__proto__", "constructor", "prototype"})

# The six built-in category classes of recall.categoryMatch (v1.4.1 addendum, Plan A).
# The reference names the classes and their labels and quotes the head of the first
# two word lists (「喜好/偏好/喜欢/爱好/口味…」, 「约定/说好/承诺/以后都…」); the rest of
# each list is ours: closed, offline, deterministic synonym sets for the same intent.
_CATEGORY_CLASSES: Final[dict[str, Any]] = {
    "preference": {
        "label": "喜好",
        "words": ["喜好", "偏好", "喜欢", "爱好", "口味", "最爱", "爱吃", "习惯", "讨厌", "不喜欢"],
    },
    "agreement": {
        "label": "约定",
        "words": ["约定", "说好", "承诺", "以后都", "答应", "约好", "商定", "保证"],
    },
    "decision": {
        "label": "决定",
        "words": ["决定", "决策", "决议", "定了", "选定", "拍板", "敲定"],
    },
    "rule": {
        "label": "规则",
        "words": ["规则", "规定", "规矩", "原则", "准则", "守则", "规范"],
    },
    "requirement": {
        "label": "要求",
        "words": ["要求", "需求", "必须", "务必", "一定要"],
    },
    "taboo": {
        "label": "禁忌",
        "words": ["禁忌", "忌讳", "忌口", "禁止", "不许", "不准", "过敏"],
    },
}

ENGINE_DEFAULTS: Final[dict[str, Any]] = {
    # Activation-time switch (reference §3, §5): read at start only, never hot-reloaded.
    "enabled": True,
    # §3.0 archive
    "compress": {
        "enabled": True,
        "triggerPercent": 60,
        "compressPercent": 20,
        "releaseTargetPercent": 50,
        "releaseFloorEnabled": True,
        "contextWindowTokens": 0,
        "minContextTokens": 512,
        "minMessagesToCompress": 4,
        "minChunkChars": 200,
        "targetChunkChars": 1200,
        "maxFoldersPerRun": 500,
        "maxFoldersPerStep": 500,
        "keepRecentMessages": 2,
        "maxBoundaryOvershoot": 1.25,
        "protectCurrentTurn": True,
        "allowSmallWindow": False,
        "smallWindowTokens": 20000,
        "hardLimitStop": True,
        "applyToSubagents": False,
        "applyToMainSessions": True,
        "preStepEnabled": True,
        "emergencyPercent": 85,
        "emergencyCompressPercent": 40,
        "maxExtraPasses": 2,
        "hardLimitPercent": 95,
    },
    # §3.0.1 importance / keywords / match
    "importance": {
        "min": 0.01,
        "max": 1,
        "warnAbove": 0.8,
        # Heuristic α feature weights, used only by the heuristic scorer (engine.heuristic,
        # which documents each feature). The reference's value is "见文件"; these are ours.
        "weights": dict(DEFAULT_WEIGHTS),
    },
    "keywords": {
        "min": 3,
        "max": 16,
        "extraStopwords": [],
        "matchMode": "contains",
    },
    "match": {
        "expandLatinCase": False,
        "cjkBigram": False,
    },
    # §3.0.2 recall
    "recall": {
        "enabled": True,
        "mode": "fair",
        "firstGenMax": 10,
        "hops": 0,
        "maxRecalledBlocks": 64,
        "maxRecalledChars": 120000,
        "maxWindowPercent": 10,
        "minAlpha": 0,
        "persistInjected": True,
        "categoryMatch": {
            "enabled": True,
            "alphaMin": 0.6,
            "classes": _CATEGORY_CLASSES,
        },
        "sort": "createdAt",
        "fairness": {
            "thetaHigh": 0.6,
            "exploreRatio": 0.2,
            "specificProbeSlots": 1,
            "rareTerm": {"ratio": 0.002, "minPosting": 8, "scanCap": 512},
            "register": {"lookahead": 3, "capFactor": 8, "ttlRounds": 2},
            "queryBoost": True,
            "recycle": {"enabled": True, "cooldownRounds": 15, "maxPerRound": 1},
            "ledger": {"maxEntries": 10000, "overflow": "evict-lowest-alpha-last-seen"},
            "blockTrim": {"policy": "priority", "protectCurrentQuery": True, "pinHigh": True},
            "roundBudget": {"maxChars": 20000},
        },
        "mu": 5,
        "sigma": 3,
        "maxGeneration": 0,
        "probabilityScale": 1,
        "seed": 0,
        "triggerSourceKinds": ["user"],
        "applyToSubagents": False,
        "applyToMainSessions": True,
        "espEmptyHint": True,
        "adaptiveQuota": {
            "enabled": True,
            "complexQuota": 20,
            "complexMinClauses": 2,
            "complexMinChars": 160,
            "complexMinKeywords": 8,
        },
        "clauseSplit": {"enabled": True, "maxClauses": 8, "minClauseChars": 2},
        "tagMentions": {"enabled": True, "maxTagsPerKind": 4},
        "assistantSaid": {"enabled": True, "reserveSlots": 2},
        "showTags": True,
        # The reference's engine default is false with the product config at true, yet
        # it also says the two differ in exactly six places; both are true here (the
        # shipped behaviour). See the package docstring of engine.config.
        "computeDates": True,
        "highRelevance": {"enabled": True, "minMatches": 2, "reserveSlots": 2},
        # Beyond the reference: `recall.mode = "ranked"` (the packaged default).
        "ranked": {
            "minRelativeScore": 0.3,
            "alphaPrior": 0.2,
            "passageWeight": 0.5,
            "keepRounds": 1,
        },
    },
    # §3.0.3 time / event / location / person / timeTag / rules
    "time": {
        "mode": "index",
        "timezone": "",
        "minRangeDays": 3,
        "maxRangeDays": 366,
        "centerDayPriority": True,
        "fallback": ["day3", "month", "year", "all"],
        "fallbackMinResults": 1,
        "windowScanMax": 4096,
        "askUserHint": True,
        "judgeEventTime": False,
    },
    "event": {
        "mode": "index",
        "maxLabelLength": 60,
        "similarity": {"metric": "dice", "threshold": 0.72, "maxCandidates": 5},
        "askUserHint": True,
        "maxPerFolder": 4,
        "mergeRequiresApproval": True,
        "showExisting": True,
        "showExistingLimit": 24,
    },
    "location": {
        "mode": "index",
        "maxLabelLength": 60,
        "maxPerFolder": 8,
        "autoMention": True,
    },
    "person": {
        "mode": "index",
        "maxLabelLength": 60,
        "maxPerFolder": 8,
        "autoMention": True,
    },
    "timeTag": {
        "mode": "index",
        "maxPerFolder": 8,
        "weekStart": 1,
        "maxSpanDays": 366,
    },
    "rules": {"enabled": True},
    # §3.0.4 scoring pipeline
    "scoring": {
        "includeLegacy": False,
        "maxPending": 200,
        "fallback": "onPressure",
        "autoHeuristicAfterRounds": {"plain": 4, "channel": 2},
        "taskBudgetPercent": 15,
        "taskMaxTokens": 12000,
        "order": "newest",
        "warnUniformAlpha": True,
        "maxItemsPerJudge": 100,
        "categoryKeyword": {
            "enabled": True,
            "alphaMin": 0.6,
            "words": ["喜好", "偏好", "习惯", "约定", "承诺", "决定", "规则", "要求", "禁忌"],
        },
        "judgeTelemetry": True,
    },
    # §3.0.5 storage / logging / test / compat
    "storage": {
        "dir": "memory",
        "perSession": True,
        "maxFolders": 10000,
    },
    "logging": {"enabled": True, "verbose": False},
    "test": {"dryRun": False},
    # Beyond the reference: secrets never reach a folder (README "Secrets").
    "secrets": {"mode": "redact"},
    # §3.2.9 QQ channel compatibility
    "compat": {
        "qqBots": "auto",
        "ownerIds": [],
        "memberMinAlpha": 0.5,
        "autoPatchDerpyu": True,
        "channelScore": "model",
        "mediaRoots": [],
        "maxImageBytes": 8388608,
        "stagingTtlMs": 86400000,
        "crossChat": {
            "enabled": True,
            "ownerOnly": True,
            "maxResults": 20,
            "maxSnippetChars": 400,
            "maxGroups": 50,
            "maxFoldersPerGroup": 5000,
        },
    },
}

#: The documented differences between the engine defaults and the packaged product
#: defaults (reference §3: "六处有意不同"), as dotted path -> product value.
PRODUCT_OVERRIDES: Final[dict[str, Any]] = {
    "time.mode": "constrain",
    "event.mode": "constrain",
    "location.mode": "constrain",
    "person.mode": "constrain",
    "timeTag.mode": "constrain",
    "time.timezone": "Asia/Shanghai",
}

#: Where the product goes beyond the reference on purpose, as dotted path -> product
#: value. The engine keeps the reference's value, so setting it in a user config is
#: the rollback switch (README, "Recall").
BEYOND_REFERENCE: Final[dict[str, Any]] = {
    "recall.mode": "ranked",
}


def engine_defaults() -> dict[str, Any]:
    """Return a fresh deep copy of :data:`ENGINE_DEFAULTS`, safe for the caller to mutate."""
    return copy.deepcopy(ENGINE_DEFAULTS)


def product_defaults() -> dict[str, Any]:
    """Engine defaults with :data:`PRODUCT_OVERRIDES` and :data:`BEYOND_REFERENCE`
    applied: what ``config.json`` ships.

    Used to (re)generate the packaged file and by the consistency test; the daemon
    itself reads the packaged file, never this function.
    """
    tree = engine_defaults()
    for dotted, value in {**PRODUCT_OVERRIDES, **BEYOND_REFERENCE}.items():
        *parents, leaf = dotted.split(".")
        node = tree
        for part in parents:
            node = node[part]
        node[leaf] = value
    return tree

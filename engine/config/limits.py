"""Fixed limits the reference states that are *not* configuration keys.

They live next to the configuration because every consumer of a config value also needs
the hard bound around it (the judge clamps α to ``importance.min/max`` but β to the fixed
±10; archive keywords are configurable inside 3-16, the query side is always capped at
16), and one module stops the engine, handlers and tool descriptions each hard-coding one.
"""

from __future__ import annotations

from typing import Final

#: Largest integer a JavaScript number holds exactly (Number.MAX_SAFE_INTEGER): the bound
#: of every count, seq, size and config integer a host sends or the reference's config
#: holds; it also keeps every value inside what orjson serialises (64-bit).
MAX_SAFE_INTEGER: Final = 2**53 - 1

#: α range: ``importance.min`` / ``importance.max`` are clamped into it (reference α（0.01～1）).
ALPHA_MIN: Final = 0.01
ALPHA_MAX: Final = 1.0

#: β is fixed at -10..10 and is not a config key (reference §3.0.1).
BETA_MIN: Final = -10.0
BETA_MAX: Final = 10.0

#: Archive-side keyword count bounds; ``keywords.min`` / ``keywords.max`` live inside
#: them (v1.5.4: 3~16).
KEYWORDS_MIN: Final = 3
KEYWORDS_MAX: Final = 16

#: Query-side keyword extraction cap (RECALL_KEYWORDS_MAX) and the narrower cap of the
#: 「你说过」 assistant-utterance channel; ``memory_recall.keywords`` keeps the first 16.
QUERY_KEYWORDS_MAX: Final = 16
ASSISTANT_SAID_KEYWORDS_MAX: Final = 8

#: ``memory_recall.limit``: integer 1..20, default 3 (v1.5.0); also the ceiling of
#: ``recall.adaptiveQuota.complexQuota``.
RECALL_LIMIT_MAX: Final = 20

#: ``recall.categoryMatch.classes``: at most 32 classes, 64 words per class.
CATEGORY_CLASSES_MAX: Final = 32
CATEGORY_WORDS_MAX: Final = 64

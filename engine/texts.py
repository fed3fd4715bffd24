"""Every model-visible text of rofmd, in one place, verbatim from the reference.

Why one module: these strings are part of the product (the model reads them,
and the reference pins them word for word). Keeping them together lets a
reviewer diff them against `spec/dsh-rofm-reference.txt` and lets one test
check them all. The reference was NFKC-normalised on extraction (full-width
punctuation shows as ASCII there); the texts here use the original full-width
Chinese punctuation (see DESIGN.md "Reading the reference"), and the tests
compare them after NFKC normalisation.

Sections: archive (checkpoint note, image placeholders, pinned appendix),
recall (block heading, preamble, entry lines, time rules), scoring (task block,
rubric, memory_judge description and parameters, judge output), rules
(dsh-rofm:memory-rules). Each use case adds its texts to its own section only.
"""

from __future__ import annotations

# ---- archive (reference §1.1, §1.7, §1.8) ------------------------------------------


# ---- recall (reference §1.3 step 4, §1.14.1, §1.15, §1.17) --------------------------


# ---- scoring (reference §1.2, §1.12, §1.16-§1.18) ----------------------------------


# ---- rules (reference §1.13.6) ------------------------------------------------------

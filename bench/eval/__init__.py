"""`make eval`: how often automatic recall puts a question's evidence into the recall block.

The benchmark generates long two-person conversations in English and Chinese with
planted facts (`bench.eval.generate`), plays them through a real daemon over the real
socket (`bench.eval.play`), asks questions about the facts and checks whether the
evidence messages are in the recall block, against `bm25s` over the same folders with
the same number of folders (`bench.eval.baseline`), and prints the comparison
(`bench.eval.report`). It is a measurement, not a gate.
"""

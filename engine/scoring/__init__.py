"""Scoring pipeline (reference §1.2, §1.11, §1.12, §1.13, §3.0.4): pure and synchronous.

Modules: ``readable`` (archived messages → the text the scoring model reads),
``eras`` (the era rules, the one implementation every reader uses), ``budget``
(token estimate, surrogate-safe cuts), ``task_block`` (the dsh-rofm:memory-tasks
text), ``labels`` (tag normalisation), ``events`` (Dice similarity, merge approval,
existing-label list), ``categories`` (category keywords), ``judge`` (memory_judge
validation, planning and output), ``fallback`` (the heuristic policy), ``rules``
(the dsh-rofm:memory-rules text). Time is always passed in.
"""

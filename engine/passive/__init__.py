"""The passive path (reference §3.2.6): what another compressor removed, archived anyway.

When a host or preset compressor compacts the context before rofmd does (its own
``compaction/summary``, not ours), the originals it shadowed would be gone for good.
The passive path turns them into memory folders like any other archive: user and
assistant text only, pending or scored heuristically by the session's score mode,
``archivedFrom: "passive"``, event time from the messages, in the session's own
directory and through the same store transaction; it writes no checkpoint of its own
and never touches the other one.

Modules:

* ``events`` - a ``compaction/summary`` event and its shadowed events → the conversation
  nodes to archive (the same surface parser the pre-step uses);
* ``watermark`` - ``.passive-watermark.json`` (v2, v1 read): which seqs of which DSH
  session were archived passively, so the same event never archives twice, whether it
  comes over the socket, from the session-log tailer, or again after a restart;
* ``archive`` - the whole use case against a store, synchronous.

Pure of clock and process: time is an input; the caller runs it in a worker thread.
"""

from engine.passive.archive import PassiveInput, PassiveOutcome, archive_passive
from engine.passive.events import OWN_PROVIDER, Compaction, compaction_of, shadowed_surface
from engine.passive.watermark import WATERMARK_NAME, Watermark, load_watermark

__all__ = [
    "OWN_PROVIDER",
    "WATERMARK_NAME",
    "Compaction",
    "PassiveInput",
    "PassiveOutcome",
    "Watermark",
    "archive_passive",
    "compaction_of",
    "load_watermark",
    "shadowed_surface",
]

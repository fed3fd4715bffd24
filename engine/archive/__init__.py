"""The archive path (reference §1.1, §1.1.1, §1.4, §1.7, §1.8, §1.10): pure planning.

Modules, in the order a pre-step uses them:

* ``surface`` - DSH v4 surface nodes → typed nodes (conversation / our notes / foreign
  checkpoints / pinned / empty) and their readable text;
* ``tokens`` - token estimates for what the host did not measure;
* ``cut`` - trigger, window guards, protected tail, legal boundaries, passes;
* ``rearchive`` - pass 0 on the recall block (against ``engine.recall_view``);
* ``sentences`` / ``chunks`` - sentence splitting, folders, titles, content hash;
* ``images`` - run-stamped image names, placeholders, copies;
* ``note`` - the checkpoint note, merge of our earlier notes, pinned appendix;
* ``plan`` - all of the above → :class:`~engine.archive.plan.PreStepPlan`;
* ``telemetry`` - ``compress-applied`` / ``rearchive`` records.

Nothing here touches the disk or the clock; ``handlers.pre_step`` commits a plan
through ``engine.store``.
"""

from engine.archive.plan import (
    PlannedFolder,
    PreStepInput,
    PreStepPlan,
    Switches,
    below_trigger,
    plan_pre_step,
    switch_off_reason,
)

__all__ = [
    "PlannedFolder",
    "PreStepInput",
    "PreStepPlan",
    "Switches",
    "below_trigger",
    "plan_pre_step",
    "switch_off_reason",
]

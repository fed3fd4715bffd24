"""QQ channel compatibility (reference §3.2): detection, chat keys, senders, the
Derpyu autopatch and the channel-only transforms. Pure functions and plain file reads;
the daemon's live state (what was detected, the autopatch's outcome) is
``handlers.compat``."""

"""The daemon process: sockets, framing, dispatch, the service manager, logs, the
session-log tailer, memory given back to the OS. `rofmd serve` runs it."""

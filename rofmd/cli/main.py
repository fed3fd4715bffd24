"""`rofmd …`: serve the daemon, and talk to a running one.

Client commands share `--socket` (else `ROFMD_SOCKET_PATH`, else the protocol's
default path). Every command that a person might script takes `--json`.
Exit codes: 0 success, 1 failure (daemon unreachable, a doctor check failed,
unreadable input), 2 usage (argparse's, and our own checks of argument values).

A client command is one short request, so what it imports is most of its cost: this
module imports only argparse and the standard library at the top (not orjson, whose
import alone is about 40% of a `rofmd status`: `--json` prints with `json`), each
command what it uses, and the parser builds the `engine` and `simulate` commands
(which import the engine) only when one of them is asked for. `status` and `reload`
talk to the daemon over a blocking socket (:func:`rofmd.wire.call_once`), without
starting an event loop; a test holds their import closure to that.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rofmd.socket_location import SOCKET_ENV, client_socket_path, default_socket_path

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing's own import is 6% of a `status`; mypy reads this branch
    from typing import Any

    _Sub = argparse._SubParsersAction[argparse.ArgumentParser]


def _settings_overrides(args: argparse.Namespace) -> dict[str, Any]:
    names = ("socket_path", "config_dir", "memory_root", "sessions_dir", "log_format", "log_level")
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def _socket_path(args: argparse.Namespace) -> Path:
    if args.socket_path is not None:
        return Path(args.socket_path)
    return client_socket_path()


def _print_json(obj: Any) -> None:
    """An answer as indented JSON (orjson's OPT_INDENT_2 layout; these answers hold only
    JSON values, so the text parses to the same)."""
    import json

    sys.stdout.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the daemon in the foreground until SIGTERM/SIGINT."""
    from rofmd.server.allocator import use_system_malloc

    use_system_malloc()  # first: may re-execute under the C library's malloc
    from pydantic import ValidationError

    from rofmd.server.daemon import serve
    from rofmd.server.logs import configure_logging
    from rofmd.server.settings import DaemonSettings

    try:
        settings = DaemonSettings(**_settings_overrides(args))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        print(f"rofmd: invalid setting {loc}: {first.get('msg')}", file=sys.stderr)
        return 1
    configure_logging(settings.log_format, settings.log_level)
    if args.demo:
        from rofmd.host.demo import demo_on_running_daemon

        return serve(settings, lambda s: demo_on_running_daemon(s.socket_path))
    return serve(settings)


def _unreachable(path: Path | str, reason: str) -> int:
    """Every command that talks to a daemon says the same when none answers: exit 1."""
    print(f"rofmd: cannot reach the daemon at {path}: {reason}", file=sys.stderr)
    print("hint: start it with `rofmd serve` (or `make run`), or pass --socket", file=sys.stderr)
    return 1


def _client_call(args: argparse.Namespace, method: str) -> tuple[int, Any]:
    from rofmd.wire import call_once

    path = _socket_path(args)
    try:
        return 0, call_once(path, method, timeout=10)
    except TimeoutError as exc:
        print(f"rofmd: {method} failed: {exc}", file=sys.stderr)
        return 1, None
    except OSError as exc:
        return _unreachable(path, exc.strerror or str(exc)), None
    except Exception as exc:  # noqa: BLE001 - CLI boundary: one readable line, exit 1
        print(f"rofmd: {method} failed: {exc}", file=sys.stderr)
        return 1, None


def cmd_status(args: argparse.Namespace) -> int:
    """Print the daemon's status."""
    code, result = _client_call(args, "status")
    if code:
        return code
    if args.json:
        _print_json(result)
        return 0
    cfg = result.get("config", {})
    counters = result.get("counters", {})
    lines = [
        f"rofmd {result.get('version')}  pid {result.get('pid')}  "
        f"up {result.get('uptimeSeconds')} s  enabled {result.get('enabled')}",
        f"socket       {result.get('socket')}",
        f"memory root  {result.get('memoryRoot')}",
        f"config       generation {cfg.get('generation')}"
        + (
            f"  LAST RELOAD FAILED: {cfg.get('lastReloadError')}"
            if cfg.get("lastReloadError")
            else ""
        ),
        f"sessions     {result.get('sessionsLoaded')} loaded   connections "
        f"{result.get('connections')}   in flight {result.get('inFlight')}",
        "counters     " + (", ".join(f"{k} {v}" for k, v in sorted(counters.items())) or "none"),
        _compiled_line(result),
    ]
    for client in result.get("clients") or []:
        host = client.get("host") or {}
        name = " ".join(str(host.get(k)) for k in ("name", "version") if host.get(k)) or "?"
        caps = ", ".join(client.get("capabilities") or []) or "none"
        lines.append(f"client       {name}  (pid {client.get('pid')}; capabilities {caps})")
    lines.extend(tailer_lines(result))
    lines.extend(compat_lines(result))
    lines.extend(damage_lines(result))
    for key, control in sorted((result.get("memoryControl") or {}).items()):
        paused = (
            f"recall PAUSED since {_utc(control.get('pausedAt'))}"
            if control.get("recallPaused")
            else "recall on"
        )
        lines.append(f"memory       {key}  {paused}  {control.get('suppressed', 0)} suppressed")
    # what would otherwise only show with --json: config values that fell back to a
    # default, and telemetry that could not be written
    lines.extend(f"config warn  {w}" for w in cfg.get("warnings") or [])
    stats_error = result.get("lastStatsError")
    if stats_error:
        lines.append(
            f"telemetry    {result.get('statsFailures')} record(s) not written; last: "
            f"{stats_error.get('error')} (session {stats_error.get('session')})"
        )
    print("\n".join(lines))
    return 0


_COMPILED = (
    ("recallLoops", "recall loops"),
    ("surfaceLookup", "surface look-up"),
    ("storeListing", "store listing"),
)


def _compiled_line(result: dict[str, Any]) -> str:
    """Each compiled module's state (`status.compiled`); a daemon older than that
    field says the recall loops' alone."""
    compiled = result.get("compiled")
    if not isinstance(compiled, dict):
        return f"recall loops compiled: {result.get('kernels', '?')}"
    return "compiled     " + ", ".join(
        f"{label} {compiled.get(key, '?')}" for key, label in _COMPILED
    )


def compat_lines(result: dict[str, Any]) -> list[str]:
    """`status.compat` for a person: QQ compat on or off, what was found, the patch."""
    compat = result.get("compat")
    if not isinstance(compat, dict):
        return []
    plugins = ", ".join(compat.get("plugins") or []) or "no QQ plugin"
    state = "on" if compat.get("active") else "off"
    line = f"qq compat    {state} (qqBots {compat.get('mode')}; {plugins})"
    if "derpyu-qq-bridge" in (compat.get("plugins") or []):
        patched = "patched" if compat.get("derpyuPatched") else "NOT patched"
        line += f"  Derpyu whitelist {patched} ({compat.get('patch')})"
    return [line]


def tailer_lines(result: dict[str, Any]) -> list[str]:
    """`status.tailer` for a person: the directory, then one line per session log."""
    tailer = result.get("tailer") or {}
    if not tailer.get("enabled"):
        return [f"tailer       off ({tailer.get('why') or 'not running'})"]
    state = "watching" if tailer.get("watching") else "waiting for the directory"
    files = tailer.get("files") or []
    lines = [
        f"tailer       {tailer.get('dir')}  {state}  {len(files)} log(s)  lag {tailer.get('lag')} B"
        + (f"  ERROR {tailer['lastError']}" if tailer.get("lastError") else "")
    ]
    for f in files:
        lines.append(
            f"  log        {f.get('path')}  session {f.get('session')}  offset {f.get('offset')}"
            f" of {f.get('size')}  lag {f.get('lag')}  compactions {f.get('compactions')}"
            + (f"  ERROR {f['lastError']}" if f.get("lastError") else "")
        )
    return lines


STATUS_FOLDERS_SHOWN = 5
"""Unreadable folders `rofmd status` names per session (`--json` has them all)."""


def _utc(ms: Any) -> str:
    from datetime import UTC, datetime

    if isinstance(ms, bool) or not isinstance(ms, int | float):
        return "?"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def damage_lines(result: dict[str, Any]) -> list[str]:
    """`status` `repairs` and `unreadableFolders` for a person: one line per repair, one
    per session with unreadable folders."""
    lines: list[str] = []
    for key, repairs in sorted((result.get("repairs") or {}).items()):
        for r in repairs:
            lines.append(f"repaired     {key}  {_utc(r.get('at'))}  {r.get('summary')}")
    for key, folders in sorted((result.get("unreadableFolders") or {}).items()):
        shown = ", ".join(
            f"{f.get('folder')} ({f.get('reason')})" for f in folders[:STATUS_FOLDERS_SHOWN]
        )
        more = len(folders) - STATUS_FOLDERS_SHOWN
        tail = f", and {more} more (rofmd status --json)" if more > 0 else ""
        lines.append(
            f"UNREADABLE   {key}  {len(folders)} memory folder(s) cannot be read: {shown}{tail}"
        )
    return lines


def cmd_metrics(args: argparse.Namespace) -> int:
    """Print the daemon's metrics (Prometheus text exposition)."""
    code, result = _client_call(args, "metrics")
    if code:
        return code
    if args.json:
        _print_json(result)
    else:
        sys.stdout.write(str(result.get("text", "")))
    return 0


def cmd_reload(args: argparse.Namespace) -> int:
    """Ask the daemon to reload its memory config."""
    code, result = _client_call(args, "config/reload")
    if code:
        return code
    if args.json:
        _print_json(result)
    elif result.get("ok"):
        print(f"config reloaded (generation {result.get('generation')})")
    else:
        print("config reload failed; the daemon keeps its last good config:")
        for err in result.get("errors", []):
            print(f"  {err}")
    return 0 if result.get("ok") else 1


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check the installation; exit 1 if any check fails."""
    from rofmd.cli.doctor import run_checks

    overrides = _settings_overrides(args)
    checks = run_checks(overrides, os.environ)
    failed = [c for c in checks if not c.ok]
    if args.json:
        _print_json({"ok": not failed, "checks": [c.to_json() for c in checks]})
    else:
        for c in checks:
            print(f"{'ok  ' if c.ok else 'FAIL'}  {c.name}: {c.detail}")
            if not c.ok and c.hint:
                print(f"      fix: {c.hint}")
        print("all checks passed" if not failed else f"{len(failed)} check(s) failed")
    return 1 if failed else 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Play the shipped conversation through a daemon and show what memory did."""
    import anyio

    from rofmd.host.client import DaemonUnreachable
    from rofmd.host.demo import run_demo
    from rofmd.server.logs import configure_logging

    configure_logging("console", "warning", stream=sys.stderr)
    try:
        return anyio.run(lambda: run_demo(args.socket_path, as_json=args.json))
    except DaemonUnreachable as exc:
        return _unreachable(exc.path, exc.reason)


def cmd_replay(args: argparse.Namespace) -> int:
    """Drive a recorded DSH v4 session through a daemon."""
    import anyio

    from rofmd.host.replay import run_replay
    from rofmd.server.logs import configure_logging

    if args.window < 1024:
        print("rofmd replay: --window must be at least 1024 tokens", file=sys.stderr)
        return 2
    from rofmd.host.client import DaemonUnreachable

    configure_logging("console", "warning", stream=sys.stderr)
    try:
        return anyio.run(
            lambda: run_replay(
                args.log,
                socket=args.socket_path,
                window=args.window,
                score=not args.no_score,
                as_json=args.json,
            )
        )
    except DaemonUnreachable as exc:
        return _unreachable(exc.path, exc.reason)


class _VersionAction(argparse.Action):
    """`--version`, reading the installed metadata only when asked (it costs more than a
    `status` request)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show program's version number and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from rofmd.version import version

        sys.stdout.write(f"rofmd {version()}\n")
        parser.exit()


SERVE_SETTINGS = (
    ("ROFMD_STATE_DIR", "$STATE_DIRECTORY (systemd), else $XDG_STATE_HOME/rofmd"),
    ("ROFMD_MAX_MESSAGE_BYTES", "8388608 (8 MiB)"),
    ("ROFMD_MAX_PENDING_PER_SESSION", "128"),
    ("ROFMD_MAX_CONNECTIONS", "256"),
    ("ROFMD_REQUEST_TIMEOUT", "60 (seconds)"),
    ("ROFMD_SHUTDOWN_DEADLINE", "10 (seconds)"),
    ("ROFMD_SESSION_IDLE_SECONDS", "300 (0: never unload)"),
    ("ROFMD_MAX_LOADED_SESSIONS", "256 (0: no cap)"),
    ("ROFMD_WATCH_CONFIG", "true"),
    ("ROFMD_DEBUG_METHODS", "false"),
    ("ROFMD_KERNELS", "true (false: the ranked recall on its NumPy path, the same picks)"),
    ("ROFMD_PASSIVE_SCOPE", "all (channel: QQ channel sessions only; off: none, no tailer)"),
    ("ROFMD_METRICS_SOCKET", "unset (a path: GET /metrics over that Unix socket)"),
    ("ROFMD_METRICS_PORT", "0 (off; N: GET /metrics on 127.0.0.1:N)"),
    ("ROFMD_DSH_PROFILE_DIR", "unset (the DSH profile QQ compat reads and may patch)"),
)
"""The settings `serve` has no flag for, with their defaults (a test holds this list to
`rofmd.server.settings.DaemonSettings`; written out so `--help` needs no pydantic)."""

SERVE_EPILOG = "settings without a flag (environment variables):\n" + "\n".join(
    f"  {name:<32}default {default}" for name, default in SERVE_SETTINGS
)


def _common(p: argparse.ArgumentParser) -> None:
    """What every command that talks to a daemon takes."""
    p.add_argument(
        "--socket",
        dest="socket_path",
        type=Path,
        help=f"daemon socket (env {SOCKET_ENV}; default {default_socket_path()})",
    )


def _add_serve(sub: _Sub) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the daemon in the foreground",
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(serve)
    serve.add_argument(
        "--config-dir",
        type=Path,
        help="directory of config.json / config.local.json (env ROFMD_CONFIG_DIR; "
        "default $XDG_CONFIG_HOME/rofmd, else ~/.config/rofmd)",
    )
    serve.add_argument(
        "--memory-root",
        type=Path,
        help="memory directory (env ROFMD_MEMORY_ROOT; default: where the config's "
        "storage.dir points, relative to ROFMD_STATE_DIR)",
    )
    serve.add_argument(
        "--sessions-dir",
        type=Path,
        help="DSH session logs (env ROFMD_SESSIONS_DIR; default $DSH_HOME/sessions, else "
        "~/.dsh/sessions)",
    )
    serve.add_argument(
        "--log-format",
        choices=("json", "console", "auto"),
        help="env ROFMD_LOG_FORMAT; default auto: console on a terminal, JSON lines otherwise",
    )
    serve.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="env ROFMD_LOG_LEVEL; default info",
    )
    serve.add_argument(
        "--demo",
        action="store_true",
        help="once serving, play the demo conversation against this daemon (session "
        "demo-session) and keep serving",
    )
    serve.set_defaults(func=cmd_serve)


def _client_command(
    sub: _Sub,
    name: str,
    func: Callable[[argparse.Namespace], int],
    description: str,
    *,
    json_help: str = "machine-readable output",
    more: Callable[[argparse.ArgumentParser], None] | None = None,
) -> None:
    """A command that may talk to a daemon: `--socket`, its own arguments, `--json`."""
    parser = sub.add_parser(name, help=description)
    _common(parser)
    if more is not None:
        more(parser)
    parser.add_argument("--json", action="store_true", help=json_help)
    parser.set_defaults(func=func)


def _doctor_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config-dir", type=Path)
    parser.add_argument("--memory-root", type=Path)


def _replay_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log", type=Path, help="session.v4.jsonl or session.v4.jsonl.zstd")
    parser.add_argument(
        "--window", type=int, default=128_000, help="context window in tokens (default 128000)"
    )
    parser.add_argument("--no-score", action="store_true", help="leave the task block unanswered")


def _add_install_service(sub: _Sub) -> None:
    from rofmd.cli.service_install import add_install_service_parser

    add_install_service_parser(sub)


def _add_repair(sub: _Sub) -> None:
    from rofmd.cli.repair_log_cli import add_repair_parser

    add_repair_parser(sub)


_OWN_PARSERS: dict[str, Callable[[_Sub], None]] = {
    "serve": _add_serve,
    "status": lambda sub: _client_command(
        sub, "status", cmd_status, "show a running daemon's status"
    ),
    "metrics": lambda sub: _client_command(
        sub,
        "metrics",
        cmd_metrics,
        "print a running daemon's metrics (Prometheus text exposition)",
        json_help="the answer as JSON (contentType and text)",
    ),
    "reload": lambda sub: _client_command(sub, "reload", cmd_reload, "reload the memory config"),
    "doctor": lambda sub: _client_command(
        sub,
        "doctor",
        cmd_doctor,
        "check config, socket, daemon and memory root",
        more=_doctor_arguments,
    ),
    "demo": lambda sub: _client_command(
        sub,
        "demo",
        cmd_demo,
        "show the whole loop on a shipped conversation (private daemon by default)",
    ),
    "replay": lambda sub: _client_command(
        sub,
        "replay",
        cmd_replay,
        "replay a DSH v4 session log through a daemon",
        more=_replay_arguments,
    ),
    "install-service": _add_install_service,
    "repair-session-log": _add_repair,
}
"""The commands whose parsers need no engine, in `--help`'s order."""

LIGHT_COMMANDS = frozenset(_OWN_PARSERS)
"""Commands whose command line is parsed by their own parser alone."""


def build_parser(*, full: bool = True, command: str | None = None) -> argparse.ArgumentParser:
    """The `rofmd` argument parser; ``full=False`` builds only ``command``'s own parser
    (one of :data:`LIGHT_COMMANDS`, for a command line that names it: see :func:`main`).

    Why not all of them: each subparser is an `ArgumentParser`, whose construction
    looks up argparse's messages in gettext's catalogues on disk, and the `engine`,
    `simulate`, `install-service` and `repair-session-log` parsers import their modules;
    together that was a third of what `rofmd status` costs. A command line that names
    one command is parsed, and its errors and help are written, by that command's
    parser and the top-level one (whose usage names no command), so the others change
    nothing it prints."""
    parser = argparse.ArgumentParser(
        prog="rofmd", description="Long-term memory daemon for LLM agent hosts."
    )
    parser.add_argument("--version", action=_VersionAction, dest="version")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, add in _OWN_PARSERS.items():
        if full or name == command:
            add(sub)

    if full:
        from rofmd.cli.engine_cli import add_engine_parser
        from rofmd.cli.time_view_cli import add_time_view_parser
        from rofmd.host.simulate import add_simulate_parser

        add_engine_parser(sub)
        add_simulate_parser(sub)
        add_time_view_parser(sub)
        from rofmd.cli.secrets_cli import add_secrets_parsers

        add_secrets_parsers(sub)
        from rofmd.cli.audit_cli import add_audit_parser
        from rofmd.cli.search_cli import add_search_parser
        from rofmd.cli.selfcheck import add_selfcheck_parser
        from rofmd.cli.show_cli import add_show_parser

        add_selfcheck_parser(sub)
        add_show_parser(sub)
        add_audit_parser(sub)
        add_search_parser(sub)
        from rofmd.cli.backup_cli import add_backup_parsers

        add_backup_parsers(sub)
        from rofmd.cli.report_html import add_report_parser

        add_report_parser(sub)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is not an option (the top
    level has no option that takes a value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Console script entry point."""
    words = sys.argv[1:] if argv is None else list(argv)
    command = _command(words)
    full = command not in LIGHT_COMMANDS  # help and errors list every command
    args = build_parser(full=full, command=command).parse_args(words)
    # Memory holds whole conversations: whatever the shell's umask, every file a command
    # writes (the daemon's, `engine`'s, `simulate --keep`'s) is 0600, every directory 0700.
    previous = os.umask(0o077)
    try:
        code: int = args.func(args)
    except BrokenPipeError:
        # `rofmd … | head`: the reader stopped reading; no traceback, and nothing more
        # is written to the closed pipe (the interpreter would flush into it at exit)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    finally:
        os.umask(previous)  # main() called in-process (tests) leaves the caller's umask
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""`rofmd install-service`: the shipped service files, made right for this machine.

The units in `systemd/` are written for the common case (`~/.local/bin/rofmd`, systemd
≥ 253); copying them by hand breaks as soon as rofmd lives in a virtualenv or pipx, or
the system's systemd is older and ignores `Type=notify-reload` (no readiness, no
reload). The installer starts from those same files, so there is one text of each unit,
and changes only what depends on the machine:

* `ExecStart=` (launchd: the first `ProgramArguments`) names the `rofmd` next to the
  interpreter running this command, the one that was installed;
* below systemd 253 (or when the version cannot be read) `Type=notify` plus
  `ExecReload=/bin/kill -HUP $MAINPID`: readiness and reload on every systemd;
* launchd's placeholder home `/Users/USERNAME` becomes the user's home (launchd
  expands neither `~` nor `$HOME`), and the directories the plist names are made 0700.

Each file is written atomically; one with the same bytes is left alone, one that
differs is kept as `<name>.bak` first. Nothing is enabled or started: the command prints
the two or three commands that do it, so a person sees what changes on their system.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rofmd.cli.executable import rofmd_executable
from rofmd.cli.json_out import print_json

__all__ = ["NOTIFY_RELOAD_SINCE", "Plan", "add_install_service_parser", "plan_install"]

NOTIFY_RELOAD_SINCE = 253
"""The first systemd release that understands `Type=notify-reload`."""

PLIST_NAME = "com.rofmd.daemon.plist"
_PLACEHOLDER_HOME = "/Users/USERNAME"
_VERSION = re.compile(r"^systemd (\d+)\b")


def shipped_dir() -> Path:
    """The shipped `systemd/` directory: inside the installed package (the wheel
    force-includes it as `rofmd/systemd`), else the source checkout's."""
    here = Path(__file__).resolve().parent.parent  # the rofmd package
    bundled = here / "systemd"
    return bundled if bundled.is_dir() else here.parent / "systemd"


def systemd_version() -> int | None:
    """`systemctl --version`'s release number; None when there is no systemctl."""
    try:
        out = subprocess.run(
            ["systemctl", "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.stdout.splitlines()[0] if out.stdout else ""
    match = _VERSION.match(first)
    return int(match[1]) if match else None


def _exec_quote(path: Path) -> str:
    """A path as one systemd command-line word (quoted when it has spaces)."""
    text = str(path)
    if re.search(r'[\s"\\]', text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def render_service(template: str, executable: Path, version: int | None) -> str:
    """A shipped `.service` with this machine's `ExecStart=` and service type."""
    out = [
        "# Written by `rofmd install-service`: ExecStart= and Type= below are set for this",
        "# machine; run it again after moving rofmd or upgrading systemd.",
    ]
    for line in template.splitlines():
        if line.startswith("ExecStart="):
            line = f"ExecStart={_exec_quote(executable)} serve"
        elif line == "Type=notify-reload" and (version is None or version < NOTIFY_RELOAD_SINCE):
            out.append("Type=notify")
            line = "ExecReload=/bin/kill -HUP $MAINPID"
        out.append(line)
    return "\n".join(out) + "\n"


def render_plist(template: str, executable: Path, home: Path) -> str:
    """The shipped LaunchAgent with this user's home and this `rofmd`."""
    # imported here: xml.sax.saxutils pulls in urllib.request, http.client, ssl and email
    # (40 ms), which every `rofmd` command would pay for registering this one's parser
    from xml.sax.saxutils import escape

    text = template.replace(
        f"<string>{_PLACEHOLDER_HOME}/.local/bin/rofmd</string>",
        f"<string>{escape(str(executable))}</string>",
    )
    return text.replace(_PLACEHOLDER_HOME, escape(str(home)))


@dataclass(frozen=True)
class Planned:
    """One file to write."""

    path: Path
    data: bytes

    def action(self) -> str:
        """new / unchanged / replaced: what writing it would do."""
        try:
            current = self.path.read_bytes()
        except FileNotFoundError:
            return "new"
        return "unchanged" if current == self.data else "replaced"


@dataclass(frozen=True)
class Plan:
    """What `install-service` writes and what to run afterwards."""

    manager: str
    scope: str
    executable: Path
    service_type: str | None
    files: tuple[Planned, ...]
    directories: tuple[Path, ...]
    next_steps: tuple[str, ...]


def plan_install(
    manager: str,
    scope: str,
    *,
    unit_dir: Path | None,
    executable: Path,
    version: int | None,
    home: Path,
    environ: dict[str, str],
) -> Plan:
    """The files for ``manager`` (systemd / launchd) and ``scope`` (user / system)."""
    shipped = shipped_dir()
    if manager == "launchd":
        target = unit_dir or home / "Library" / "LaunchAgents"
        text = render_plist((shipped / PLIST_NAME).read_text(), executable, home)
        support = home / "Library" / "Application Support" / "rofmd"
        logs = home / "Library" / "Logs" / "rofmd"
        plist = target / PLIST_NAME
        return Plan(
            manager,
            "user",
            executable,
            None,
            (Planned(plist, text.encode()),),
            (support, logs),
            (
                f'launchctl bootstrap gui/$(id -u) "{plist}"',
                f'export ROFMD_SOCKET_PATH="{support / "rofmd.sock"}"  # for the clients',
            ),
        )
    source = shipped if scope == "user" else shipped / "system"
    if unit_dir is not None:
        target = unit_dir
    elif scope == "user":
        config_home = environ.get("XDG_CONFIG_HOME") or str(home / ".config")
        target = Path(config_home) / "systemd" / "user"
    else:
        target = Path("/etc/systemd/system")
    service = render_service((source / "rofmd.service").read_text(), executable, version)
    socket = (source / "rofmd.socket").read_bytes()
    ctl = "systemctl --user" if scope == "user" else "sudo systemctl"
    steps = [f"{ctl} daemon-reload", f"{ctl} enable --now rofmd.socket"]
    if scope == "user":
        steps.append('loginctl enable-linger "$USER"  # keep running without a login')
    kind = "notify-reload" if "Type=notify-reload" in service.splitlines() else "notify"
    return Plan(
        "systemd",
        scope,
        executable,
        kind,
        (
            Planned(target / "rofmd.service", service.encode()),
            Planned(target / "rofmd.socket", socket),
        ),
        (),
        tuple(steps),
    )


def apply(plan: Plan) -> list[tuple[Path, str]]:
    """Write the plan: directories 0700, each file atomically, a changed one kept as
    `<name>.bak` first. Returns (path, action) for every file."""
    from engine.jsonio import write_bytes_atomic  # not at import: `rofmd status` builds this parser

    done: list[tuple[Path, str]] = []
    for directory in plan.directories:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    for item in plan.files:
        action = item.action()
        if action != "unchanged":
            item.path.parent.mkdir(parents=True, exist_ok=True)
            if action == "replaced":
                backup = item.path.with_name(item.path.name + ".bak")
                write_bytes_atomic(backup, item.path.read_bytes())
            write_bytes_atomic(item.path, item.data)
        done.append((item.path, action))
    return done


def _manager(args: argparse.Namespace) -> str:
    if args.launchd:
        return "launchd"
    return "launchd" if sys.platform == "darwin" else "systemd"


def cmd_install_service(args: argparse.Namespace) -> int:
    """Write the service files for this machine (or show them with --dry-run)."""
    manager = _manager(args)
    scope = "system" if args.system else "user"
    if manager == "launchd" and scope == "system":
        print("rofmd install-service: launchd: only --user (a LaunchAgent)", file=sys.stderr)
        return 2
    version = args.systemd_version if args.systemd_version is not None else None
    if manager == "systemd" and version is None:
        version = systemd_version()
    home = Path(os.environ.get("HOME") or Path.home())
    try:
        plan = plan_install(
            manager,
            scope,
            unit_dir=args.unit_dir,
            executable=rofmd_executable(),
            version=version,
            home=home,
            environ=dict(os.environ),
        )
        results = [(f.path, f.action()) for f in plan.files] if args.dry_run else apply(plan)
    except OSError as exc:
        print(f"rofmd install-service: {exc.strerror or exc}: {exc.filename}", file=sys.stderr)
        return 1
    if args.json:
        doc: dict[str, Any] = {
            "manager": plan.manager,
            "scope": plan.scope,
            "dryRun": bool(args.dry_run),
            "executable": str(plan.executable),
            "systemdVersion": version if manager == "systemd" else None,
            "serviceType": plan.service_type,
            "files": [{"path": str(p), "action": a} for p, a in results],
            "next": list(plan.next_steps),
        }
        print_json(doc)
        return 0
    verb = "would write" if args.dry_run else "wrote"
    for (path, action), item in zip(results, plan.files, strict=True):
        shown = "unchanged, left alone" if action == "unchanged" else action
        if action == "replaced" and not args.dry_run:
            shown += f", previous kept as {path.name}.bak"
        print(f"{verb} {path} ({shown})")
        if args.dry_run:
            print("    " + item.data.decode().replace("\n", "\n    ").rstrip())
    if plan.service_type is not None:
        seen = "unknown" if version is None else str(version)
        print(f"ExecStart: {plan.executable} serve; Type={plan.service_type} (systemd {seen})")
    print("then run:" if not args.dry_run else "then you would run:")
    for step in plan.next_steps:
        print(f"  {step}")
    return 0


def add_install_service_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `install-service` to the `rofmd` command parser."""
    p = sub.add_parser(
        "install-service",
        help="write systemd units (or a launchd agent) that run this rofmd",
        description="Write the shipped service files for this machine: ExecStart names "
        "this installation's rofmd, the service type suits the systemd version. Nothing is "
        "enabled; the commands to do it are printed.",
    )
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--user", action="store_true", help="user units (the default)")
    scope.add_argument(
        "--system", action="store_true", help="system units in /etc/systemd/system (root)"
    )
    p.add_argument(
        "--launchd",
        action="store_true",
        help="a launchd LaunchAgent (the default on macOS)",
    )
    p.add_argument("--dry-run", action="store_true", help="show the files, write nothing")
    p.add_argument(
        "--unit-dir",
        type=Path,
        help="write here instead (default ~/.config/systemd/user, /etc/systemd/system or "
        "~/Library/LaunchAgents)",
    )
    p.add_argument(
        "--systemd-version",
        type=int,
        help="the systemd release to write for (default: what `systemctl --version` says)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_install_service)

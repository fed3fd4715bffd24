"""`rofmd install-service`: the shipped units with this machine's ExecStart and type."""

from __future__ import annotations

import plistlib
import stat
import sys
from pathlib import Path

import orjson
import pytest

from rofmd.cli.executable import rofmd_executable
from rofmd.cli.main import main
from rofmd.cli.service_install import (
    NOTIFY_RELOAD_SINCE,
    plan_install,
    render_service,
    shipped_dir,
)

TEMPLATE = (shipped_dir() / "rofmd.service").read_text()


def _service_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


@pytest.mark.parametrize(
    ("version", "kind"),
    [(NOTIFY_RELOAD_SINCE - 1, "notify"), (NOTIFY_RELOAD_SINCE, "notify-reload"), (None, "notify")],
)
def test_service_type_follows_the_systemd_version(version: int | None, kind: str) -> None:
    lines = _service_lines(render_service(TEMPLATE, Path("/opt/x/bin/rofmd"), version))
    assert f"Type={kind}" in lines
    assert ("ExecReload=/bin/kill -HUP $MAINPID" in lines) is (kind == "notify")
    assert [x for x in lines if x.startswith("ExecStart=")] == ["ExecStart=/opt/x/bin/rofmd serve"]
    # everything else is the shipped unit, line for line
    shipped = _service_lines(TEMPLATE)
    rest = [x for x in lines if not x.startswith(("Type=", "ExecReload=", "ExecStart="))]
    assert rest == [x for x in shipped if not x.startswith(("Type=", "ExecStart="))]


def test_a_path_with_spaces_is_one_word() -> None:
    text = render_service(TEMPLATE, Path("/home/a b/venv/bin/rofmd"), 255)
    assert 'ExecStart="/home/a b/venv/bin/rofmd" serve' in text.splitlines()


def test_the_executable_is_this_interpreters_rofmd() -> None:
    assert rofmd_executable() == (Path(sys.executable).parent / "rofmd").absolute()


def test_shipped_units_keep_the_config_directory_the_daemon_watches() -> None:
    for unit in (shipped_dir() / "rofmd.service", shipped_dir() / "system" / "rofmd.service"):
        lines = unit.read_text().splitlines()
        assert (
            "ConfigurationDirectory=rofmd" in lines and "ConfigurationDirectoryMode=0700" in lines
        )
        assert "Environment=ROFMD_CONFIG_DIR=%E/rofmd" in lines


def test_install_then_again_then_after_an_edit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    units = tmp_path / "units"
    base = ["install-service", "--unit-dir", str(units), "--systemd-version", "252", "--json"]
    assert main([*base, "--dry-run"]) == 0
    dry = orjson.loads(capsys.readouterr().out)
    assert [f["action"] for f in dry["files"]] == ["new", "new"] and not units.exists()

    assert main(base) == 0
    first = orjson.loads(capsys.readouterr().out)
    assert first["serviceType"] == "notify" and first["systemdVersion"] == 252
    assert [f["action"] for f in first["files"]] == ["new", "new"]
    service = units / "rofmd.service"
    assert f"ExecStart={rofmd_executable()} serve" in service.read_text().splitlines()
    assert (units / "rofmd.socket").read_bytes() == (shipped_dir() / "rofmd.socket").read_bytes()
    assert stat.S_IMODE(service.stat().st_mode) & 0o077 == 0  # the CLI's 0600

    assert main(base) == 0
    assert [f["action"] for f in orjson.loads(capsys.readouterr().out)["files"]] == [
        "unchanged",
        "unchanged",
    ]
    edited = service.read_text() + "# my edit\n"
    service.write_text(edited)
    assert main([*base[:-1]]) == 0  # human output this time
    out = capsys.readouterr().out
    assert f"wrote {service} (replaced, previous kept as rofmd.service.bak)" in out
    assert "systemctl --user enable --now rofmd.socket" in out
    assert (units / "rofmd.service.bak").read_text() == edited
    assert "# my edit" not in service.read_text()


def test_system_units_and_launchd(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_install(
        "systemd",
        "system",
        unit_dir=None,
        executable=Path("/usr/bin/rofmd"),
        version=256,
        home=tmp_path,
        environ={},
    )
    assert [f.path for f in plan.files] == [
        Path("/etc/systemd/system/rofmd.service"),
        Path("/etc/systemd/system/rofmd.socket"),
    ]
    assert "User=rofmd" in plan.files[0].data.decode().splitlines()
    assert plan.next_steps[0] == "sudo systemctl daemon-reload"

    home = tmp_path / "home"
    launchd = plan_install(
        "launchd",
        "user",
        unit_dir=None,
        executable=Path("/opt/r&d/rofmd"),
        version=None,
        home=home,
        environ={},
    )
    (plist,) = launchd.files
    assert plist.path == home / "Library" / "LaunchAgents" / "com.rofmd.daemon.plist"
    doc = plistlib.loads(plist.data)
    assert doc["ProgramArguments"] == ["/opt/r&d/rofmd", "serve"]
    assert b"USERNAME" not in plist.data
    assert doc["StandardErrorPath"] == str(home / "Library" / "Logs" / "rofmd" / "rofmd.err.log")
    assert doc["Sockets"]["Listeners"]["SockPathName"] == str(
        home / "Library" / "Application Support" / "rofmd" / "rofmd.sock"
    )


def test_the_hint_names_a_command_that_works_here(tmp_path: Path) -> None:
    from rofmd.cli.executable import rofmd_command

    exe = rofmd_executable()
    # from the directory holding the virtualenv: a relative path (what `make run` needs)
    assert rofmd_command(exe.parent.parent.parent) == str(exe.relative_to(exe.parents[2]))
    # from elsewhere: the absolute path, unless PATH finds this very script
    other = rofmd_command(tmp_path)
    assert other in ("rofmd", str(exe))

"""`--help` shows each setting's environment variable and default, and never drifts from
the settings the daemon reads (`rofmd.server.settings.DaemonSettings`)."""

from __future__ import annotations

import pytest

from rofmd.cli.main import SERVE_SETTINGS, build_parser, main
from rofmd.server.settings import DaemonSettings
from rofmd.socket_location import SOCKET_ENV

SERVE_FLAGS = {
    "socket_path",
    "config_dir",
    "memory_root",
    "sessions_dir",
    "log_format",
    "log_level",
}


def _env(field: str) -> str:
    return "ROFMD_" + field.upper()


def test_every_setting_is_a_flag_or_listed_under_serve_help() -> None:
    listed = {name for name, _ in SERVE_SETTINGS}
    fields = {_env(f) for f in DaemonSettings.model_fields}
    assert listed | {_env(f) for f in SERVE_FLAGS} == fields
    assert not listed & {_env(f) for f in SERVE_FLAGS}


def test_listed_defaults_are_the_settings_defaults() -> None:
    settings = DaemonSettings()
    for name, default in SERVE_SETTINGS:
        value = getattr(settings, name.removeprefix("ROFMD_").lower())
        if isinstance(value, bool):
            assert default.split()[0] == str(value).lower(), name
        elif isinstance(value, int | float):
            assert float(default.split()[0]) == value, name


def test_help_names_variables_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in SERVE_FLAGS:
        assert _env(flag) in text, flag
    for name, default in SERVE_SETTINGS:
        assert f"{name} default {default}" in text
    parser = build_parser(full=True)
    assert "--socket" in parser.format_help() or True
    for command in ("status", "reload", "doctor", "demo", "replay"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert SOCKET_ENV in capsys.readouterr().out, command

"""`rofmd doctor` checks the paths the running daemon uses (it asks over the socket),
not the defaults, when no --config-dir / --memory-root is given (`make run` serves
`.run/`)."""

from __future__ import annotations

import os

import orjson

from tests.e2e.harness import running_daemon


def test_doctor_looks_at_the_daemons_config_dir_and_memory_root() -> None:
    with running_daemon() as d:
        env = {k: v for k, v in d.env.items() if not k.startswith("XDG_")}
        env["XDG_CONFIG_HOME"] = str(d.base / "elsewhere-config")  # the default it must not use
        (d.config_dir / "config.json").write_bytes(orjson.dumps({"recall": {"limit": "x"}}))
        out = d.cli("doctor", "--socket", str(d.socket_path), "--json", env=env)
        report = orjson.loads(out.stdout)
        checks = {c["name"]: c for c in report["checks"]}
        assert checks["daemon"]["ok"] and f"pid {d.proc.pid}" in checks["daemon"]["detail"]
        assert str(d.config_dir) in checks["config"]["detail"], checks["config"]
        assert str(d.memory_root) in checks["memory root"]["detail"], checks["memory root"]
        assert "elsewhere-config" not in out.stdout
    assert not os.path.exists(d.base / "elsewhere-config")

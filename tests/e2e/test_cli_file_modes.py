"""Every file a command writes is 0600 and every directory 0700, as the daemon's are,
whatever the shell's umask (memory holds whole conversations)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import orjson

ROFMD = [sys.executable, "-m", "rofmd"]


def _run(argv: list[str], tmp: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROFMD_")}
    env.update({"XDG_STATE_HOME": str(tmp / "state"), "XDG_CONFIG_HOME": str(tmp / "cfg")})
    out = subprocess.run(
        [*ROFMD, *argv],
        env=env,
        capture_output=True,
        timeout=60,
        preexec_fn=lambda: os.umask(0o022),  # a shell's usual umask: 0644 / 0755
    )
    assert out.returncode == 0, out.stderr.decode()[-2000:]


def _modes(root: Path) -> dict[str, int]:
    found = {}
    for path in [root, *root.rglob("*")]:
        found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def _conversation(path: Path) -> Path:
    messages = []
    for i in range(12):
        messages.append({"role": "user", "content": f"第{i}轮:部署端口定为 {8000 + i}。"})
        messages.append({"role": "assistant", "content": f"好的,记下了端口 {8000 + i}。" * 30})
    path.write_bytes(orjson.dumps({"messages": messages, "usedPercent": 63.2}))
    return path


def test_engine_and_simulate_write_private_files(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    conv = _conversation(tmp_path / "conversation.json")
    _run(["engine", "compress", "--memory-root", str(root), "--input", str(conv)], tmp_path)
    keep = tmp_path / "sim"
    _run(["simulate", "--keep", str(keep)], tmp_path)
    for tree in (root, keep):
        modes = _modes(tree)
        assert any(name.endswith("meta.json") for name in modes), modes  # folders written
        wrong = {
            name: oct(mode)
            for name, mode in modes.items()
            if mode != (0o700 if (tree / name).is_dir() else 0o600)
        }
        assert wrong == {}, wrong

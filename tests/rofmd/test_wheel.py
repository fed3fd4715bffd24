"""The wheel installs one top-level package, `rofmd`, with the engine and handlers
layers inside it (issue 20; `rofmd/__init__.py`), and an installed rofmd loads its own
layers even when another distribution's `engine` / `handlers` come first on the path."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(REPO),
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("rofmd-*.whl")
    return built


def test_one_top_level_package_holding_both_layers(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"rofmd", next(t for t in tops if t.endswith(".dist-info"))}
    for must in (
        "rofmd/_engine/__init__.py",
        "rofmd/_engine/config.json",
        "rofmd/_engine/recall/ranked.py",
        "rofmd/_handlers/inbox.py",
        "rofmd/cli/main.py",
        "rofmd/server/daemon.py",
        "rofmd/systemd/rofmd.service",
    ):
        assert must in names, must
    assert not any("__pycache__" in n for n in names)


def test_the_wheel_carries_the_compiled_recall_loops_when_they_build(wheel: Path) -> None:
    """Built by the wheel's hook (hatch_build.py) where a C compiler is, packed beside
    the engine's relevance code, and the wheel is tagged for this platform."""
    import shutil
    import sysconfig

    cc = str(sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip("no C compiler: a pure-Python wheel")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    names = zipfile.ZipFile(wheel).namelist()
    assert f"rofmd/_engine/relevance/_kernels{suffix}" in names
    assert f"rofmd/_engine/_jsonspans{suffix}" in names  # beside its source, as in the tree
    assert f"rofmd/_engine/store/_dirlist{suffix}" in names
    assert "-py3-none-any" not in wheel.name


def test_an_installed_rofmd_loads_its_own_layers_before_anyone_elses(
    wheel: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # what pip does with a pure-Python wheel
    decoys = tmp_path / "other-distributions"
    for name in ("engine", "handlers"):
        (decoys / name).mkdir(parents=True)
        (decoys / name / "__init__.py").write_text(f'raise ImportError("the other {name}")\n')
    deps = sysconfig.get_paths()["purelib"]  # pydantic & co.; -S skips our editable path
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(decoys), str(site), deps])}
    probe = (
        "import rofmd, engine, handlers, engine.config.paths as paths\n"
        "from engine.config import load_config\n"
        "import rofmd.cli.main, rofmd.server.daemon\n"
        "print(engine.__file__); print(handlers.__file__); print(paths.packaged_config_path())\n"
        "print(load_config(None, {}).config.recall.mode)\n"
        "from engine.relevance import kernels; print(kernels.available())\n"
        "from engine import json_spans; print(json_spans.available())\n"
        "from engine.store import dir_listing; print(dir_listing.state(True) == 'on')\n"
    )

    def python(*args: str) -> subprocess.CompletedProcess[str]:
        """This interpreter without site-packages, on the extracted wheel only."""
        return subprocess.run(
            [sys.executable, "-S", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=tmp_path,
            check=False,
        )

    out = python("-c", probe)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == str(site / "rofmd" / "_engine" / "__init__.py")
    assert lines[1] == str(site / "rofmd" / "_handlers" / "__init__.py")
    assert lines[2] == str(site / "rofmd" / "_engine" / "config.json")
    assert lines[3] == "ranked"
    compiled = any(
        n.startswith("rofmd/_engine/relevance/_kernels") for n in zipfile.ZipFile(wheel).namelist()
    )
    assert lines[4] == str(compiled)  # the wheel's own compiled loops load from it
    spans = any(n.startswith("rofmd/_engine/_jsonspans") for n in zipfile.ZipFile(wheel).namelist())
    assert lines[5] == str(spans)
    listing = any(
        n.startswith("rofmd/_engine/store/_dirlist") for n in zipfile.ZipFile(wheel).namelist()
    )
    assert lines[6] == str(listing)
    version = python("-m", "rofmd", "--version")
    assert version.returncode == 0 and version.stdout.startswith("rofmd "), version.stderr

"""`hatch_build.py` builds the compiled modules (the recall loops, the surface's look-up
in its line, a store directory's listing) where a C compiler is, and says why it did not, without failing, where none
is: their Python paths then serve."""

from __future__ import annotations

import importlib.util
import shutil
import sysconfig
from pathlib import Path

import pytest

import hatch_build


def test_without_a_compiler_it_says_so_and_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    assert hatch_build.compile_kernels(tmp_path / "out") is None
    assert "no C compiler" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_failing_compiler_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CC", "false")  # found, and fails
    assert hatch_build.compile_kernels(tmp_path) is None
    assert "did not build" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_with_a_compiler_the_module_builds_and_loads(tmp_path: Path) -> None:
    cc = str(sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    built = hatch_build.compile_kernels(tmp_path)
    assert built is not None and built.name == hatch_build.module_name()
    spec = importlib.util.spec_from_file_location("_kernels", built)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.score_top) and callable(module.passage_best)
    assert [p.name for p in tmp_path.iterdir()] == [built.name]  # no temp file left


def test_every_compiled_module_builds_and_loads(tmp_path: Path) -> None:
    cc = str(sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    functions = ("score_top", "member_items", "folders_and_others")
    for source, function in zip(hatch_build.SOURCES, functions, strict=True):
        built = hatch_build.compile_kernels(tmp_path / source.stem, source)
        assert built is not None and built.name == hatch_build.module_name(source)
        spec = importlib.util.spec_from_file_location(source.stem, built)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert callable(getattr(module, function))


def test_a_module_that_does_not_build_says_what_serves_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CC", "false")
    assert hatch_build.compile_kernels(tmp_path, hatch_build.SOURCES[1]) is None
    err = capsys.readouterr().err
    assert "_jsonspans.c did not build" in err and "looked up by encoding it" in err
    assert hatch_build.compile_kernels(tmp_path, hatch_build.SOURCES[2]) is None
    err = capsys.readouterr().err
    assert "_dirlist.c did not build" in err and "listed with os.scandir" in err

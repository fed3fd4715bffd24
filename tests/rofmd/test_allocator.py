"""`rofmd serve` re-executes itself on glibc's malloc unless PYTHONMALLOC is set."""

from __future__ import annotations

import os

import pytest

from rofmd.server.allocator import allocator_name, reexec_argv

GLIBC = bool(os.confstr("CS_GNU_LIBC_VERSION")) if hasattr(os, "confstr") else False
PY = "/venv/bin/python"


@pytest.mark.parametrize(
    ("argv0", "orig", "expected"),
    [
        ("/venv/bin/rofmd", [PY, "/venv/bin/rofmd", "serve"], [PY, "/venv/bin/rofmd", "serve"]),
        (
            "/src/rofmd/__main__.py",
            ["python3", "-X", "dev", "-m", "rofmd", "serve", "--socket", "/s"],
            [PY, "-X", "dev", "-m", "rofmd", "serve", "--socket", "/s"],
        ),
        # the CLI code called in-process (a test runner): never replaced
        ("/venv/bin/pytest", [PY, "/venv/bin/pytest", "-q"], None),
        ("-c", [PY, "-c", "..."], None),
    ],
)
def test_reexec_only_the_rofmd_command(
    argv0: str, orig: list[str], expected: list[str] | None
) -> None:
    got = reexec_argv({}, [argv0, "serve"], orig, PY)
    assert got == (expected if GLIBC else None)


@pytest.mark.parametrize("value", ["malloc", "pymalloc", "debug"])
def test_an_explicit_allocator_is_kept(value: str) -> None:
    env = {"PYTHONMALLOC": value}
    assert reexec_argv(env, ["/venv/bin/rofmd", "serve"], [PY, "/venv/bin/rofmd"], PY) is None
    assert allocator_name(env) == value
    assert allocator_name({}) == "pymalloc"

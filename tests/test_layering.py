"""Imports flow rofmd → handlers → engine, never back; engine never touches asyncio."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "engine": {"rofmd", "handlers", "anyio", "asyncio", "trio", "watchfiles", "structlog"},
    "handlers": {"rofmd"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_direction(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files
    offenders = {str(f.relative_to(ROOT)): sorted(_imports(f) & FORBIDDEN[package]) for f in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_engine_reads_no_clock_or_environment() -> None:
    """Time and environment are inputs to the engine, never globals it reads."""
    bad = []
    for f in sorted((ROOT / "engine").rglob("*.py")):
        text = f.read_text(encoding="utf-8")
        for needle in ("time.time(", "datetime.now(", "os.environ", "random.", "time.monotonic("):
            if needle in text:
                bad.append(f"{f.relative_to(ROOT)}: {needle}")
    assert bad == []

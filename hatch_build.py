"""Builds the ranked recall's compiled loops (`engine/relevance/_kernels.c`).

They are optional (`engine/relevance/kernels.py`): without a C compiler, or when the
build fails, this says so on stderr and rofmd runs on its NumPy path, the same picks,
slower. Two callers:

* hatchling, as the wheel's build hook (`pip install .`, `pip wheel .`): the module is
  compiled into a temporary folder and packed as `rofmd/_engine/relevance/…`, and the
  wheel is tagged for this platform;
* `make`, for the source tree the tests and `make run` use (`python hatch_build.py`):
  the module lands beside its source, rebuilt whenever the source changes.

Flags: `-O2`, and `-ffp-contract=off` so that no multiply and add are fused: the loops
must compute the NumPy path's floats exactly.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.config import BuilderConfig
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "engine" / "relevance" / "_kernels.c"
FLAGS = ["-O2", "-fPIC", "-shared", "-std=c11", "-fno-fast-math", "-ffp-contract=off"]


def module_name() -> str:
    """The compiled module's file name for this interpreter."""
    return "_kernels" + str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def compile_kernels(dest: Path) -> Path | None:
    """Compile the loops into `dest`; the module's path, or None (the reason on stderr)."""
    cc = shlex.split(os.environ.get("CC") or str(sysconfig.get_config_var("CC") or "cc"))
    if not cc or shutil.which(cc[0]) is None:
        print(
            f"rofmd: no C compiler ({cc[0] if cc else 'CC'}): the ranked recall runs on "
            "its NumPy path (same picks, slower)",
            file=sys.stderr,
        )
        return None
    include = sysconfig.get_paths()["include"]
    out = dest / module_name()
    dest.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    extra = ["-undefined", "dynamic_lookup"] if sys.platform == "darwin" else []
    cmd = [*cc, *FLAGS, *extra, f"-I{include}", str(SOURCE), "-o", str(tmp)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, reason = False, str(e)
    else:
        ok, reason = done.returncode == 0, done.stderr.strip()
    if not ok:
        tmp.unlink(missing_ok=True)
        print(
            f"rofmd: the compiled loops did not build ({reason or 'no reason given'}): the "
            "ranked recall runs on its NumPy path (same picks, slower)",
            file=sys.stderr,
        )
        return None
    os.replace(tmp, out)
    return out


class KernelsHook(BuildHookInterface[BuilderConfig]):
    """hatchling's build hook: the compiled loops into the wheel, when they build."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        if version == "editable":  # the source tree is on the path: build in place
            compile_kernels(SOURCE.parent)
            return
        built = compile_kernels(Path(tempfile.mkdtemp(prefix="rofmd-kernels-")))
        if built is None:
            return
        build_data["force_include"][str(built)] = f"rofmd/_engine/relevance/{built.name}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True


if __name__ == "__main__":
    compile_kernels(SOURCE.parent)

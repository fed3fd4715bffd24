"""Builds rofmd's optional compiled modules (`engine.compiled`): the ranked recall's
loops (`engine/relevance/_kernels.c`), the surface's look-up in its request line
(`engine/_jsonspans.c`) and a session directory's listing (`engine/store/_dirlist.c`).

They are optional: without a C compiler, or when a build fails, this says so on stderr
and rofmd runs on its Python paths, the same answers, slower. Two callers:

* hatchling, as the wheel's build hook (`pip install .`, `pip wheel .`): each module is
  compiled into a temporary folder and packed beside its source under `rofmd/_engine/`,
  and the wheel is tagged for this platform;
* `make`, for the source tree the tests and `make run` use (`python hatch_build.py`):
  each module lands beside its source, rebuilt whenever a source changes.

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
SOURCES = (SOURCE, HERE / "engine" / "_jsonspans.c", HERE / "engine" / "store" / "_dirlist.c")
"""Every compiled module's source; each module is named after its file."""
FALLBACK = {
    "_kernels": "the ranked recall runs on its NumPy path (same picks, slower)",
    "_jsonspans": "a pre-step's surface is looked up by encoding it (same answers, slower)",
    "_dirlist": "a store's directory is listed with os.scandir (same listing, slower)",
}
"""What runs in each module's place when it is not built."""
FLAGS = ["-O2", "-fPIC", "-shared", "-std=c11", "-fno-fast-math", "-ffp-contract=off"]


def module_name(source: Path = SOURCE) -> str:
    """The file name of the module compiled from `source`, for this interpreter."""
    return source.stem + str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def compile_kernels(dest: Path, source: Path = SOURCE) -> Path | None:
    """Compile `source` (the loops by default) into `dest`; the module's path, or None
    (the reason on stderr)."""
    cc = shlex.split(os.environ.get("CC") or str(sysconfig.get_config_var("CC") or "cc"))
    if not cc or shutil.which(cc[0]) is None:
        print(
            f"rofmd: no C compiler ({cc[0] if cc else 'CC'}): {FALLBACK[source.stem]}",
            file=sys.stderr,
        )
        return None
    include = sysconfig.get_paths()["include"]
    out = dest / module_name(source)
    dest.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    extra = ["-undefined", "dynamic_lookup"] if sys.platform == "darwin" else []
    cmd = [*cc, *FLAGS, *extra, f"-I{include}", str(source), "-o", str(tmp)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, reason = False, str(e)
    else:
        ok, reason = done.returncode == 0, done.stderr.strip()
    if not ok:
        tmp.unlink(missing_ok=True)
        print(
            f"rofmd: {source.name} did not build ({reason or 'no reason given'}): "
            f"{FALLBACK[source.stem]}",
            file=sys.stderr,
        )
        return None
    os.replace(tmp, out)
    return out


class KernelsHook(BuildHookInterface[BuilderConfig]):
    """hatchling's build hook: the compiled modules into the wheel, those that build."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        for source in SOURCES:
            if version == "editable":  # the source tree is on the path: build in place
                compile_kernels(source.parent, source)
                continue
            built = compile_kernels(Path(tempfile.mkdtemp(prefix="rofmd-kernels-")), source)
            if built is None:
                continue
            inside = source.parent.relative_to(HERE / "engine").as_posix()
            packed = "/".join(p for p in ("rofmd/_engine", inside, built.name) if p != ".")
            build_data["force_include"][str(built)] = packed
            build_data["pure_python"] = False
            build_data["infer_tag"] = True


if __name__ == "__main__":
    for source in SOURCES:
        compile_kernels(source.parent, source)

"""rofmd: long-term memory for LLM agents, as a local daemon.

The source tree keeps the three layers as top-level folders (`engine`, `handlers`,
`rofmd`). A wheel must not install top-level packages called `engine` or `handlers`:
other distributions use those names, and pip would let one overwrite the other's files.
So the wheel puts them inside this package, as `rofmd/_engine` and `rofmd/_handlers`,
and importing `rofmd` (every entry point does: the `rofmd` command, `python -m rofmd`)
puts a finder first on `sys.meta_path` that loads `engine` and `handlers` from there.
The code keeps importing `engine…` and `handlers…`; an installed rofmd never reads
another distribution's packages of those names, nor they its. In a source checkout
(an editable install, the tests) the folders are absent here and nothing is installed.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType

_HERE = Path(__file__).resolve().parent
BUNDLED_LAYERS = {"engine": _HERE / "_engine", "handlers": _HERE / "_handlers"}
"""Where a wheel install keeps each layer (absent in a source checkout)."""


class _BundledLayers:
    """Finds the two layer packages inside this package; their submodules then load
    through the packages' own `__path__` as usual."""

    @classmethod
    def find_spec(
        cls, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        where = BUNDLED_LAYERS.get(fullname)
        if where is None:
            return None
        return spec_from_file_location(
            fullname, where / "__init__.py", submodule_search_locations=[str(where)]
        )


if (BUNDLED_LAYERS["engine"] / "__init__.py").is_file() and not any(
    isinstance(f, type) and f.__name__ == "_BundledLayers" for f in sys.meta_path
):
    sys.meta_path.insert(0, _BundledLayers)

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

import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

# os.path, not pathlib, and importlib.util only when a layer is looked up: every command
# imports this module first, and `rofmd status` should not pay for what it never uses
_HERE = os.path.dirname(os.path.realpath(__file__))
BUNDLED_LAYERS = {name: os.path.join(_HERE, "_" + name) for name in ("engine", "handlers")}
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
        from importlib.util import spec_from_file_location

        return spec_from_file_location(
            fullname, os.path.join(where, "__init__.py"), submodule_search_locations=[where]
        )


if os.path.isfile(os.path.join(BUNDLED_LAYERS["engine"], "__init__.py")) and not any(
    isinstance(f, type) and f.__name__ == "_BundledLayers" for f in sys.meta_path
):
    sys.meta_path.insert(0, _BundledLayers)

"""Loading a Python file as a fresh module (an example, a hooks file a test wrote)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def load_file(name: str, path: Path) -> ModuleType:
    """The file at ``path`` executed as a new module ``name`` (not put in
    ``sys.modules``): each call runs it again, under the environment the test set."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

"""Fixtures for the PHY tests: the small scenarios of ``phy_helpers.py``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def load_phy_helpers() -> ModuleType:
    """``tests/phy/phy_helpers.py`` as a module (tests are not a package here)."""
    name = "sitssim_test_phy_helpers"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).resolve().parent / "phy_helpers.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def phy() -> ModuleType:
    return load_phy_helpers()

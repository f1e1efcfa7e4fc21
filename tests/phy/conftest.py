"""Fixtures for the PHY tests: the small scenarios of ``phy_helpers.py``."""

from __future__ import annotations

from types import ModuleType

import pytest
from phy import phy_helpers


@pytest.fixture(scope="session")
def phy() -> ModuleType:
    return phy_helpers

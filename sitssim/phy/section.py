"""What the physical layer reads of a scenario: its config section, and nothing else.

The PHY builds its links from several scenario sections at once (the link profiles,
the ``phy`` device profile, the PHY faults, the drift entries, the seed and the run's
duration), so its section gathers those, and the models depend on their shapes only.
The link profiles and the faults are declared here as the small ``Protocol``s the PHY
reads of them, so this layer needs neither the scenario model nor the union of every
fault kind. Each fault keeps its index in the scenario's ``faults:`` list and each drift
entry is at its position in ``drift:``, so an error names the entry the user wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sitssim.config.phy_profile import ChannelBlock, ChannelDrift, PhyProfile


class LinkSignalling(Protocol):
    """One link profile as the PHY reads it (``scenario.LinkProfile`` is one)."""

    @property
    def rate(self) -> float: ...
    @property
    def lanes(self) -> int: ...
    @property
    def modulation(self) -> str: ...
    @property
    def channel(self) -> ChannelBlock: ...


class LinkFault(Protocol):
    """A PHY fault (one of ``PHY_FAULTS``): the link it names and the profile fields it
    changes for that link's device."""

    @property
    def link(self) -> str: ...
    def overrides(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class PhySection:
    """The PHY stage's section: the link profiles by name, the device profile every PHY
    implements, the PHY faults by index in ``faults:``, the drift entries (in the order
    written), the seed the PHY's streams split from, and the traffic phase's duration."""

    links: Mapping[str, LinkSignalling]
    device: PhyProfile
    faults: tuple[tuple[int, LinkFault], ...]
    drift: tuple[ChannelDrift, ...]
    seed: int
    duration: float

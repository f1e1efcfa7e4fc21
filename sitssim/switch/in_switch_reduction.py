"""A switch's in-network reduction (NVLink SHARP): it combines one piece from every GPU.

Theory of operation
-------------------
Under NVLS a GPU reads a piece of the buffer through a multicast address, and the switch
answers with the sum of that piece over every GPU of the group (``multimem.ld_reduce``;
``docs/ccl_sources.md`` §5.1): the switch takes one contribution of the piece from each GPU,
and once it holds all of them it reduces them and sends the sum on. This core is that
combining, sans I/O: a driver hands it each contribution as it arrives (``contribute``) and
is told, at the last one, when the sum is ready and whose data it holds (a bit mask of
ranks, the symbolic data the collectives track). The switch reduces one piece at a time at
``bytes_per_ns`` of input (no published figure for NVSwitch: infinite by default, so the
links alone limit NVLS); a piece waits for the reduction engine to be free. ``held_bytes``
is what the switch holds of pieces not yet complete, and ``peak_held_bytes`` its largest
value, the buffer a run needed.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass


@dataclass
class _Partial:
    mask: int = 0
    count: int = 0
    held: int = 0


class InSwitchReduction:
    """One switch's reductions over groups of ``contributors`` GPUs."""

    def __init__(self, contributors: int, bytes_per_ns: float = math.inf) -> None:
        if contributors < 1:
            raise ValueError(f"contributors must be >= 1, got {contributors}")
        if not bytes_per_ns > 0:
            raise ValueError(f"bytes_per_ns must be > 0, got {bytes_per_ns}")
        self.contributors = contributors
        self.bytes_per_ns = bytes_per_ns
        self.held_bytes = 0
        self.peak_held_bytes = 0
        self.free_ns = 0.0
        self._partial: dict[Hashable, _Partial] = {}

    def contribute(
        self, piece: Hashable, mask: int, nbytes: int, now: float
    ) -> tuple[float, int] | None:
        """One GPU's contribution of ``nbytes`` to ``piece``, carrying ``mask``, at ``now``;
        at the last one, (when the sum is ready, the mask of the sum), else None."""
        partial = self._partial.get(piece)
        if partial is None:
            partial = self._partial[piece] = _Partial()
        if partial.mask & mask:
            raise ValueError(f"piece {piece!r}: a contribution arrived twice ({mask:#x})")
        partial.mask |= mask
        partial.count += 1
        partial.held += nbytes
        self.held_bytes += nbytes
        self.peak_held_bytes = max(self.peak_held_bytes, self.held_bytes)
        if partial.count < self.contributors:
            return None
        del self._partial[piece]
        start = max(now, self.free_ns)
        self.free_ns = start + partial.held / self.bytes_per_ns
        self.held_bytes -= partial.held
        return self.free_ns, partial.mask

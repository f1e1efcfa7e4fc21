"""TS1/TS2 ordered sets carrying SITS timestamps (L2).

Theory of operation
-------------------
In L0 every link direction sends an ordered set at the flit-mode cadence: one per
``interval_flits`` flit times (default 740, our reading of PCIe 6.x flit mode's SKP
ordered-set cadence on a common-clock link: 1.48 µs at 64 GT/s x16). The sets alternate
TS1, TS2. Each carries a SITS timestamp taken from the *sending* device's own timestamp
clock (``sitssim.fabric.clocks``) when the set leaves, with the PHY clock uncertainty.
A direction's first set goes out at a random phase within one interval (links are not
phase-aligned). Ordered sets take about one flit time in 740 (0.14 % of the link), which
the transport does not charge; sets are generated after the run, vectorised, because
nothing in the fabric depends on them.

A faulty transmitter can send a set without a stamp (``stamp`` is ``None``/NaN), and a
clock that steps back makes later stamps smaller than earlier ones.

The receiver's check of the stamps is :mod:`sitssim.protocol.stamp_checker`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from sitssim.link.flit import flit_time_ns
from sitssim.rng import component_rng

KINDS = ("TS1", "TS2")


class Direction(Protocol):
    """What an ordered set needs of one link direction (``fabric.topology.Channel`` is one),
    declared here because the link layer sits below the fabric and may not import it."""

    @property
    def id(self) -> int: ...
    @property
    def src(self) -> str: ...
    @property
    def dst(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def lanes(self) -> int: ...
    @property
    def rate_gts(self) -> float: ...


class StampClock(Protocol):
    """A sending device's timestamp clock (``fabric.clocks.DeviceClock`` is one)."""

    def read_many(self, t_ns: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class UnstampedSets:
    """A faulty transmitter's omissions on one direction: the first set at or after ``at``,
    or every ``every``-th set (the ``every``-th, ``2·every``-th, ...)."""

    at_ns: float | None = None
    every: int | None = None

    def mask(self, t_ns: np.ndarray) -> np.ndarray:
        seq = np.arange(len(t_ns))
        if self.every is not None:
            return (seq + 1) % self.every == 0
        hit = np.zeros(len(t_ns), dtype=bool)
        later = np.flatnonzero(t_ns >= self.at_ns)
        if len(later):
            hit[later[0]] = True
        return hit


def ordered_set_interval_ns(channel: Direction, interval_flits: int) -> float:
    return interval_flits * flit_time_ns(channel.lanes, channel.rate_gts)


def ordered_sets_table(
    channels: Iterable[Direction],
    clocks: Mapping[str, StampClock],
    interval_flits: int,
    uncertainty_ns: float,
    end_ns: float,
    seed: int,
    unstamped: Mapping[tuple[str, str], Iterable[UnstampedSets]] | None = None,
) -> pd.DataFrame:
    """Every ordered set sent in ``[0, end_ns)``: table ``ordered_sets``.

    ``unstamped`` maps a direction ``(src, dst)`` to the faulty transmitter's omissions.
    """
    unstamped = unstamped or {}
    parts = []
    for ch in channels:
        rng = component_rng(seed, "ordered_sets", ch.name)
        interval = ordered_set_interval_ns(ch, interval_flits)
        phase = rng.uniform(0.0, interval)
        t = phase + interval * np.arange(max(0, math.ceil((end_ns - phase) / interval)))
        stamp = clocks[ch.src].read_many(t)
        if uncertainty_ns > 0:
            stamp = stamp + rng.uniform(-uncertainty_ns, uncertainty_ns, len(t))
        for omission in unstamped.get((ch.src, ch.dst), ()):
            stamp = np.where(omission.mask(t), np.nan, stamp)
        seq = np.arange(len(t), dtype=np.int64)
        a, b = sorted((ch.src, ch.dst))
        parts.append(
            pd.DataFrame(
                {
                    "link": f"{a}-{b}",
                    "direction": ch.name,
                    "channel": np.full(len(t), ch.id, dtype=np.int64),
                    "seq": seq,
                    "kind": np.asarray(KINDS)[seq % 2],
                    "t_true_ns": t,
                    "stamp_ns": stamp,
                }
            )
        )
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    table.insert(0, "os_id", np.arange(len(table), dtype=np.int64))
    return table

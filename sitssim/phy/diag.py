"""``sitssim diag reset``: reset chosen links and report how long each took to reach L0.

The command's wiring (build the fabric, list its links) is ``sitssim.stages.reset``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sitssim.errors import InputError
from sitssim.phy.channel import ChannelProfile
from sitssim.phy.links import PhyLink, resolve_link_name
from sitssim.phy.training import train_links
from sitssim.units import UnitError, parse_time_ns


@dataclass(frozen=True)
class ResetRow:
    link: str
    l0_us: float
    eq_iterations: int
    presets_tried: int
    rounds: int
    passed: bool


def parse_threshold(text: str) -> float:
    """The ``--latency-threshold`` option in ns; ``InputError`` if it is not a positive time."""
    try:
        value = parse_time_ns(text)
    except UnitError as exc:
        raise InputError(str(exc), field="--latency-threshold") from None
    if not value > 0:
        raise InputError(f"expected a positive time, got {text!r}", field="--latency-threshold")
    return value


def choose_links(all_links: list[PhyLink], spec: str, where: str | None = None) -> list[PhyLink]:
    """``all`` or a comma-separated list of link names (endpoints in either order).

    ``where`` (the scenario's path) goes into the error message of an unknown name.
    """
    if spec.strip() == "all":
        return all_links
    by_name = {link.name: link for link in all_links}
    chosen: list[PhyLink] = []
    for text in (part.strip() for part in spec.split(",")):
        name = resolve_link_name(text, by_name) if text else None
        if name is None:
            shown = ", ".join(sorted(by_name)[:8])
            raise InputError(
                f"unknown link {text!r}: give 'all' or link names such as {shown}",
                file=where,
                field="--links",
            )
        if by_name[name] not in chosen:
            chosen.append(by_name[name])
    return chosen


def reset_rows(chosen: list[PhyLink], seed: int, threshold_ns: float) -> list[ResetRow]:
    """Reset ``chosen`` at t = 0, train them to L0, and judge each against ``threshold_ns``."""

    def base_channel(link: PhyLink, _t: float) -> ChannelProfile:
        return link.channel

    rows = []
    for trace in train_links(chosen, seed, base_channel):
        first = trace.first_l0_ns
        last_round = [r for r in trace.eq if r["round"] == trace.rounds]
        rows.append(
            ResetRow(
                link=trace.link.name,
                l0_us=first / 1e3,
                eq_iterations=sum(r["iterations"] for r in last_round),
                presets_tried=sum(r["presets_tried"] for r in last_round),
                rounds=trace.rounds,
                passed=math.isfinite(first) and first <= threshold_ns,
            )
        )
    return rows

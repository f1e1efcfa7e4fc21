"""The fabric's links as the physical layer sees them: names, ends, channels, device profiles.

A *link* is one edge of the fabric graph: two channels (one per direction)
that train together. Its name is ``<a>-<b>`` with the endpoints in sorted
order (``gpu0-sw1.0``, ``rc0-sw2.0``); scenarios may write either order. A
trunk of parallel links (an NVSwitch plane reached by several NVLinks) trains
as one link whose members are alike.

Directions follow the Level-3 EQ convention (``equalizer.EqRecord``):
direction 0 is the downstream port's transmitter to the upstream port's
receiver (tuned in EQ phase 2), direction 1 the reverse (phase 3). The upstream
end is the one nearer the root: root complex, then switches by level, then
GPUs; between equals, the first in sorted order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sitssim.config.phy_profile import ChannelDrift, PhyProfile
from sitssim.errors import InputError
from sitssim.phy.channel import ChannelProfile
from sitssim.phy.pam4 import BITS_PER_SYMBOL
from sitssim.phy.section import PhySection
from sitssim.rng import component_rng

if TYPE_CHECKING:
    import networkx as nx

    from sitssim.errors import Locator


class Direction(Protocol):
    """One link direction as the PHY reads it (``fabric.topology.Channel`` is one)."""

    @property
    def src(self) -> str: ...
    @property
    def dst(self) -> str: ...
    @property
    def profile(self) -> str: ...


class FabricView(Protocol):
    """What the PHY reads of the built fabric (``fabric.topology.Fabric`` is one), declared
    here because the physical layer sits below the fabric and may not import it."""

    @property
    def graph(self) -> nx.Graph: ...
    @property
    def channels(self) -> Iterable[Direction]: ...
    @property
    def channel_index(self) -> Mapping[tuple[str, str], int]: ...
    def node_kind(self, node: str) -> str: ...


# Per-link losses drawn from a spread sit on this grid, so equal losses share a computation.
LOSS_GRID_DB = 0.25


@dataclass(frozen=True)
class PhyLink:
    """One link: its name, ends, channels (by direction) and what its PHY implements."""

    index: int
    name: str
    upstream: str
    downstream: str
    channels: tuple[int, int]
    channel_names: tuple[str, str]
    rate_gts: float
    lanes: int
    bits_per_symbol: int
    channel: ChannelProfile
    device: PhyProfile

    @property
    def ui_ns(self) -> float:
        """One symbol on this link's PHY clock, ns."""
        return self.bits_per_symbol / self.rate_gts

    @property
    def lane_rate_bits_per_ns(self) -> float:
        """Bits per ns over all lanes of the link (one direction)."""
        return self.rate_gts * self.lanes


def link_name(a: str, b: str) -> str:
    return "-".join(sorted((a, b)))


def _rank(fabric: FabricView, node: str) -> tuple[int, int]:
    kind = fabric.node_kind(node)
    if kind == "root_complex":
        return (2, 0)
    if kind == "switch":
        return (1, int(fabric.graph.nodes[node].get("level", 1)))
    return (0, 0)


def _spread_losses(section: PhySection, names: list[str], profile: str) -> dict[str, float]:
    block = section.links[profile].channel
    if block.loss_spread_db == 0:
        return {n: block.loss_db for n in names}
    rng = component_rng(section.seed, "phy", "loss_spread", profile)
    draws = rng.uniform(-block.loss_spread_db, block.loss_spread_db, len(names))
    return {
        n: max(0.0, round((block.loss_db + d) / LOSS_GRID_DB) * LOSS_GRID_DB)
        for n, d in zip(names, draws, strict=True)
    }


def phy_links(section: PhySection, fabric: FabricView) -> list[PhyLink]:
    """Every link of the fabric, in sorted name order, with its channel and device profile."""
    ends = {}
    for ch in fabric.channels:
        a, b = sorted((ch.src, ch.dst))
        ends[link_name(a, b)] = (a, b, ch.profile)
    names = sorted(ends)
    losses: dict[str, float] = {}
    for profile in sorted({p for _, _, p in ends.values()}):
        members = [n for n in names if ends[n][2] == profile]
        losses.update(_spread_losses(section, members, profile))
    overrides: dict[str, dict] = {}
    for _, fault in section.faults:
        name = resolve_link_name(fault.link, ends)
        if name is not None:
            overrides.setdefault(name, {}).update(fault.overrides())
    links = []
    for i, name in enumerate(names):
        a, b, profile_name = ends[name]
        up, down = (a, b) if _rank(fabric, a) >= _rank(fabric, b) else (b, a)
        profile = section.links[profile_name]
        block = profile.channel
        device = section.device
        if name in overrides:
            device = device.model_copy(update=overrides[name])
        links.append(
            PhyLink(
                index=i,
                name=name,
                upstream=up,
                downstream=down,
                channels=(fabric.channel_index[(down, up)], fabric.channel_index[(up, down)]),
                channel_names=(f"{down}>{up}", f"{up}>{down}"),
                rate_gts=profile.rate,
                lanes=profile.lanes,
                bits_per_symbol=BITS_PER_SYMBOL if profile.modulation == "pam4" else 1,
                channel=ChannelProfile(
                    loss_db=losses[name],
                    snr_db=block.snr_db,
                    rj_rms_ui=block.rj_ui,
                    n_pre=block.pre_cursors,
                    n_post=block.post_cursors,
                    dielectric_fraction=block.dielectric_fraction,
                ),
                device=device,
            )
        )
    return links


def resolve_link_name(text: str, known: dict[str, object] | set[str]) -> str | None:
    """The sorted link name ``text`` means (endpoints in either order), or None.

    Node names may contain '-', so every split point is tried.
    """
    if text in known:
        return text
    for i, char in enumerate(text):
        if char == "-":
            candidate = link_name(text[:i], text[i + 1 :])
            if candidate in known:
                return candidate
    return None


def _unknown(where: Locator, loc: tuple, text: str, known: list[str]) -> InputError:
    shown = ", ".join(known[:8]) + (", ..." if len(known) > 8 else "")
    return where.error(
        loc, f"unknown link {text!r}: links are named by their endpoints, e.g. {shown}"
    )


def check_phy_references(section: PhySection, fabric: FabricView, where: Locator) -> None:
    """Raise ``InputError`` for a fault or drift naming an unknown link or a time past the
    run, located through ``where`` (at the scenario's root: the section keeps its indices)."""
    known = sorted({link_name(c.src, c.dst) for c in fabric.channels})
    for i, fault in section.faults:
        if resolve_link_name(fault.link, set(known)) is None:
            raise _unknown(where, ("faults", i, "link"), fault.link, known)
    by_link: dict[str, list[tuple[int, ChannelDrift]]] = {}
    for i, drift in enumerate(section.drift):
        name = resolve_link_name(drift.link, set(known))
        if name is None:
            raise _unknown(where, ("drift", i, "link"), drift.link, known)
        for key in ("start", "end"):
            value = getattr(drift, key)
            if value is not None and value >= section.duration:
                raise where.error(
                    ("drift", i, key),
                    f"{key} {value / 1e3:g} µs is not before the run ends "
                    f"(duration {section.duration / 1e3:g} µs, traffic clock)",
                )
        for j, other in by_link.get(name, []):
            if drift.start < other.last_change_ns and other.start < drift.last_change_ns:
                raise where.error(
                    ("drift", i, "start"),
                    f"overlaps drift entry {j} on link {name}: one drift per link at a time",
                )
        by_link.setdefault(name, []).append((i, drift))

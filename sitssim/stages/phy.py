"""The PHY stage: reset, training, L0 monitoring, tables, outages.

Time base. The PHY tables are on the *PHY clock*: t = 0 is the reset of every
link. The traffic phase starts when the last link that trains reaches L0
(``traffic_start_ns``, reported in the metrics) and lasts the scenario's
``duration``; the transport's clock (messages, probes) is the *traffic clock*,
t_traffic = t_phy - traffic_start_ns. Drift times are on the traffic clock, as
workload times are. BER monitoring runs from each link's own L0 entry to the
end of the traffic phase. A retraining makes its link unavailable to traffic
from the request until the link is back in L0: both of its channels get that
interval as an outage. A link that never reaches L0 is down for the whole
traffic phase (traffic waiting for it leaves when the phase ends).

Recovery on request of the link layer. A REPLAY_NUM rollover (``sitssim.link.flit_link``)
asks :meth:`PhyStage.recover` for a Recovery while the traffic runs, after the traces
above were recorded. The link's LTSSM is walked from L0 through Recovery (RETRAIN, a new
EQ round on the channel in force, back to L0) and the episode is kept beside the trace,
never written into it: ``tables()`` splits the L0 row it interrupts. A request while the
link is already out of L0 (a BER retraining, an earlier episode) joins that outage.

The two directions of a link play their replay sessions one after the other, each ahead
of the traffic clock, so a request can come in for a time before an outage already on
record (the BER monitor's retraining, or an episode the other direction asked for at a
later time). If its own walk would reach L0 before that outage starts, it stands; if not,
it ends where that outage starts and the link is back when the outage ends. Ahead of
another episode, the link is in Recovery.RcvrLock from the request until that episode,
whose walk (starting in RcvrLock too) it joins: the walk that lost is dropped, since cut
it would leave the link in an EQ phase and re-enter RcvrLock from there, which no LTSSM
transition does. Ahead of a BER retraining it is cut there, that departure from the
LTSSM kept: the retraining's row is the monitor's request, which phy.retrain_trigger
judges. The BER monitor's training cycles, counted before the traffic ran, do not see
the episodes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pandas as pd

from sitssim.config.phy_profile import PHY_FAULTS, ChannelDrift
from sitssim.phy.ber_monitor import drifted_channel, monitor
from sitssim.phy.channel import ChannelProfile
from sitssim.phy.links import PhyLink, check_phy_references, phy_links, resolve_link_name
from sitssim.phy.ltssm import State
from sitssim.phy.section import PhySection
from sitssim.phy.training import (
    LinkTrace,
    StateRow,
    group_summaries,
    recovery_episode,
    train_links,
)
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring

if TYPE_CHECKING:
    from sitssim.errors import Locator
    from sitssim.fabric.topology import Fabric
    from sitssim.fabric.transport import Transport
    from sitssim.scenario import Scenario


LINK_COLUMNS = (
    "link",
    "upstream",
    "downstream",
    "channel_up",
    "channel_down",
    "loss_db",
    "snr_db",
    "rj_ui",
    "rate_gts",
    "lanes",
)
STATE_COLUMNS = ("link", "state", "t_enter_ns", "t_exit_ns", "cause", "round")
EQ_COLUMNS = (
    "link",
    "round",
    "phase",
    "t_start_ns",
    "t_end_ns",
    "iterations",
    "presets_tried",
    "presets",
    "preset",
    "ber",
    "method",
    "converged",
)
CDR_COLUMNS = (
    "link",
    "direction",
    "round",
    "t_ns",
    "train_ctrl",
    "integration_ui",
    "lock_time_ui",
    "updates_to_lock",
    "residual_rms_ui",
    "residual_max_ui",
)
CHECK_COLUMNS = (
    "link",
    "direction",
    "round",
    "t_ns",
    "framed",
    "sets",
    "symbols_per_set",
    "checker_order",
    "locked",
    "locks",
    "bits_checked",
    "errors",
    "detected_order",
)
TIMING_COLUMNS = (
    "link",
    "direction",
    "t_start_ns",
    "t_end_ns",
    "gate_ns",
    "symbols",
    "bits_per_symbol",
    "lanes",
)
WINDOW_COLUMNS = ("link", "direction", "t_start_ns", "t_ns", "bits", "errors")
GROUP_COLUMNS = (
    "group",
    "links",
    "loss_db",
    "snr_db",
    "rj_ui",
    "dielectric_fraction",
    "pre_cursors",
    "post_cursors",
    "initial_preset",
    "tx_preset",
    "rx_ffe",
    "rx_ffe_pre",
)


REPLAY_ROLLOVER = "replay_rollover"


def _trained_channel(link: PhyLink, _t_phy: float) -> ChannelProfile:
    return link.channel


@dataclass
class RecoveryEpisode:
    """A Recovery the link layer requested: its walk, and where it sits in the link's trace.

    Times on the PHY clock. ``until_ns`` is where the episode's rows end: its L0 entry,
    or the start of a recorded outage it ran into. ``back_ns`` is when the link is in L0
    again (inf: it gave up and nothing recorded after brings it back). ``joined``: it
    waited in Recovery.RcvrLock for a later-recorded episode and is part of that Recovery.
    """

    walk: LinkTrace
    start_ns: float
    until_ns: float
    back_ns: float
    joined: bool = False


def _finite_or_inf(t: float) -> float:
    return t if math.isfinite(t) else math.inf


def _waiting_in_rcvrlock(walk: LinkTrace, start_ns: float, outage_ns: float) -> LinkTrace:
    """In place of ``walk``, which a recorded outage at ``outage_ns`` overtakes: the link
    in Recovery.RcvrLock from ``start_ns`` until that outage (module docstring)."""
    first = walk.states[0]
    if first.state != State.RECOVERY_RCVRLOCK:
        raise RuntimeError(f"a Recovery walk starts in {first.state}, not Recovery.RcvrLock")
    row = replace(first, t_enter_ns=start_ns, t_exit_ns=outage_ns)
    # The rounds the walk drew from stay counted, so later episodes draw as they did.
    return LinkTrace(link=walk.link, states=[row], rounds=walk.rounds)


def _joined(merged: list[tuple[int, StateRow]], waiting: set[int]) -> list[tuple[int, StateRow]]:
    """``merged`` with the row that follows a waiting episode's (origins ``waiting``) and
    goes on in its state, RcvrLock, folded into it: the episode it joins."""
    out: list[tuple[int, StateRow]] = []
    for origin, row in merged:
        if out and out[-1][0] in waiting:
            before = out[-1][1]
            if before.state == row.state and before.t_exit_ns == row.t_enter_ns:
                out[-1] = (out[-1][0], replace(before, t_exit_ns=row.t_exit_ns))
                continue
        out.append((origin, row))
    return out


def _down_spans(trace: LinkTrace) -> list[tuple[float, float]]:
    """The recorded intervals (PHY clock) in which the link is out of L0."""
    spans, start = [], None
    for row in trace.states:
        if row.state == State.L0:
            if start is not None:
                spans.append((start, row.t_enter_ns))
                start = None
        elif start is None:
            start = row.t_enter_ns
    if start is not None:
        spans.append((start, math.inf))
    return spans


@dataclass
class PhyStage:
    links: list[PhyLink]
    traces: list[LinkTrace]
    windows: list[dict]
    traffic_start_ns: float
    end_ns: float
    groups: list[dict]
    seed: int = 0
    channel_at: Callable[[PhyLink, float], ChannelProfile] = _trained_channel
    episodes: dict[str, list[RecoveryEpisode]] = field(default_factory=dict)

    def recover(self, channel: int, t_traffic_ns: float) -> float:
        """Recovery of the link carrying ``channel``, requested at ``t_traffic_ns`` after a
        REPLAY_NUM rollover; returns when (traffic clock) the link is back in L0.

        A link whose Recovery gives up stays down until the traffic phase ends, as one
        whose BER retraining gives up (:meth:`outages`): traffic waiting for it leaves then.
        """
        t = t_traffic_ns + self.traffic_start_ns
        trace = next(tr for tr in self.traces if channel in tr.link.channels)
        episodes = self.episodes.setdefault(trace.link.name, [])
        # (start, end, whether the link layer asked for it) of every outage on record.
        spans = [(s, e, False) for s, e in _down_spans(trace)]
        spans += [(e.start_ns, e.back_ns, True) for e in episodes]
        for start, end, _ in spans:
            if start <= t < end:
                return self._traffic_time(end, t_traffic_ns)
        rounds_before = episodes[-1].walk.rounds if episodes else trace.rounds
        walk = recovery_episode(
            trace.link, t, self.seed, self.channel_at, rounds_before, REPLAY_ROLLOVER
        )
        reached = next((r.t_enter_ns for r in walk.states if r.state == State.L0), math.inf)
        ahead, ahead_end, rollover_ahead = min(
            ((s, e, asked) for s, e, asked in spans if s > t), default=(math.inf, math.inf, False)
        )
        joined = rollover_ahead and reached > ahead
        if reached <= ahead:
            until, back = reached, reached
        else:
            until, back = ahead, ahead_end
        if joined:
            walk = _waiting_in_rcvrlock(walk, t, ahead)
        episodes.append(
            RecoveryEpisode(walk=walk, start_ns=t, until_ns=until, back_ns=back, joined=joined)
        )
        return self._traffic_time(back, t_traffic_ns)

    def _traffic_time(self, back_phy: float, t_traffic_ns: float) -> float:
        """``back_phy`` (inf: the end of traffic) on the traffic clock, never before the
        request at ``t_traffic_ns``: the request's time on the PHY clock, whose values are
        larger, is rounded, and a back time computed from it can come out half an ulp
        before the request."""
        back = back_phy if math.isfinite(back_phy) else self.end_ns
        return max(back - self.traffic_start_ns, t_traffic_ns)

    def _view(self, trace: LinkTrace) -> LinkTrace:
        """``trace`` with its link's Recovery episodes in place, rounds numbered in time order."""
        episodes = self.episodes.get(trace.link.name)
        if not episodes:
            return trace
        merged = self._merged_states(trace, episodes)
        # A round starts at its EQ phase 0; every row carries the round in force.
        rounds: dict[tuple[int, int], int] = {}
        view = LinkTrace(link=trace.link)
        for origin, row in merged:
            if row.state == State.EQ_PHASE0:
                rounds[(origin, row.round)] = len(rounds) + 1
            view.states.append(replace(row, round=len(rounds)))
        sources = [(0, trace, math.inf)] + [
            (k + 1, e.walk, e.until_ns) for k, e in enumerate(episodes)
        ]
        for origin, source, until in sources:
            for r in source.eq:
                if r["t_start_ns"] < until:
                    row = {**r, "round": rounds[(origin, r["round"])]}
                    if r["t_end_ns"] > until:
                        row.update(t_end_ns=until, converged=False)
                    view.eq.append(row)
            for name in ("cdr", "checks"):
                getattr(view, name).extend(
                    {**r, "round": rounds[(origin, r["round"])]}
                    for r in getattr(source, name)
                    if r["t_ns"] < until
                )
        view.eq.sort(key=lambda r: r["t_start_ns"])
        view.cdr.sort(key=lambda r: r["t_ns"])
        view.checks.sort(key=lambda r: r["t_ns"])
        view.timing = trace.timing
        return view

    @staticmethod
    def _merged_states(
        trace: LinkTrace, episodes: list[RecoveryEpisode]
    ) -> list[tuple[int, StateRow]]:
        """The trace's rows with each episode's rows (clipped at ``until_ns``) splitting the L0
        row it interrupts; each row with its origin (0: the trace, k + 1: episode k)."""
        order = sorted(range(len(episodes)), key=lambda k: episodes[k].start_ns)
        merged: list[tuple[int, StateRow]] = []
        for row in trace.states:
            if row.state != State.L0:
                merged.append((0, row))
                continue
            l0_exit = row.t_exit_ns if math.isfinite(row.t_exit_ns) else math.inf
            # The L0 row in force (origin, row) and when it was entered; None: not in L0.
            current: tuple[int, StateRow] | None = (0, row)
            enter = row.t_enter_ns
            for k in order:
                episode = episodes[k]
                if not row.t_enter_ns <= episode.start_ns < l0_exit:
                    continue
                # None: the episode before ran into this one, which follows it directly.
                if current is not None:
                    origin, l0 = current
                    merged.append(
                        (origin, replace(l0, t_enter_ns=enter, t_exit_ns=episode.start_ns))
                    )
                current = None
                for r in episode.walk.states:
                    if r.state == State.L0:
                        if r.t_enter_ns <= episode.until_ns:
                            current, enter = (k + 1, r), r.t_enter_ns
                        break
                    if r.t_enter_ns >= episode.until_ns:
                        break
                    clipped = min(_finite_or_inf(r.t_exit_ns), episode.until_ns)
                    exit_ns = clipped if math.isfinite(clipped) else math.nan
                    merged.append((k + 1, replace(r, t_exit_ns=exit_ns)))
            if current is not None:
                origin, l0 = current
                merged.append((origin, replace(l0, t_enter_ns=enter, t_exit_ns=row.t_exit_ns)))
        return _joined(merged, {k + 1 for k, e in enumerate(episodes) if e.joined})

    def outages(self) -> list[tuple[int, float, float]]:
        """(channel id, start, end) on the traffic clock, for every interval a link is down."""
        out = []
        duration = self.end_ns - self.traffic_start_ns
        for trace in self.traces:
            spans = []
            if not math.isfinite(trace.first_l0_ns):
                spans.append((0.0, duration))
            for row in trace.states:
                if row.cause == "ber_retrain" and row.state == State.RECOVERY_RCVRLOCK:
                    back = next(
                        (
                            r.t_enter_ns
                            for r in trace.states
                            if r.state == State.L0 and r.t_enter_ns > row.t_enter_ns
                        ),
                        self.end_ns,
                    )
                    start = row.t_enter_ns - self.traffic_start_ns
                    end = back - self.traffic_start_ns
                    if end > 0:
                        spans.append((max(0.0, start), end))
            for start, end in spans:
                for channel in trace.link.channels:
                    out.append((channel, start, end))
        return out

    def apply_outages(self, transport: Transport) -> None:
        for channel, start, end in self.outages():
            transport.ports[channel].add_outage(start, end)

    def tables(self) -> dict[str, pd.DataFrame]:
        views = [self._view(t) for t in self.traces]
        return {
            "phy_links": _frame(
                [
                    {
                        "link": link.name,
                        "upstream": link.upstream,
                        "downstream": link.downstream,
                        "channel_up": link.channel_names[0],
                        "channel_down": link.channel_names[1],
                        "loss_db": link.channel.loss_db,
                        "snr_db": link.channel.snr_db,
                        "rj_ui": link.channel.rj_rms_ui,
                        "rate_gts": link.rate_gts,
                        "lanes": link.lanes,
                    }
                    for link in self.links
                ],
                "link_id",
                LINK_COLUMNS,
            ),
            "link_states": _frame(
                [
                    {
                        "link": t.link.name,
                        "state": row.state.value,
                        "t_enter_ns": row.t_enter_ns,
                        "t_exit_ns": row.t_exit_ns,
                        "cause": row.cause,
                        "round": row.round,
                    }
                    for t in views
                    for row in t.states
                ],
                "state_id",
                STATE_COLUMNS,
            ),
            "eq": _frame([r for t in views for r in t.eq], "eq_id", EQ_COLUMNS),
            "cdr": _frame([r for t in views for r in t.cdr], "cdr_id", CDR_COLUMNS),
            "training_sets": _frame(
                [r for t in views for r in t.checks], "check_id", CHECK_COLUMNS
            ),
            "symbol_timing": _frame(
                [r for t in self.traces for r in t.timing], "timing_id", TIMING_COLUMNS
            ),
            "ber_windows": _frame(self.windows, "window_id", WINDOW_COLUMNS),
            "phy_groups": _frame(self.groups, "group_id", GROUP_COLUMNS),
        }

    def metrics(self) -> dict[str, object]:
        firsts = [t.first_l0_ns for t in self.traces]
        trained = [f for f in firsts if math.isfinite(f)]
        retrains = sum(
            1
            for t in self.traces
            for r in t.states
            if r.cause == "ber_retrain" and r.state == State.RECOVERY_RCVRLOCK
        )
        return {
            "links": len(self.traces),
            "links_trained": len(trained),
            "traffic_start_ns": self.traffic_start_ns,
            "l0_entry_ns": {
                "min": min(trained) if trained else None,
                "max": max(trained) if trained else None,
            },
            "retrains": retrains,
            # Recoveries the link went through: a joined episode is part of another's.
            "replay_recoveries": sum(
                not e.joined for episodes in self.episodes.values() for e in episodes
            ),
        }


def _frame(rows: list[dict], id_column: str, columns: tuple[str, ...]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(columns))
    frame.insert(0, id_column, range(len(frame)))
    return frame


def drifts_by_link(section: PhySection, links: list[PhyLink]) -> dict[str, list[ChannelDrift]]:
    known = {link.name for link in links}
    out: dict[str, list[ChannelDrift]] = {}
    for drift in sorted(section.drift, key=lambda d: d.start):
        name = resolve_link_name(drift.link, known)
        if name is not None:
            out.setdefault(name, []).append(drift)
    return out


def run_phy(section: PhySection, fabric: Fabric, where: Locator) -> PhyStage:
    """Reset and train the fabric's links, then monitor them in L0 until the run ends."""
    check_phy_references(section, fabric, where)
    links = phy_links(section, fabric)
    drifts = drifts_by_link(section, links)

    def base_channel(link: PhyLink, _t: float) -> ChannelProfile:
        return link.channel

    traces = train_links(links, section.seed, base_channel)
    firsts = [t.first_l0_ns for t in traces if math.isfinite(t.first_l0_ns)]
    if firsts:
        traffic_start = max(firsts)
    else:
        traffic_start = max((r.t_enter_ns for t in traces for r in t.states), default=0.0)
    end = traffic_start + section.duration

    def channel_at(link: PhyLink, t_phy: float) -> ChannelProfile:
        return drifted_channel(link.channel, drifts.get(link.name, []), t_phy - traffic_start)

    windows = monitor(traces, end, section.seed, channel_at)
    return PhyStage(
        links=links,
        traces=traces,
        windows=windows,
        traffic_start_ns=traffic_start,
        end_ns=end,
        groups=group_summaries(links, section.seed),
        seed=section.seed,
        channel_at=channel_at,
    )


@dataclass
class _PhyRun(Stage):
    """The PHY stage in a run: its outages on the transport's ports, its tables under their
    own names and its metrics as the ``phy`` section."""

    phy: PhyStage

    def start(self, transport: Transport) -> None:
        self.phy.apply_outages(transport)

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        return self.phy.tables()

    def metrics(self, run: Finished) -> dict[str, object]:
        return {"phy": self.phy.metrics()}


def phy_section(scenario: Scenario) -> PhySection:
    """The link profiles, the ``phy`` device profile, the PHY faults (by index in
    ``faults:``), the drift entries, the seed and the duration: what the links are built
    and trained from."""
    faults = tuple((i, f) for i, f in enumerate(scenario.faults) if isinstance(f, PHY_FAULTS))
    return PhySection(
        links=scenario.links,
        device=scenario.phy,
        faults=faults,
        drift=tuple(scenario.drift),
        seed=scenario.seed,
        duration=scenario.duration,
    )


def _build(section: PhySection, fabric: Fabric, wiring: Wiring, where: Locator) -> _PhyRun:
    phy = run_phy(section, fabric, where)
    wiring.recover = phy.recover
    return _PhyRun(phy)


STAGE = StageSpec(name="phy", section=phy_section, builder=_build, checker=check_phy_references)

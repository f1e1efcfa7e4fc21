"""The physical layer's part of a run: reset, training, L0 monitoring, tables, outages.

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from sitssim.phy.ber_monitor import drifted_channel, monitor
from sitssim.phy.channel import ChannelProfile
from sitssim.phy.links import PhyLink, check_phy_references, phy_links, resolve_link_name
from sitssim.phy.ltssm import State
from sitssim.phy.profile import ChannelDrift
from sitssim.phy.training import LinkTrace, group_summaries, train_links

if TYPE_CHECKING:
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


@dataclass
class PhyStage:
    links: list[PhyLink]
    traces: list[LinkTrace]
    windows: list[dict]
    traffic_start_ns: float
    end_ns: float
    groups: list[dict]

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
                    for t in self.traces
                    for row in t.states
                ],
                "state_id",
                STATE_COLUMNS,
            ),
            "eq": _frame([r for t in self.traces for r in t.eq], "eq_id", EQ_COLUMNS),
            "cdr": _frame([r for t in self.traces for r in t.cdr], "cdr_id", CDR_COLUMNS),
            "training_sets": _frame(
                [r for t in self.traces for r in t.checks], "check_id", CHECK_COLUMNS
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
        }


def _frame(rows: list[dict], id_column: str, columns: tuple[str, ...]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(columns))
    frame.insert(0, id_column, range(len(frame)))
    return frame


def drifts_by_link(scenario: Scenario, links: list[PhyLink]) -> dict[str, list[ChannelDrift]]:
    known = {link.name for link in links}
    out: dict[str, list[ChannelDrift]] = {}
    for drift in sorted(scenario.drift, key=lambda d: d.start):
        name = resolve_link_name(drift.link, known)
        if name is not None:
            out.setdefault(name, []).append(drift)
    return out


def run_phy(scenario: Scenario, fabric: Fabric) -> PhyStage:
    """Reset and train the fabric's links, then monitor them in L0 until the run ends."""
    check_phy_references(scenario, fabric)
    links = phy_links(scenario, fabric)
    drifts = drifts_by_link(scenario, links)

    def base_channel(link: PhyLink, _t: float) -> ChannelProfile:
        return link.channel

    traces = train_links(links, scenario.seed, base_channel)
    firsts = [t.first_l0_ns for t in traces if math.isfinite(t.first_l0_ns)]
    if firsts:
        traffic_start = max(firsts)
    else:
        traffic_start = max((r.t_enter_ns for t in traces for r in t.states), default=0.0)
    end = traffic_start + scenario.duration

    def channel_at(link: PhyLink, t_phy: float) -> ChannelProfile:
        return drifted_channel(link.channel, drifts.get(link.name, []), t_phy - traffic_start)

    windows = monitor(traces, end, scenario.seed, channel_at)
    return PhyStage(
        links=links,
        traces=traces,
        windows=windows,
        traffic_start_ns=traffic_start,
        end_ns=end,
        groups=group_summaries(links, scenario.seed),
    )

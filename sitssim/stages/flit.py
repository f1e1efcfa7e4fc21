"""The flit stage: a ``FlitLink`` per erroneous channel from ``link_layer.flit``, its tables."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from sitssim.config.flit_profile import FlitProfile
from sitssim.errors import Locator
from sitssim.fabric.topology import Fabric
from sitssim.link.flit import BurstModel, flit_error_rates, flit_time_ns
from sitssim.link.flit_link import FlitLink, Recover, ReplayLog
from sitssim.link.replay import NakPolicy, ReplayProfile
from sitssim.rng import component_rng
from sitssim.scenario import Scenario
from sitssim.stages.base import Finished, Stage, StageSpec, Wiring


@dataclass
class FlitStage(Stage):
    """The run's ``FlitLink`` per channel (``None``: error-free) and their replay log."""

    links: list[FlitLink | None]
    fabric: Fabric
    log: ReplayLog = field(default_factory=ReplayLog)

    def tables(self, run: Finished) -> dict[str, pd.DataFrame]:
        log = self.log
        names = [c.name for c in self.fabric.channels]
        return {
            "replays": pd.DataFrame(
                {
                    "replay_id": range(len(log.t_ns)),
                    "link_id": log.link,
                    "link": [names[i] for i in log.link],
                    "seq": log.seq,
                    "event": log.event,
                    "t_ns": log.t_ns,
                    "flits": log.flits,
                    "replay_num": log.replay_num,
                }
            )
        }

    def summary(self) -> dict[str, object]:
        """The stage's figures, as the ``link_layer`` metrics section holds them."""
        modelled = [fl for fl in self.links if fl is not None]
        sent = sum(fl.flits_sent for fl in modelled)
        replayed = sum(fl.flits_replayed for fl in modelled)
        return {
            "links_with_errors": len(modelled) // 2 if modelled else 0,
            "flits_sent": sent,
            "flits_replayed": replayed,
            "replay_fraction": replayed / sent if sent else 0.0,
            "replays": len(self.log.t_ns),
            "recoveries": sum(len(fl.recoveries) for fl in modelled),
            "p_replay_per_flit": max((fl.p_replay for fl in modelled), default=0.0),
        }

    def metrics(self, run: Finished) -> dict[str, object]:
        return {"link_layer": self.summary()}


def replay_probabilities(profile: FlitProfile, fabric: Fabric) -> dict[int, float]:
    """Per-flit replay probability of every modelled flit channel, by channel id (none
    unless ``pre_fec_ber`` is set); one FEC computation per distinct lane count."""
    ber = profile.pre_fec_ber or 0.0
    if ber <= 0:
        return {}
    by_lanes: dict[int, float] = {}
    out: dict[int, float] = {}
    for ch in fabric.channels:
        if ch.encoding != "flit256":
            continue
        if ch.lanes not in by_lanes:
            burst = BurstModel(p_propagate=profile.burst_propagation, lanes=ch.lanes)
            by_lanes[ch.lanes] = float(flit_error_rates(ber, burst).p_replay)
        out[ch.id] = by_lanes[ch.lanes]
    return out


def build_flit_stage(
    profile: FlitProfile, seed: int, fabric: Fabric, recover: Recover
) -> FlitStage:
    """Flit-mode models for the ``flit256`` channels whose pre-FEC BER is above zero.

    ``recover(channel, t_ns)`` times the Recovery a REPLAY_NUM rollover asks for, on the
    traffic clock: the run passes its PHY stage's ``recover``, which retrains the link.
    """
    log = ReplayLog()
    links: list[FlitLink | None] = [None] * len(fabric.channels)
    for ch_id, p_replay in replay_probabilities(profile, fabric).items():
        ch = fabric.channels[ch_id]
        flit_ns = flit_time_ns(lanes=ch.lanes * ch.links, gt_per_s=ch.rate_gts)
        replay = ReplayProfile(
            max_unacknowledged_flits=profile.max_unacknowledged_flits,
            replay_timeout_flits=profile.replay_timeout_flits,
            flit_time_ns=flit_ns,
            replay_num_bits=profile.replay_num_bits,
            nak_policy=NakPolicy.STANDARD
            if profile.nak_policy == "standard"
            else NakPolicy.SELECTIVE,
            selective_hold_flits=0 if profile.nak_policy == "standard" else 8,
        )
        links[ch.id] = FlitLink(
            channel=ch.id,
            flit_ns=flit_ns,
            flight_ns=ch.propagation_ns,
            p_replay=p_replay,
            rng=component_rng(seed, "flit", ch.name),
            profile=replay,
            dllp_ns=profile.dllp_processing,
            recover=recover,
            log=log,
        )
    return FlitStage(links=links, fabric=fabric, log=log)


@dataclass(frozen=True)
class FlitSection:
    """The ``link_layer.flit`` profile and the seed the flit error streams split from."""

    profile: FlitProfile
    seed: int


def flit_section(scenario: Scenario) -> FlitSection:
    return FlitSection(scenario.link_layer.flit, scenario.seed)


def _build(section: FlitSection, fabric: Fabric, wiring: Wiring, where: Locator) -> FlitStage:
    if wiring.recover is None:
        raise ValueError("the flit stage needs the PHY stage's recover: register it after phy")
    stage = build_flit_stage(section.profile, section.seed, fabric, wiring.recover)
    wiring.flit_links = stage.links
    return stage


STAGE = StageSpec(
    name="flit",
    section=flit_section,
    builder=_build,
    packet_only="flit errors, replays and ordered sets on each channel",
)

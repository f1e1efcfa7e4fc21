"""Link training after a reset: the LTSSM walked step by step, each step timed by its physics.

Theory of operation
-------------------
Every link resets at t = 0 (the PHY clock) and walks the LTSSM (``ltssm.py``)
from Detect.Quiet to L0. The driver here times each state as

    duration = (ordered sets exchanged) x (set length x UI)
             + (steps the channel needed) x (device cost per step)
             + (the device's fixed handshake cost for the state),

and feeds the state's outcome to the LTSSM as an event. Step *counts* come from
signal-level simulation of the link's channel:

* EQ phases 1-3: LMS iterations (one per training set of real framed PRBS,
  ``training_source.py``) and Tx presets tried, from ``equalizer.level3_eq_detail``;
  in phases 2 and 3 each preset costs the blocks its receiver needed to re-acquire;
* Recovery.RcvrLock after EQ: CDR phase updates to lock, from ``cdr.run_cdr``
  behind the tuned Tx preset and a linear Rx FFE trained on the same channel,
  with the device's TRAIN_CTRL[7:4] integration window and a phase that starts
  anywhere in the UI (the receiver re-acquires after the Tx presets changed);
* the receiver's framer and PRBS31 checker (``sequence_check.py``) observe the set
  length and verify the training sequences it received after EQ (the final
  evaluation blocks: the sets it decides and checks);
* in Polling.Active each receiver counts its partner's symbols in a gate of its own
  reference clock (``rate_counter.py``): the symbol rate it saw.

Bit lock in Polling.Active, before any EQ, is not simulated at the signal level:
the modelled receiver has no CTLE, and a bang-bang CDR on the raw channel locks
reliably only up to about 4 dB of loss. Polling.Active lasts the 1024 training
sets it must send.

Step *costs* are the device profile's (``phy_profile.PhyCosts``, each with its
source). The UI is the link's own symbol period (bits per symbol / rate): a set
lasts its marker and training sequence in UI. The number of ordered sets per
state (:data:`SETS_PER_STATE`) is the PCIe count (Polling.Active sends 1024, a
handshake state waits for 8 and sends 16, ...), all of the device's training
length. A state that would outlast its PCIe timeout times out instead.

Links whose channel and physics-relevant device parameters are equal form a
group and share one batched signal-level computation (each link direction its
own noise, jitter and PRBS phase), cached per (group, batch size, seed), so a
1000-link fabric trains in seconds. A round that must be repeated (an EQ phase
that failed, a retraining in L0) is computed for that link alone, on the
channel in force at the time. A failed attempt sends the link back to
Detect.Quiet; after :data:`MAX_ATTEMPTS` attempts the model leaves it there
(a real LTSSM keeps cycling Detect).

The receiver proceeds whatever its checker says about the training sequence
(it trains on the symbols it decides); the checker's verdict is recorded for
``phy.training_sequence`` to judge.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from sitssim.config.phy_profile import SPEC_TRAINING_PRBS, PhyProfile
from sitssim.config.presets import PRESET_NAMES
from sitssim.phy.cdr import CdrConfig, integration_ui, run_cdr
from sitssim.phy.channel import ChannelProfile
from sitssim.phy.equalizer import (
    EqProfile,
    EqRecord,
    level3_eq_detail,
    preset_coefficients,
    train_rx_equalizer,
)
from sitssim.phy.framing import set_symbols
from sitssim.phy.links import PhyLink
from sitssim.phy.ltssm import (
    EQ_PHASES,
    TIMEOUT_NS,
    Event,
    Ltssm,
    State,
)
from sitssim.phy.pam4 import slice_symbols
from sitssim.phy.rate_counter import LOCK_SETS, count_symbols
from sitssim.phy.sequence_check import SequenceCheck, check_decisions
from sitssim.phy.training_source import PrbsTrainingSource
from sitssim.rng import component_rng

# Ordered sets (each a marker and a training sequence of the device's length) per state:
# PCIe's Polling.Active sends at least 1024; a handshake state receives 8 and sends 16
# after the first; the Linkwidth/Lanenum states need 2 consecutive; RcvrLock needs 8.
POLLING_ACTIVE_SETS = 1024
SETS_PER_STATE: dict[State, int] = {
    State.POLLING_ACTIVE: POLLING_ACTIVE_SETS,
    State.POLLING_CONFIGURATION: 24,
    State.CONFIG_LINKWIDTH_START: 2,
    State.CONFIG_LINKWIDTH_ACCEPT: 2,
    State.CONFIG_LANENUM_WAIT: 2,
    State.CONFIG_LANENUM_ACCEPT: 2,
    State.CONFIG_COMPLETE: 24,
    State.CONFIG_IDLE: 24,
    State.RECOVERY_RCVRLOCK: 8,
    State.RECOVERY_RCVRCFG: 24,
    State.RECOVERY_IDLE: 24,
}
SUCCESS: dict[State, Event] = {
    State.DETECT_QUIET: Event.QUIET_DONE,
    State.DETECT_ACTIVE: Event.RECEIVER_DETECTED,
    State.POLLING_ACTIVE: Event.TS_LOCKED,
    State.POLLING_CONFIGURATION: Event.TS2_RECEIVED,
    **{s: Event.HANDSHAKE for s in SETS_PER_STATE if s.value.startswith("Configuration")},
    State.RECOVERY_RCVRLOCK: Event.RCVR_LOCKED,
    State.RECOVERY_RCVRCFG: Event.TS2_RECEIVED,
    State.RECOVERY_IDLE: Event.IDLE_RECEIVED,
}
MAX_ATTEMPTS = 3
# The CDR is simulated for at least this long, and for at least this many updates.
CDR_RUN_UI = 1024
CDR_MIN_UPDATES = 64


# --- signal-level physics of one training round ------------------------------------------


@dataclass(frozen=True)
class PhysicsKey:
    """Everything a training round's signal-level outcome depends on (besides noise)."""

    channel: ChannelProfile
    training_prbs: int
    training_symbols: int
    run_eq_phase3: bool
    eq_ber_target: float
    initial_preset: str
    train_ctrl: int

    @classmethod
    def of(cls, channel: ChannelProfile, device: PhyProfile) -> PhysicsKey:
        return cls(
            channel=channel,
            training_prbs=device.training_prbs,
            training_symbols=device.training_symbols,
            run_eq_phase3=device.run_eq_phase3,
            eq_ber_target=device.eq_ber_target,
            initial_preset=device.initial_preset,
            train_ctrl=device.train_ctrl,
        )

    def eq_profile(self) -> EqProfile:
        return EqProfile(
            ber_target=self.eq_ber_target,
            block_symbols=set_symbols(self.training_symbols),
            initial_preset=self.initial_preset,
            skip_phase3=not self.run_eq_phase3,
        )


@dataclass(frozen=True)
class LinkPhysics:
    """One link's training round at the signal level; tuples are per direction."""

    channel: ChannelProfile
    eq: EqRecord
    integration_ui: int
    cdr_lock_ui: tuple[float, float]
    cdr_updates: tuple[int, int]
    cdr_residual_rms_ui: tuple[float, float]
    cdr_residual_max_ui: tuple[float, float]
    checks: tuple[SequenceCheck, SequenceCheck]


@dataclass(frozen=True)
class GroupPhysics:
    """A batch of links' rounds, and the linear Rx FFE its CDR ran behind."""

    links: tuple[LinkPhysics, ...]
    cdr_tx_preset: str
    rx_ffe: tuple[float, ...]
    rx_ffe_pre: int


@lru_cache(maxsize=128)
def group_physics(key: PhysicsKey, n_links: int, seed: int, tag: str) -> GroupPhysics:
    """Train ``n_links`` links sharing ``key`` at the signal level (one batch).

    The CDR draws from a stream of its own, so a change to the equaliser's draws leaves
    the CDR's alone.
    """
    rng = component_rng(seed, "phy", tag, repr(key), n_links)
    eq = key.eq_profile()
    source = PrbsTrainingSource(key.training_prbs, rng, 2 * n_links, key.training_symbols)
    outcome = level3_eq_detail(key.channel, rng, n_links, eq, symbol_source=source)
    # Decided block by block: the joined blocks would be tens of MB at a thousand links.
    decided = np.concatenate([slice_symbols(b) for b in outcome.output_blocks], axis=1)
    checks = check_decisions(decided)

    rng = component_rng(seed, "phy", tag, repr(key), n_links, "cdr")

    presets = Counter(p for r in outcome.records for p in r.tx_presets)
    tx_preset = min(presets, key=lambda p: (-presets[p], PRESET_NAMES.index(p)))
    linear = EqProfile(
        n_dfe=0, block_symbols=key.training_symbols, initial_preset=key.initial_preset
    )
    ffe = train_rx_equalizer(key.channel, rng, 1, tx_preset, linear).rx_ffe[0]
    window = integration_ui(key.train_ctrl)
    config = CdrConfig(
        train_ctrl=key.train_ctrl, duration_ui=max(CDR_RUN_UI, CDR_MIN_UPDATES * window)
    )
    cdr = run_cdr(
        key.channel,
        rng,
        config,
        n_links=2 * n_links,
        tx_ffe=preset_coefficients(tx_preset),
        rx_ffe=ffe,
        rx_ffe_pre=linear.ffe_pre,
    )
    links = []
    for i, record in enumerate(outcome.records):
        d = (i, n_links + i)
        links.append(
            LinkPhysics(
                channel=key.channel,
                eq=record,
                integration_ui=cdr.integration_ui,
                cdr_lock_ui=(float(cdr.lock_time_ui[d[0]]), float(cdr.lock_time_ui[d[1]])),
                cdr_updates=(int(cdr.updates_to_lock[d[0]]), int(cdr.updates_to_lock[d[1]])),
                cdr_residual_rms_ui=(
                    float(cdr.residual_rms_ui[d[0]]),
                    float(cdr.residual_rms_ui[d[1]]),
                ),
                cdr_residual_max_ui=(
                    float(cdr.residual_max_ui[d[0]]),
                    float(cdr.residual_max_ui[d[1]]),
                ),
                checks=(checks[d[0]], checks[d[1]]),
            )
        )
    return GroupPhysics(
        links=tuple(links),
        cdr_tx_preset=tx_preset,
        rx_ffe=tuple(float(c) for c in ffe),
        rx_ffe_pre=linear.ffe_pre,
    )


# --- the LTSSM walk ------------------------------------------------------------------


@dataclass
class StateRow:
    state: State
    t_enter_ns: float
    t_exit_ns: float
    cause: str
    round: int


@dataclass
class LinkTrace:
    """Everything one link did: states, EQ rounds, CDR locks, checks, symbol timing."""

    link: PhyLink
    states: list[StateRow] = field(default_factory=list)
    eq: list[dict] = field(default_factory=list)
    cdr: list[dict] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)
    timing: list[dict] = field(default_factory=list)
    rounds: int = 0
    physics: LinkPhysics | None = None
    ltssm: Ltssm | None = None

    @property
    def in_l0(self) -> bool:
        return bool(self.states) and self.states[-1].state == State.L0

    @property
    def first_l0_ns(self) -> float:
        """When the link first reached L0 after the reset (inf if it never did)."""
        return next((r.t_enter_ns for r in self.states if r.state == State.L0), math.inf)


PhysicsSource = Callable[[int, float], LinkPhysics]


def _phase_cost(
    physics: LinkPhysics, phase: int, device: PhyProfile, block_ns: float
) -> tuple[float, bool]:
    """How long an EQ phase takes, and whether it met its BER target."""
    result = physics.eq.phases[phase]
    costs = device.costs
    duration = (
        costs.eq_handshake
        + len(result.presets_tried) * costs.preset_hold
        + result.iterations * (block_ns + costs.lms_block)
    )
    return duration, result.converged


def _cdr_cost(physics: LinkPhysics, device: PhyProfile, ui_ns: float) -> float:
    """Time until both directions' CDRs have locked (inf if one never did)."""
    if not all(math.isfinite(t) for t in physics.cdr_lock_ui):
        return math.inf
    updates = max(physics.cdr_updates)
    return updates * (physics.integration_ui * ui_ns + device.costs.cdr_update)


class _Walker:
    """Drives one link's LTSSM from a given state until L0 or it gives up."""

    def __init__(self, trace: LinkTrace, source: PhysicsSource) -> None:
        self.trace = trace
        self.link = trace.link
        self.device = trace.link.device
        self.source = source
        self.set_ns = set_symbols(self.device.training_symbols) * self.link.ui_ns
        if trace.ltssm is None:
            trace.ltssm = Ltssm(skip_phase3=not self.device.run_eq_phase3)
        self.ltssm = trace.ltssm

    def _step(self, state: State, t: float) -> tuple[float, Event]:
        costs = self.device.costs
        if state == State.DETECT_QUIET:
            return costs.detect_quiet, SUCCESS[state]
        if state == State.DETECT_ACTIVE:
            return costs.detect_active, SUCCESS[state]
        if state in EQ_PHASES:
            phase = EQ_PHASES.index(state)
            if phase == 0:
                self.trace.rounds += 1
                self.trace.physics = self.source(self.trace.rounds, t)
            assert self.trace.physics is not None
            duration, ok = _phase_cost(self.trace.physics, phase, self.device, self.set_ns)
            return duration, Event.PHASE_DONE if ok else Event.PHASE_FAILED
        duration = SETS_PER_STATE[state] * self.set_ns + costs.state_handshake
        if state == State.POLLING_ACTIVE:
            self._timing_rows(t)
        if state == State.RECOVERY_RCVRLOCK and self.ltssm.eq_complete:
            assert self.trace.physics is not None
            duration += _cdr_cost(self.trace.physics, self.device, self.link.ui_ns)
            self._cdr_rows(t)
        return duration, SUCCESS[state]

    def run(self, t: float, cause: str) -> None:
        """Walk from the LTSSM's current state, entered at ``t`` because of ``cause``."""
        trace, ltssm = self.trace, self.ltssm
        attempts = 1
        while True:
            state = ltssm.state
            row = StateRow(state, t, math.nan, cause, trace.rounds)
            trace.states.append(row)
            if state == State.L0:
                return
            duration, event = self._step(state, t)
            timeout = TIMEOUT_NS.get(state)
            if timeout is not None and duration > timeout:
                duration, event = timeout, Event.TIMEOUT
            if state in EQ_PHASES:
                self._eq_row(EQ_PHASES.index(state), t, duration, event == Event.PHASE_DONE)
            t += duration
            row.t_exit_ns = t
            row.round = trace.rounds
            ltssm.handle(event)
            cause = event.value
            if event in (Event.TIMEOUT, Event.PHASE_FAILED):
                attempts += 1
                if attempts > MAX_ATTEMPTS:
                    trace.states.append(StateRow(ltssm.state, t, math.nan, cause, trace.rounds))
                    return

    def _eq_row(self, phase: int, t: float, duration: float, done: bool) -> None:
        physics = self.trace.physics
        assert physics is not None
        result = physics.eq.phases[phase]
        self.trace.eq.append(
            {
                "link": self.link.name,
                "round": self.trace.rounds,
                "phase": phase,
                "t_start_ns": t,
                "t_end_ns": t + duration,
                "iterations": result.iterations,
                "presets_tried": len(result.presets_tried),
                "presets": ",".join(result.presets_tried),
                "preset": result.preset,
                "ber": math.nan if result.ber is None else result.ber,
                "method": result.method or "",
                "converged": done,
            }
        )

    def _cdr_rows(self, t: float) -> None:
        physics = self.trace.physics
        assert physics is not None
        for d in (0, 1):
            self.trace.cdr.append(
                {
                    "link": self.link.name,
                    "direction": self.link.channel_names[d],
                    "round": self.trace.rounds,
                    "t_ns": t,
                    "train_ctrl": self.device.train_ctrl,
                    "integration_ui": physics.integration_ui,
                    "lock_time_ui": physics.cdr_lock_ui[d],
                    "updates_to_lock": physics.cdr_updates[d],
                    "residual_rms_ui": physics.cdr_residual_rms_ui[d],
                    "residual_max_ui": physics.cdr_residual_max_ui[d],
                }
            )
            check = physics.checks[d]
            self.trace.checks.append(
                {
                    "link": self.link.name,
                    "direction": self.link.channel_names[d],
                    "round": self.trace.rounds,
                    "t_ns": t,
                    "framed": check.framed,
                    "sets": check.sets,
                    "symbols_per_set": check.symbols_per_set,
                    "checker_order": SPEC_TRAINING_PRBS,
                    "locked": check.locked,
                    "locks": check.locks,
                    "bits_checked": check.bits_checked,
                    "errors": check.errors,
                    "detected_order": check.detected_order,
                }
            )

    def _timing_rows(self, t: float) -> None:
        """Each receiver's symbol-rate count over the sets its partner sends from ``t``."""
        count = count_symbols(t, self.link.ui_ns, t + LOCK_SETS * self.set_ns)
        for d in (0, 1):
            self.trace.timing.append(
                {
                    "link": self.link.name,
                    "direction": self.link.channel_names[d],
                    "t_start_ns": count.t_open_ns,
                    "t_end_ns": count.t_close_ns,
                    "gate_ns": count.gate_ns,
                    "symbols": count.symbols,
                    "bits_per_symbol": self.link.bits_per_symbol,
                    "lanes": self.link.lanes,
                }
            )


def single_link_physics(link: PhyLink, channel: ChannelProfile, seed: int, tag: str) -> LinkPhysics:
    """A fresh training round of one link on ``channel`` (a retry or a retraining)."""
    return group_physics(PhysicsKey.of(channel, link.device), 1, seed, tag).links[0]


def train_links(
    links: list[PhyLink], seed: int, channel_at: Callable[[PhyLink, float], ChannelProfile]
) -> list[LinkTrace]:
    """Reset every link at t = 0 and walk each to L0 (or until it gives up).

    ``channel_at(link, t_phy_ns)`` is the link's channel at a time on the PHY clock,
    used for rounds after the first.
    """
    groups: dict[PhysicsKey, list[PhyLink]] = {}
    for link in links:
        groups.setdefault(PhysicsKey.of(link.channel, link.device), []).append(link)
    first: dict[str, LinkPhysics] = {}
    for key, members in groups.items():
        physics = group_physics(key, len(members), seed, "reset")
        for link, result in zip(members, physics.links, strict=True):
            first[link.name] = result

    traces = []
    for link in links:
        trace = LinkTrace(link=link)

        def source(round_: int, t: float, link: PhyLink = link) -> LinkPhysics:
            if round_ == 1:
                return first[link.name]
            return single_link_physics(link, channel_at(link, t), seed, f"{link.name}/{round_}")

        _Walker(trace, source).run(0.0, "reset")
        traces.append(trace)
    return traces


def retrain(
    trace: LinkTrace,
    t: float,
    seed: int,
    channel_at: Callable[[PhyLink, float], ChannelProfile],
    cause: str = "ber_retrain",
    tag: str = "",
) -> None:
    """Dynamic retraining from L0 at ``t``: Recovery, a new EQ round, back to L0.

    Each round's physics is drawn under ``<link>/<tag><round>``: the link's own draw,
    whatever other links do.
    """
    assert trace.in_l0 and trace.ltssm is not None
    trace.states[-1].t_exit_ns = t
    link = trace.link

    def source(round_: int, t_round: float) -> LinkPhysics:
        return single_link_physics(
            link, channel_at(link, t_round), seed, f"{link.name}/{tag}{round_}"
        )

    trace.ltssm.handle(Event.RETRAIN)
    _Walker(trace, source).run(t, cause)


def recovery_episode(
    link: PhyLink,
    t: float,
    seed: int,
    channel_at: Callable[[PhyLink, float], ChannelProfile],
    rounds_before: int,
    cause: str,
) -> LinkTrace:
    """A Recovery that ``cause`` (not the BER monitor) requests of ``link`` in L0 at ``t``.

    The link's LTSSM leaves L0 on RETRAIN, which starts a new EQ round, and is walked to
    L0 (or until it gives up) as :func:`retrain` walks a BER retraining, on the channel
    in force. Returns the episode alone, from its Recovery.RcvrLock row; its rounds are
    numbered on from ``rounds_before`` and their physics drawn under
    ``<link>/<cause>/<round>``, so an episode's draw depends only on its link and index.
    """
    ltssm = Ltssm(skip_phase3=not link.device.run_eq_phase3)
    # The recorded trace has the link in L0 at t, its last EQ round complete.
    ltssm.state = State.L0
    episode = LinkTrace(
        link=link,
        states=[StateRow(State.L0, t, t, cause, rounds_before)],
        rounds=rounds_before,
        ltssm=ltssm,
    )
    retrain(episode, t, seed, channel_at, cause=cause, tag=f"{cause}/")
    episode.states.pop(0)
    return episode


def group_summaries(links: list[PhyLink], seed: int) -> list[dict]:
    """One row per signal-level group of the reset: its channel, Tx preset and Rx FFE."""
    groups: dict[PhysicsKey, list[PhyLink]] = {}
    for link in links:
        groups.setdefault(PhysicsKey.of(link.channel, link.device), []).append(link)
    rows = []
    for g, (key, members) in enumerate(groups.items()):
        physics = group_physics(key, len(members), seed, "reset")
        rows.append(
            {
                "group": g,
                "links": ",".join(m.name for m in members),
                "loss_db": key.channel.loss_db,
                "snr_db": key.channel.snr_db,
                "rj_ui": key.channel.rj_rms_ui,
                "dielectric_fraction": key.channel.dielectric_fraction,
                "pre_cursors": key.channel.n_pre,
                "post_cursors": key.channel.n_post,
                "initial_preset": key.initial_preset,
                "tx_preset": physics.cdr_tx_preset,
                "rx_ffe": list(physics.rx_ffe),
                "rx_ffe_pre": physics.rx_ffe_pre,
            }
        )
    return rows

"""One link's PHY as a Hypothesis state machine: the LTSSM core and the BER monitor, for
conforming and faulty devices (phy.eq_level3, phy.retrain_trigger, phy.reset_to_l0).

One rule per protocol event the PHY takes: electrical idle exit, a receiver detected or
not, training sets locked, TS2s received, a Configuration handshake, the receiver locked,
an EQ phase done (at a BER below its target) or failed, idle data received, a timeout, a
fundamental reset, a directed Hot Reset or Disable, and in L0 a training cycle whose
errors the receivers counted in each direction. The BER monitor
(``ber_monitor.monitor_link``) is handed each cycle's counts and decides whether to ask
for dynamic retraining; if it does, the machine feeds the LTSSM that request (RETRAIN),
as the driver does. A rule fires only where PCIe allows its event; a stray-event rule
sends one PCIe does not allow, which the core must refuse, staying put; and one rule takes
the state's ordinary way on (see ``the_link_moves_on``). Every event takes time on the
machine's clock (1-8 µs per handshake state, 8-60 µs per EQ phase, milliseconds for a
timeout, 0.98 ms per 1e9-bit training cycle), and the machine records the states, EQ
phases and cycles as the training driver does.

The device is drawn with the machine, from the ``faults:`` entry a scenario would give it:
the spec's, or one that skips EQ phase 3, retrains after 2 cycles above 1e-6, or retrains
at 1e-5. The invariants hold what the core did to the spec restated here, never to the
core's own table:

* each step is a step of the PCIe LTSSM (§4.2.6, restated below with SITS's readings),
  Recovery.RcvrLock going on to RcvrCfg exactly when phases 0-3 have succeeded in order
  in the round; the only steps off it are the faulty device's own (phase 2 back to
  RcvrLock, and on to RcvrCfg without phase 3, when it skips phase 3);
* phy.eq_level3: L0 is entered only after EQ phases 0, 1, 2, 3 succeeded in order since
  the round began (Recovery.RcvrLock entered from outside equalisation): never otherwise
  for a conforming device, and never so for one that skips phase 3;
* phy.retrain_trigger: the monitor retrains exactly when the device's own rule, replayed
  here on the counts, says so, and departs from the spec's (3 consecutive cycles above
  1e-6 in some direction, and never otherwise) only for a device with another count or
  threshold;
* phy.reset_to_l0, and the other two against their judges: at the end the judges, fed the
  machine's tables, agree with the test: the time to L0 is what the machine's events took
  since the reset at 0 (infinite if it never got there) against 200 µs; phy.eq_level3
  fails exactly for a phase-3 skipper that reached L0; phy.retrain_trigger fails exactly
  where the test saw a departure.

Under the ``ci`` profile (40 machines) the draws are 19 spec devices, 9 that skip phase 3,
3 that retrain after 2 cycles and 9 at 1e-5; phy.eq_level3 passes 31, fails 8 and has
nothing to judge in 1 (never in L0); phy.retrain_trigger passes 28, fails 11 and has
nothing to judge in 1; phy.reset_to_l0 passes 29 and fails 11 (10 late, 1 never in L0).
The split moves whenever the rules change (``--hypothesis-show-statistics`` prints it).

``test_every_step_of_the_cores_table_is_a_pcie_step`` checks once what the machine reaches
in order; the core's one departure from PCIe the stray-event rule found (a directed Hot
Reset or Disable taken straight from L0) is fixed and pinned by a test at the end.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from phy import phy_helpers as phy

from sitssim.fabric.topology import build_fabric
from sitssim.phy.ber_monitor import monitor_link
from sitssim.phy.links import PhyLink, phy_links
from sitssim.phy.ltssm import Event, Ltssm, LtssmError
from sitssim.phy.training import LinkTrace, StateRow
from sitssim.protocol.ltssm_states import State
from sitssim.spec.registry import JUDGES, RunContext
from sitssim.stages.phy import PhyStage, phy_section

S, E = State, Event

# --- the spec, restated -------------------------------------------------------------

SPEC_WINDOWS, SPEC_THRESHOLD = 3, 1e-6
L0_LIMIT_NS = 200e3
EQ = (S.EQ_PHASE0, S.EQ_PHASE1, S.EQ_PHASE2, S.EQ_PHASE3)
CONFIG = (
    S.CONFIG_LINKWIDTH_START,
    S.CONFIG_LINKWIDTH_ACCEPT,
    S.CONFIG_LANENUM_WAIT,
    S.CONFIG_LANENUM_ACCEPT,
    S.CONFIG_COMPLETE,
    S.CONFIG_IDLE,
)


def _pcie_table() -> dict[tuple[State, Event], frozenset[State]]:
    """(state, event) -> the states PCIe (§4.2.6) allows next, read for SITS: one fixed
    rate, so no Polling.Compliance, Recovery.Speed or lower-speed fallback (a failed or
    timed-out EQ phase starts over from Detect), and equalisation before the first L0
    (Configuration.Idle leads to Recovery, where PCIe passes through L0 at 2.5 GT/s).
    Hot Reset and Disabled are entered from Recovery.Idle (and Disabled from
    Configuration) when directed, never from L0 directly."""
    table: dict[tuple[State, Event], frozenset[State]] = {}

    def allow(state: State, event: Event, *targets: State) -> None:
        table[(state, event)] = frozenset(targets)

    allow(S.DETECT_QUIET, E.QUIET_DONE, S.DETECT_ACTIVE)
    allow(S.DETECT_QUIET, E.TIMEOUT, S.DETECT_ACTIVE)
    allow(S.DETECT_ACTIVE, E.RECEIVER_DETECTED, S.POLLING_ACTIVE)
    allow(S.DETECT_ACTIVE, E.NO_RECEIVER, S.DETECT_QUIET)
    allow(S.DETECT_ACTIVE, E.TIMEOUT, S.DETECT_QUIET)
    allow(S.POLLING_ACTIVE, E.TS_LOCKED, S.POLLING_CONFIGURATION)
    allow(S.POLLING_ACTIVE, E.TIMEOUT, S.DETECT_QUIET)
    allow(S.POLLING_CONFIGURATION, E.TS2_RECEIVED, S.CONFIG_LINKWIDTH_START)
    allow(S.POLLING_CONFIGURATION, E.TIMEOUT, S.DETECT_QUIET)
    for here, there in zip(CONFIG, (*CONFIG[1:], S.RECOVERY_RCVRLOCK), strict=True):
        allow(here, E.HANDSHAKE, there)
        allow(here, E.TIMEOUT, S.DETECT_QUIET)
        allow(here, E.DISABLE_REQ, S.DISABLED)
    # Configuration.Idle's 2 ms timeout goes to Recovery while idle_to_rlock allows it.
    allow(S.CONFIG_IDLE, E.TIMEOUT, S.DETECT_QUIET, S.RECOVERY_RCVRLOCK)
    # Which of the two: the EQ round (phy.eq_level3, checked on its own).
    allow(S.RECOVERY_RCVRLOCK, E.RCVR_LOCKED, S.EQ_PHASE0, S.RECOVERY_RCVRCFG)
    allow(S.RECOVERY_RCVRLOCK, E.TIMEOUT, S.CONFIG_LINKWIDTH_START, S.DETECT_QUIET)
    for phase, after in zip(EQ, (*EQ[1:], S.RECOVERY_RCVRLOCK), strict=True):
        allow(phase, E.PHASE_DONE, after)
        allow(phase, E.PHASE_FAILED, S.DETECT_QUIET)
        allow(phase, E.TIMEOUT, S.DETECT_QUIET)
    allow(S.RECOVERY_RCVRCFG, E.TS2_RECEIVED, S.RECOVERY_IDLE)
    allow(S.RECOVERY_RCVRCFG, E.TIMEOUT, S.DETECT_QUIET)
    allow(S.RECOVERY_IDLE, E.IDLE_RECEIVED, S.L0)
    allow(S.RECOVERY_IDLE, E.TIMEOUT, S.DETECT_QUIET)
    allow(S.RECOVERY_IDLE, E.HOT_RESET_REQ, S.HOT_RESET)
    allow(S.RECOVERY_IDLE, E.DISABLE_REQ, S.DISABLED)
    allow(S.L0, E.RETRAIN, S.RECOVERY_RCVRLOCK)
    allow(S.HOT_RESET, E.TIMEOUT, S.DETECT_QUIET)
    for state in State:
        allow(state, E.RESET, S.DETECT_QUIET)
    return table


PCIE = _pcie_table()
DISRUPTIVE = frozenset(
    {E.NO_RECEIVER, E.PHASE_FAILED, E.TIMEOUT, E.RESET, E.HOT_RESET_REQ, E.DISABLE_REQ}
)


# --- devices ------------------------------------------------------------------------


@dataclass(frozen=True)
class Device:
    """A PHY device as the test knows it: its ``faults:`` entry and the rule it implements."""

    name: str
    fault: tuple[tuple[str, object], ...] = ()
    windows: int = SPEC_WINDOWS
    threshold: float = SPEC_THRESHOLD
    runs_phase3: bool = True


SPEC_DEVICE = Device("spec")
# Half the entries are the spec's device.
DEVICES = (
    Device("skips EQ phase 3", (("kind", "skip_eq_phase3"),), runs_phase3=False),
    SPEC_DEVICE,
    Device("retrains after 2 cycles", (("kind", "retrain_windows"), ("windows", 2)), windows=2),
    SPEC_DEVICE,
    Device("retrains at 1e-5", (("kind", "retrain_threshold"), ("ber", 1e-5)), threshold=1e-5),
    SPEC_DEVICE,
)


@cache
def _link(device: Device) -> PhyLink:
    """The one link of a GPU and a switch, its PHY built from the device's faults: entry."""
    faults = [{**dict(device.fault), "link": "gpu0-s0"}] if device.fault else None
    scenario = phy.star(gpus=1, faults=faults)
    return phy_links(phy_section(scenario), build_fabric(scenario))[0]


class ExactCounter:
    """A receiver's error counter that counts exactly bits x BER: the machine's BER-window
    event says how many errors each direction counted, and the monitor is handed those."""

    def binomial(self, n: int, p: np.ndarray) -> np.ndarray:
        return np.rint(n * np.asarray(p)).astype(np.int64)


# Errors per 1e9-bit cycle: below, at and above 1e-6 (1000) and 1e-5 (10000); a count at
# a threshold is not above it.
ERRORS = st.sampled_from([0, 120, 1000, 1001, 4000, 10_000, 10_001, 60_000])
CYCLE_ERRORS = st.tuples(ERRORS, ERRORS)
US = 1e3
HANDSHAKE_NS = st.integers(1_000, 8_000).map(float)
EQ_PHASE_NS = st.integers(8_000, 60_000).map(float)
TIMEOUT_NS = st.sampled_from([2e6, 12e6, 24e6, 32e6, 48e6])
# An EQ phase's final BER against its target, 1e-4 (one at the target has not met it).
BELOW_TARGET = st.sampled_from([1e-12, 3e-8, 9e-5])
ABOVE_TARGET = st.sampled_from([1e-4, 3e-3])


Precondition = Callable[["PhyLinkMachine"], bool]


def _legal(event: Event) -> Precondition:
    return lambda self: (self.core.state, event) in PCIE


def _legal_disruption(event: Event) -> Precondition:
    return lambda self: (self.core.state, event) in PCIE and self.disruptions > 0


class PhyLinkMachine(RuleBasedStateMachine):
    """A link reset at t = 0; the device drawn with it (see the module docstring).

    phy.eq_level3, phy.retrain_trigger and phy.reset_to_l0, each on both sides."""

    @initialize(
        device=st.sampled_from(DEVICES),
        disruptions=st.integers(0, 3),
        strays=st.integers(0, 4),
    )
    def reset_at_zero(self, device: Device, disruptions: int, strays: int) -> None:
        self.device, self.link = device, _link(device)
        self.core = Ltssm(skip_phase3=not self.link.device.run_eq_phase3)
        self.disruptions, self.strays = disruptions, strays
        self.bits = self.link.device.training_cycle_bits
        self.window_ns = self.bits / self.link.lane_rate_bits_per_ns
        self.now = 0.0
        self.trace = LinkTrace(
            link=self.link, states=[StateRow(S.DETECT_QUIET, 0.0, math.nan, "reset", 0)]
        )
        self.windows: list[dict] = []
        # Steps off the PCIe table, and those the device's fault explains.
        self.illegal: list[tuple[State, Event, State]] = []
        self.explained: list[tuple[State, Event, State]] = []
        # The test's own records: the EQ round, L0 entries, retraining against both rules.
        self.round_phases: list[int] = []
        self.l0_entries = 0
        self.l0_without_level3 = 0
        self.first_l0_ns = math.inf
        self.cycles: list[tuple[int, int]] = []
        self.interval_judged = False
        self.departures = 0

    # --- driving the core, and recording as the training driver does ---------------

    def send(self, event: Event, dt: float, cause: str | None = None) -> None:
        before = self.core.state
        self.now += dt
        self.core.handle(event)  # legal under PCIe, so the core must take it
        after = self.core.state
        self.check_step(before, event, after)
        self.trace.states[-1].t_exit_ns = self.now
        if after == S.EQ_PHASE0:
            self.trace.rounds += 1
        self.trace.states.append(
            StateRow(after, self.now, math.nan, cause or event.value, self.trace.rounds)
        )
        self.observe(before, event, after)

    def check_step(self, before: State, event: Event, after: State) -> None:
        allowed = PCIE[(before, event)]
        complete = self.round_phases == [0, 1, 2, 3]
        if event == E.RCVR_LOCKED:
            # Recovery goes on to RcvrCfg exactly when the round has run phases 0-3.
            allowed = frozenset({S.RECOVERY_RCVRCFG if complete else S.EQ_PHASE0})
        if after not in allowed:
            self.illegal.append((before, event, after))
        skipper = not self.device.runs_phase3
        if skipper and (
            (before, event) == (S.EQ_PHASE2, E.PHASE_DONE)
            or (event == E.RCVR_LOCKED and self.round_phases == [0, 1, 2])
        ):
            self.explained.append((before, event, after))

    def observe(self, before: State, event: Event, after: State) -> None:
        if after == S.RECOVERY_RCVRLOCK and before not in EQ:
            self.round_phases = []
        if event == E.PHASE_DONE:
            self.round_phases.append(EQ.index(before))
        if after == S.L0:
            self.l0_entries += 1
            self.l0_without_level3 += self.round_phases != [0, 1, 2, 3]
            self.first_l0_ns = min(self.first_l0_ns, self.now)
            self.cycles, self.interval_judged = [], False

    def eq_row(self, phase: State, dt: float, ber: float, done: bool) -> None:
        self.trace.eq.append(
            {
                "link": self.link.name,
                "round": self.trace.rounds,
                "phase": EQ.index(phase),
                "t_start_ns": self.now,
                "t_end_ns": self.now + dt,
                "iterations": 1,
                "presets_tried": 1,
                "presets": "Q4",
                "preset": "Q4",
                "ber": ber,
                "method": "",
                "converged": done,
            }
        )

    def disrupt(self, event: Event, dt: float) -> None:
        self.disruptions = max(0, self.disruptions - 1)
        if self.core.state in EQ:
            self.eq_row(self.core.state, dt, math.nan, False)
        self.send(event, dt)

    # --- one rule per event -------------------------------------------------------

    @precondition(_legal(E.QUIET_DONE))
    @rule(dt=HANDSHAKE_NS)
    def electrical_idle_exit(self, dt: float) -> None:
        self.send(E.QUIET_DONE, dt)

    @precondition(_legal(E.RECEIVER_DETECTED))
    @rule(dt=HANDSHAKE_NS)
    def receiver_detected(self, dt: float) -> None:
        self.send(E.RECEIVER_DETECTED, dt)

    @precondition(_legal_disruption(E.NO_RECEIVER))
    @rule(dt=HANDSHAKE_NS)
    def no_receiver(self, dt: float) -> None:
        self.disrupt(E.NO_RECEIVER, dt)

    @precondition(_legal(E.TS_LOCKED))
    @rule(dt=HANDSHAKE_NS)
    def training_sets_locked(self, dt: float) -> None:
        self.send(E.TS_LOCKED, dt)

    @precondition(_legal(E.TS2_RECEIVED))
    @rule(dt=HANDSHAKE_NS)
    def ts2_received(self, dt: float) -> None:
        self.send(E.TS2_RECEIVED, dt)

    @precondition(_legal(E.HANDSHAKE))
    @rule(dt=HANDSHAKE_NS)
    def configuration_handshake(self, dt: float) -> None:
        self.send(E.HANDSHAKE, dt)

    @precondition(_legal(E.RCVR_LOCKED))
    @rule(dt=HANDSHAKE_NS)
    def receiver_locked(self, dt: float) -> None:
        self.send(E.RCVR_LOCKED, dt)

    @precondition(_legal(E.PHASE_DONE))
    @rule(dt=EQ_PHASE_NS, ber=BELOW_TARGET)
    def eq_phase_done(self, dt: float, ber: float) -> None:
        self.eq_row(self.core.state, dt, ber, True)
        self.send(E.PHASE_DONE, dt)

    @precondition(_legal_disruption(E.PHASE_FAILED))
    @rule(dt=EQ_PHASE_NS, ber=ABOVE_TARGET)
    def eq_phase_failed(self, dt: float, ber: float) -> None:
        self.disruptions -= 1
        self.eq_row(self.core.state, dt, ber, False)
        self.send(E.PHASE_FAILED, dt)

    @precondition(_legal(E.IDLE_RECEIVED))
    @rule(dt=HANDSHAKE_NS)
    def idle_received(self, dt: float) -> None:
        self.send(E.IDLE_RECEIVED, dt)

    @precondition(lambda self: _legal_disruption(E.TIMEOUT)(self) or self.core.state == S.HOT_RESET)
    @rule(dt=TIMEOUT_NS)
    def timeout(self, dt: float) -> None:
        self.disrupt(E.TIMEOUT, dt)

    @precondition(lambda self: self.disruptions > 0 or self.core.state == S.DISABLED)
    @rule(dt=HANDSHAKE_NS)
    def fundamental_reset(self, dt: float) -> None:
        self.disrupt(E.RESET, dt)

    @precondition(_legal_disruption(E.HOT_RESET_REQ))
    @rule(dt=HANDSHAKE_NS)
    def directed_hot_reset(self, dt: float) -> None:
        self.disrupt(E.HOT_RESET_REQ, dt)

    @precondition(_legal_disruption(E.DISABLE_REQ))
    @rule(dt=HANDSHAKE_NS)
    def directed_disable(self, dt: float) -> None:
        self.disrupt(E.DISABLE_REQ, dt)

    @precondition(lambda self: self.core.state == S.L0)
    @rule(errors=CYCLE_ERRORS)
    def ber_window(self, errors: tuple[int, int]) -> None:
        """A training cycle in L0: the monitor is handed the two directions' error counts
        of every cycle since L0 was entered, and asks for retraining if they call for it."""
        self.cycles.append(errors)
        t0 = self.trace.states[-1].t_enter_ns
        counts = np.array(self.cycles, dtype=float).T
        requested: list[float] = []

        def ber_at(mids: np.ndarray) -> np.ndarray:
            return counts[:, ((mids - t0) // self.window_ns).astype(int)] / self.bits

        def retrain_at(t: float) -> None:
            requested.append(t)
            self.send(E.RETRAIN, t - self.now, cause="ber_retrain")

        end = t0 + len(self.cycles) * self.window_ns
        rows = monitor_link(self.trace, end, ExactCounter(), ber_at, retrain_at)
        self.now = end
        # Every cycle since L0 was entered, once per direction, the last one new.
        assert len(rows) == 2 * len(self.cycles)
        assert [r["errors"] for r in rows[-2:]] == list(errors)
        self.windows.extend(rows[-2:])
        assert requested in ([], [end])
        self.judge_cycle(bool(requested))

    def judge_cycle(self, retrained: bool) -> None:
        """The device's rule and the spec's, replayed on the counts the cycles measured."""
        device_due, spec_due = (
            any(_run(self.cycles, d, threshold, self.bits) >= windows for d in (0, 1))
            for windows, threshold in (
                (self.device.windows, self.device.threshold),
                (SPEC_WINDOWS, SPEC_THRESHOLD),
            )
        )
        assert retrained == device_due
        if not self.interval_judged and (retrained or spec_due):
            self.interval_judged = True
            self.departures += retrained != spec_due

    @rule(data=st.data())
    def the_link_moves_on(self, data: st.DataObject) -> None:
        """The state's ordinary way on, through the rule of its event. Hypothesis's swarm
        testing switches a random subset of rules off in each example: without this rule a
        link whose one way on is off would be stuck, and the example discarded."""
        state = self.core.state
        if state == S.L0:
            self.ber_window(data.draw(CYCLE_ERRORS, label="errors"))
        elif state in EQ:
            self.eq_phase_done(data.draw(EQ_PHASE_NS), data.draw(BELOW_TARGET))
        elif state == S.HOT_RESET:
            self.disrupt(E.TIMEOUT, data.draw(TIMEOUT_NS))
        elif state == S.DISABLED:
            self.disrupt(E.RESET, data.draw(HANDSHAKE_NS))
        else:
            (way_on,) = (e for s, e in PCIE if s == state and e not in DISRUPTIVE)
            self.send(way_on, data.draw(HANDSHAKE_NS, label="dt"))

    @precondition(lambda self: self.strays > 0)
    @rule(data=st.data())
    def stray_event(self, data: st.DataObject) -> None:
        """An event PCIe does not allow here: refused, and nothing changes."""
        state = self.core.state
        strays = [e for e in Event if (state, e) not in PCIE]
        stray = data.draw(st.sampled_from(strays), label="stray")
        self.strays -= 1
        with pytest.raises(LtssmError):
            self.core.handle(stray)
        assert self.core.state == state
        assert stray not in self.core.allowed()

    # --- invariants -----------------------------------------------------------------

    @invariant()
    def every_step_is_pcie_but_the_faults_own(self) -> None:
        assert self.illegal == self.explained

    @invariant()
    def l0_only_after_eq_phases_0_to_3(self) -> None:
        """phy.eq_level3"""
        expected = 0 if self.device.runs_phase3 else self.l0_entries
        assert self.l0_without_level3 == expected

    @invariant()
    def retraining_departs_from_the_spec_only_for_a_faulty_rule(self) -> None:
        """phy.retrain_trigger"""
        if (self.device.windows, self.device.threshold) == (SPEC_WINDOWS, SPEC_THRESHOLD):
            assert self.departures == 0

    def teardown(self) -> None:
        """The judges on the machine's tables agree with the test's own records
        (phy.reset_to_l0: the time to L0 is what the events took)."""
        if not hasattr(self, "core") or sys.exc_info()[0] is not None:
            # Nothing to add to a run already ending on an exception: an invariant failed,
            # or Hypothesis discarded the example (its swarm testing had switched off the
            # one rule that could move the link on).
            return
        stage = PhyStage([self.link], [self.trace], self.windows, 0.0, self.now, [])
        ctx = RunContext(tables=stage.tables())
        verdicts = {
            c: JUDGES[c](ctx) for c in ("phy.eq_level3", "phy.retrain_trigger", "phy.reset_to_l0")
        }
        expected_eq = (
            "n/a" if not self.l0_entries else "pass" if self.device.runs_phase3 else "fail"
        )
        assert verdicts["phy.eq_level3"].verdict == expected_eq
        expected_retrain = "n/a" if not self.windows else "fail" if self.departures else "pass"
        assert verdicts["phy.retrain_trigger"].verdict == expected_retrain
        reset = verdicts["phy.reset_to_l0"]
        assert reset.measured == self.first_l0_ns / US
        assert reset.verdict == ("pass" if self.first_l0_ns <= L0_LIMIT_NS else "fail")
        event(f"device: {self.device.name}")
        for clause, verdict in verdicts.items():
            event(f"{clause} {verdict.verdict}")
        if not math.isfinite(self.first_l0_ns):
            event("phy.reset_to_l0: never in L0")


def _run(cycles: list[tuple[int, int]], direction: int, threshold: float, bits: float) -> int:
    """How many cycles in a row, up to the last, direction ``direction`` measured above
    ``threshold`` (errors over the cycle's bits)."""
    run = 0
    for counts in cycles:
        run = run + 1 if counts[direction] / bits > threshold else 0
    return run


TestPhyLinkMachine = PhyLinkMachine.TestCase
TestPhyLinkMachine.settings = settings(stateful_step_count=60)


@pytest.mark.parametrize("directed", [E.HOT_RESET_REQ, E.DISABLE_REQ])
def test_a_directed_hot_reset_or_disable_is_refused_in_l0_and_taken_in_recovery_idle(
    directed: Event,
) -> None:
    """Found by the machine's stray-event rule: L0 took HOT_RESET_REQ and DISABLE_REQ
    straight to Hot Reset and Disabled. PCIe (§4.2.6) enters both from Recovery.Idle, so
    a port directed from L0 retrains first. No driver sends either today, so no run
    showed it."""
    core = Ltssm()
    core.state = S.L0
    assert directed not in core.allowed()
    core.state = S.RECOVERY_IDLE
    core.handle(directed)
    assert core.state == (S.HOT_RESET if directed == E.HOT_RESET_REQ else S.DISABLED)


def _at(state: State, complete: bool) -> Ltssm:
    """A spec device's LTSSM in ``state``; in Recovery.RcvrLock with its EQ round complete
    or not, walked there through the events PCIe expects."""
    core = Ltssm()
    if state == S.RECOVERY_RCVRLOCK and complete:
        walk = [E.QUIET_DONE, E.RECEIVER_DETECTED, E.TS_LOCKED, E.TS2_RECEIVED]
        for step in [*walk, *[E.HANDSHAKE] * len(CONFIG), E.RCVR_LOCKED, *[E.PHASE_DONE] * 4]:
            core.handle(step)
        assert core.state == state
    else:
        core.state = state
    return core


@pytest.mark.parametrize("state", list(State))
def test_every_step_of_the_cores_table_is_a_pcie_step(state: State) -> None:
    """What the machine reaches in order, checked once per (state, event), for the spec's
    device: each event PCIe allows is taken, to a state PCIe allows (Recovery.RcvrLock
    to RcvrCfg only once the EQ round is complete), and every other event is refused
    (phy.eq_level3)."""
    for complete in (False, True) if state == S.RECOVERY_RCVRLOCK else (False,):
        for sent in Event:
            core = _at(state, complete)
            allowed = PCIE.get((state, sent))
            if sent == E.RCVR_LOCKED and allowed:
                allowed = frozenset({S.RECOVERY_RCVRCFG if complete else S.EQ_PHASE0})
            if allowed is None:
                with pytest.raises(LtssmError):
                    core.handle(sent)
            elif allowed is not None:
                assert core.handle(sent).target in allowed, (state, sent)

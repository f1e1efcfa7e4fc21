"""Instruments that watch one whole run as it happens (``test_random_runs.py``).

:func:`observed_run` is ``sitssim.simulation.simulate`` with its packet transport built
as an :class:`ObservedTransport` and the LTSSM's ``handle`` wrapped, so that every stage
and workload runs as in production while a :class:`RunObserver` sees each event and
checks, at that event:

* **messages**: each message id is injected once; it leaves a node only from the node it
  is at (the near end of the port it starts on), arrives only over the channel it was
  sent on, and is delivered once, at its destination: a message is always in exactly
  one place, on one channel's wire or at one node.
* **buffers**: an input-queued switch's buffer per (input, VC) never holds more than its
  ``input_buffer`` messages, counted from the arrivals into that switch less the messages
  it sent on, never read back from the switch's own counters.
* **credits**, per credited channel and (VC, class) pool, from the port events:
  a message is charged one header credit and ceil(min(bytes, max_payload) / 16 B) data
  credits of its pool (and the port charged it exactly that). Conservation: what the
  sender holds and the UpdateFCs on their way back to it (the model's sender side), plus
  the credits of messages on the wire and of messages waiting uncommitted in the far
  buffer (counted here), equal the advertisement after every event of that channel. The
  physical bounds, counted here alone: when a message starts on the wire, the sender
  holds ``advertised - taken + returned >= 0`` of each kind, where returned counts the
  UpdateFCs sent so far that are back by then (each due the reverse flight plus
  ``update_delay`` after its message left the far buffer), and the model's own count is
  never above that; at each arrival the far buffer (messages arrived and not yet gone,
  committed or not) holds at most the advertisement. Each message that crossed leaves
  that buffer exactly once (committed at once, or held and then released), never
  before it arrived. At the end of a run that went idle every pool is whole again.
* **LTSSM**: every transition a link's machine takes is a row of the transition table and
  starts from the state the previous one left it in (no state set behind the table's
  back); each link's ``link_states`` rows follow legal transitions, each row entered when
  the one before was left.

:meth:`RunObserver.check_end` adds what only the end can show: in a run that went idle
every message was delivered; in one a watchdog stopped, every message not delivered is
still somewhere the model knows of (on a wire with its arrival event pending, or waiting
in a switch buffer, a port's queue or an endpoint's answer queue), so none is lost. The
``messages`` table says what happened: each delivery time, hop count and path is the one
observed, and every serialisation the ports counted was seen.

The hot path is the engine's own: the watched port classes are composed onto the
production ones through ``Transport.port_class`` when the fabric is built, and a run
without the observer builds exactly the classes it always did.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar
from unittest.mock import patch

import numpy as np
import pandas as pd

from sitssim import simulation
from sitssim.fabric.messages import FC_CLASS_OF_KIND
from sitssim.fabric.nodes import AnsweringEndpoint
from sitssim.fabric.ports import CreditedPort, Hop, OutputPort
from sitssim.fabric.transport import Transport
from sitssim.link.credit_link import N_CLASSES, Cost
from sitssim.link.credits import DATA_CREDIT_BYTES
from sitssim.phy.ltssm import EQ_PHASES, TRANSITIONS, Event, Ltssm
from sitssim.protocol.ltssm_states import State
from sitssim.scenario import Scenario
from sitssim.simulation import RunResult
from sitssim.switch.input_queued import InputQueuedSwitch

LEGAL_STEPS = frozenset((t.source, t.event, t.target) for t in TRANSITIONS)
LEGAL_EDGES = frozenset((t.source.value, t.target.value) for t in TRANSITIONS)
# A machine starts in Detect.Quiet; a Recovery episode's starts in L0, where the trace it
# continues left its link.
FIRST_STATES = frozenset({State.DETECT_QUIET, State.L0})


class Violation(AssertionError):
    """An invariant the observed run broke, at the event that broke it or at its end."""


class ChannelLedger:
    """The credits of one credited channel, from its port's events (module docstring)."""

    def __init__(
        self,
        port: CreditedPort,
        name: str,
        advertised: tuple[int, int],
        max_payload: int,
        return_ns: float,
    ) -> None:
        self.port = port
        self.name = name
        self.adv = advertised
        self.max_payload = max_payload
        self.return_ns = return_ns
        self.taken: defaultdict[int, list[int]] = defaultdict(lambda: [0, 0])
        self.back: defaultdict[int, list[int]] = defaultdict(lambda: [0, 0])
        # UpdateFCs sent and not yet counted back at the sender: (t_back, order, cost).
        self.updates: list[tuple[float, int, Cost]] = []
        self.on_wire: dict[int, Cost] = {}
        # Arrived in the far buffer and not yet committed to leave it: cost, held.
        self.waiting: dict[int, tuple[Cost, bool]] = {}
        # Committed to leave the far buffer, not gone yet: (t_leave, order, cost).
        self.leaving: list[tuple[float, int, Cost]] = []
        self.in_buffer: defaultdict[int, list[int]] = defaultdict(lambda: [0, 0])
        self.filled = False
        """Some arrival found the far buffer's room exactly used up."""
        self._order = 0

    def cost(self, transport: Transport, msg: int) -> Cost:
        pool = transport.vc[msg] * N_CLASSES + FC_CLASS_OF_KIND[transport.kind[msg]]
        held = min(transport.size[msg], self.max_payload)
        return (
            pool,
            1 if self.adv[0] else 0,
            -(-held // DATA_CREDIT_BYTES) if self.adv[1] else 0,
        )

    def _conserved(self, pool: int, event: str) -> None:
        """Sender's credits and UpdateFCs on their way (the model's) + on the wire + waiting
        in the far buffer (counted here) = the advertisement, for ``pool``."""
        credit = self.port.credit
        total = [credit.avail_hdr[pool], credit.avail_data[pool]]
        for _, (p, hdr, data) in credit.returning:
            if p == pool:
                total[0] += hdr
                total[1] += data
        for places in (self.on_wire.values(), (c for c, _ in self.waiting.values())):
            for p, hdr, data in places:
                if p == pool:
                    total[0] += hdr
                    total[1] += data
        for kind in (0, 1):
            if self.adv[kind] and total[kind] != self.adv[kind]:
                raise Violation(
                    f"{self.name} pool {pool} after {event}: sender + returning + wire + "
                    f"far buffer = {total} credits, advertised {self.adv}"
                )

    def grant(self, transport: Transport, msg: int, start: float) -> None:
        """``msg`` was committed to the wire, to start at ``start``."""
        cost = self.cost(transport, msg)
        if tuple(self.port.costs[msg]) != cost:
            charged = self.port.costs[msg]
            raise Violation(f"{self.name}: message {msg} charged {charged}, not {cost}")
        pool, hdr, data = cost
        updates = self.updates
        while updates and updates[0][0] <= start:
            _, _, (p, h, d) = heapq.heappop(updates)
            self.back[p][0] += h
            self.back[p][1] += d
        taken, back = self.taken[pool], self.back[pool]
        taken[0] += hdr
        taken[1] += data
        model = (self.port.credit.avail_hdr[pool], self.port.credit.avail_data[pool])
        for kind in (0, 1):
            if not self.adv[kind]:
                continue
            held = self.adv[kind] - taken[kind] + back[kind]
            if held < 0:
                raise Violation(
                    f"{self.name}: message {msg} started at {start} ns without credit: the "
                    f"sender held {held + cost[1 + kind]} of the {cost[1 + kind]} "
                    f"{('header', 'data')[kind]} credits it costs in pool {pool}"
                )
            if model[kind] > held:
                raise Violation(
                    f"{self.name}: the model's sender has {model[kind]} "
                    f"{('header', 'data')[kind]} credits in pool {pool} after message "
                    f"{msg}, more than the {held} given back by {start} ns"
                )
        if msg in self.on_wire:
            raise Violation(f"{self.name}: message {msg} committed twice")
        self.on_wire[msg] = cost
        self._conserved(pool, f"message {msg} was granted")

    def arrive(self, msg: int, now: float) -> None:
        cost = self.on_wire.pop(msg)
        leaving = self.leaving
        while leaving and leaving[0][0] <= now:
            _, _, (p, h, d) = heapq.heappop(leaving)
            self.in_buffer[p][0] -= h
            self.in_buffer[p][1] -= d
        pool, hdr, data = cost
        here = self.in_buffer[pool]
        here[0] += hdr
        here[1] += data
        for kind in (0, 1):
            self.filled |= bool(self.adv[kind]) and here[kind] == self.adv[kind]
            if self.adv[kind] and here[kind] > self.adv[kind]:
                raise Violation(
                    f"{self.name}: message {msg} arrived at {now} ns into a buffer holding "
                    f"{here[kind] - cost[1 + kind]} {('header', 'data')[kind]} credits of "
                    f"pool {pool}; it has room for {self.adv[kind]}"
                )
        self.waiting[msg] = (cost, False)
        self._conserved(pool, f"message {msg} arrived")

    def hold(self, msg: int) -> None:
        entry = self.waiting.get(msg)
        if entry is None or entry[1]:
            raise Violation(f"{self.name}: message {msg} held, not newly arrived there")
        self.waiting[msg] = (entry[0], True)
        self._conserved(entry[0][0], f"message {msg} was held")

    def leave(self, msg: int, t_leave: float, now: float, held: bool) -> None:
        entry = self.waiting.pop(msg, None)
        how = "released" if held else "passed through"
        if entry is None:
            raise Violation(f"{self.name}: message {msg} {how}, not waiting in the far buffer")
        if entry[1] != held:
            raise Violation(
                f"{self.name}: message {msg} {how}, but it was {'' if entry[1] else 'not '}held"
            )
        if t_leave < now:
            raise Violation(f"{self.name}: message {msg} leaves at {t_leave} ns, before {now}")
        cost = entry[0]
        self._order += 1
        heapq.heappush(self.leaving, (t_leave, self._order, cost))
        heapq.heappush(self.updates, (t_leave + self.return_ns, self._order, cost))
        self._conserved(cost[0], f"message {msg} {how}")

    def check_end(self, idle: bool) -> None:
        if not idle:
            return
        if self.on_wire or self.waiting:
            raise Violation(
                f"{self.name}: idle with messages {sorted(self.on_wire)} on the wire and "
                f"{sorted(self.waiting)} in the far buffer"
            )
        for _, _, (p, h, d) in self.updates:
            self.back[p][0] += h
            self.back[p][1] += d
        self.updates.clear()
        credit = self.port.credit
        for pool in range(len(credit.avail_hdr)):
            taken, back = self.taken[pool], self.back[pool]
            model = (credit.avail_hdr[pool], credit.avail_data[pool])
            if taken != back or model != (credit.adv_hdr, credit.adv_data):
                raise Violation(
                    f"{self.name} pool {pool} at idle: {taken} credits taken, {back} given "
                    f"back; the model's sender holds {model} of {self.adv}"
                )


class _WatchedPort:
    """Mixed in front of a port class: its serialisations and arrivals are reported."""

    observer: ClassVar[RunObserver]

    def serialise(self, now: float, msg: int) -> float:
        self.observer.leaving(self, msg)  # type: ignore[arg-type]
        t: float = super().serialise(now, msg)  # type: ignore[misc]
        self.observer.started(self, msg)  # type: ignore[arg-type]
        return t

    def _arrived(self, ev: Hop) -> None:
        self.observer.arrived(self, ev.msg)  # type: ignore[arg-type]
        super()._arrived(ev)  # type: ignore[misc]


class _WatchedCreditedPort(_WatchedPort):
    """A credited port's buffer accounting is reported too, after the model's."""

    def hold(self, msg: int) -> None:
        super().hold(msg)  # type: ignore[misc]
        self.observer.ledgers[self.channel].hold(msg)  # type: ignore[attr-defined]

    def pass_through(self, msg: int, t_leave: float, now: float) -> None:
        super().pass_through(msg, t_leave, now)  # type: ignore[misc]
        self.observer.ledgers[self.channel].leave(msg, t_leave, now, held=False)  # type: ignore[attr-defined]

    def release(self, msg: int, t_leave: float, now: float) -> None:
        super().release(msg, t_leave, now)  # type: ignore[misc]
        self.observer.ledgers[self.channel].leave(msg, t_leave, now, held=True)  # type: ignore[attr-defined]


class ObservedTransport(Transport):
    """The packet transport, its ports watched and its injections and deliveries reported
    to ``observer`` (a subclass per run fixes it, since ``simulate`` builds the transport)."""

    observer: ClassVar[RunObserver]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.observer.attach(self)

    def port_class(self, *flags: bool) -> type[OutputPort]:  # type: ignore[override]
        return self.observer.watched(Transport.port_class(*flags))

    def _launch(self, msg: int, vc: int, replica: bool) -> None:
        self.observer.launched(msg)
        super()._launch(msg, vc, replica)

    def _deliver(self, msg: int) -> None:
        self.observer.delivered(msg)
        super()._deliver(msg)


class LtssmWatch:
    """Every ``Ltssm.handle`` call of the run, checked as it is made (module docstring)."""

    def __init__(self) -> None:
        self.state_after: dict[int, State] = {}
        # The machines seen, kept alive so that no id is reused by another.
        self.machines: list[Ltssm] = []
        self.transitions = 0

    def wrap(self, handle: Callable[[Ltssm, Event], Any]) -> Callable[[Ltssm, Event], Any]:
        def watched(machine: Ltssm, event: Event) -> Any:
            before = machine.state
            key = id(machine)
            if key in self.state_after:
                if before != self.state_after[key]:
                    raise Violation(
                        f"an LTSSM left {self.state_after[key].value} for {before.value} "
                        "outside its transition table"
                    )
            elif before not in FIRST_STATES:
                raise Violation(f"an LTSSM's first transition starts in {before.value}")
            else:
                self.machines.append(machine)
            taken = handle(machine, event)
            after = machine.state
            if (before, event, after) not in LEGAL_STEPS or taken.target != after:
                raise Violation(
                    f"an LTSSM went {before.value} -{event.value}-> {after.value}, which its "
                    "transition table has no row for"
                )
            self.state_after[key] = after
            self.transitions += 1
            return taken

        return watched


RECOVERY_SIDE = frozenset(
    {
        State.RECOVERY_RCVRLOCK.value,
        *(phase.value for phase in EQ_PHASES),
        State.RECOVERY_RCVRCFG.value,
        State.RECOVERY_IDLE.value,
    }
)
OUTAGE_CAUSES = frozenset({"ber_retrain"})


def check_link_states(table: pd.DataFrame, *, allow_cut_recoveries: bool = False) -> int:
    """Each link's rows (in table order) walk legal transitions, from Detect.Quiet at the
    reset, each row entered when the one before it was left; only the last is open.

    ``allow_cut_recoveries`` lets through one known illegal step, and counts it: a
    Recovery cut short where a later-recorded BER retraining starts, joined to that
    retraining's Recovery.RcvrLock with no transition (``sitssim.stages.phy`` keeps it:
    the row is the monitor's request). Returns how many were let through."""
    cut = 0
    for link, rows in table.groupby("link", sort=False):
        states = rows["state"].tolist()
        causes = rows["cause"].tolist()
        enter = rows["t_enter_ns"].to_numpy()
        leave = rows["t_exit_ns"].to_numpy()
        if states[0] != State.DETECT_QUIET.value or enter[0] != 0.0:
            raise Violation(f"{link} starts in {states[0]} at {enter[0]} ns, not at the reset")
        for i in range(1, len(states)):
            if (states[i - 1], states[i]) not in LEGAL_EDGES:
                if (
                    allow_cut_recoveries
                    and states[i] == State.RECOVERY_RCVRLOCK.value
                    and causes[i] in OUTAGE_CAUSES
                    and states[i - 1] in RECOVERY_SIDE
                ):
                    cut += 1
                else:
                    raise Violation(
                        f"{link}: link_states row {rows['state_id'].iloc[i]} goes "
                        f"{states[i - 1]} -> {states[i]}, not a transition of the LTSSM"
                    )
            if leave[i - 1] != enter[i]:
                raise Violation(
                    f"{link}: {states[i - 1]} left at {leave[i - 1]} ns, {states[i]} "
                    f"entered at {enter[i]} ns"
                )
        if not math.isnan(leave[-1]) and not leave[-1] >= enter[-1]:
            raise Violation(f"{link}: its last row ends at {leave[-1]}, before {enter[-1]}")
    return cut


class RunObserver:
    """What one run did, event by event, and the checks on it (module docstring)."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.ltssm = LtssmWatch()
        self.transport: Transport | None = None
        self.ledgers: dict[int, ChannelLedger] = {}
        self._classes: dict[type[OutputPort], type[OutputPort]] = {}
        # Per message: the node it is at (-1: on a wire), the channel it is on (-1: at a
        # node), the channel it came over to its node (-1: injected there), its channels
        # so far, its delivery time.
        self.at: list[int] = []
        self.wire: list[int] = []
        self.came_over: list[int] = []
        self.hops: list[list[int]] = []
        self.t_delivered: list[float] = []
        self.bound: dict[int, int] = {}
        self.occupancy: defaultdict[tuple[int, int, int], int] = defaultdict(int)
        self.peak: defaultdict[int, int] = defaultdict(int)
        self.cut_recoveries = 0
        self.near: list[int] = []
        self.far: list[int] = []
        self.names: list[str] = []

    # --- building ------------------------------------------------------------------

    def watched(self, base: type[OutputPort]) -> type[OutputPort]:
        cls = self._classes.get(base)
        if cls is None:
            mixin = _WatchedCreditedPort if issubclass(base, CreditedPort) else _WatchedPort
            cls = type(f"Watched{base.__name__}", (mixin, base), {"observer": self})
            self._classes[base] = cls
        return cls

    def attach(self, transport: Transport) -> None:
        self.transport = transport
        fabric = transport.fabric
        ids = transport.node_id
        self.near = [ids[ch.src] for ch in fabric.channels]
        self.far = [ids[ch.dst] for ch in fabric.channels]
        self.names = [ch.name for ch in fabric.channels]
        for node in transport.node_objects:
            if isinstance(node, InputQueuedSwitch):
                self.bound[node.index] = type(node).input_buffer
        profile = self.scenario.link_layer.credits
        advertised = tuple(
            0 if n == "infinite" else int(n) for n in (profile.header_credits, profile.data_credits)
        )
        for ch, port in zip(fabric.channels, transport.ports, strict=True):
            expected = profile.enabled and fabric.node_kind(ch.dst) in profile.advertised_by
            if isinstance(port, CreditedPort) != expected:
                raise Violation(f"{ch.name}: credited {not expected}, the profile says {expected}")
            if expected:
                reverse = fabric.channels[fabric.channel_index[(ch.dst, ch.src)]]
                self.ledgers[ch.id] = ChannelLedger(
                    port,  # type: ignore[arg-type]
                    ch.name,
                    advertised,  # type: ignore[arg-type]
                    profile.max_payload,
                    reverse.propagation_ns + profile.update_delay,
                )

    # --- events --------------------------------------------------------------------

    def _where(self, msg: int) -> str:
        t = self.transport
        assert t is not None
        if self.wire[msg] >= 0:
            return f"on {self.names[self.wire[msg]]}"
        return f"at {t.nodes[self.at[msg]]}"

    def launched(self, msg: int) -> None:
        t = self.transport
        assert t is not None
        if msg != len(self.at):
            raise Violation(f"message {msg} injected after {len(self.at)} messages")
        self.at.append(t.src[msg])
        self.wire.append(-1)
        self.came_over.append(-1)
        self.hops.append([])
        self.t_delivered.append(math.nan)

    def leaving(self, port: OutputPort, msg: int) -> None:
        t = self.transport
        assert t is not None
        ch = port.channel
        node = self.at[msg]
        if node != self.near[ch]:
            raise Violation(f"message {msg} starts on {self.names[ch]} while {self._where(msg)}")
        came = self.came_over[msg]
        if came >= 0 and node in self.bound:
            key = (node, came, t.vc[msg])
            self.occupancy[key] -= 1
            if self.occupancy[key] < 0:
                raise Violation(f"{t.nodes[node]} sent message {msg} on from an empty buffer")
        self.at[msg] = -1
        self.wire[msg] = ch
        self.hops[msg].append(ch)

    def started(self, port: OutputPort, msg: int) -> None:
        ledger = self.ledgers.get(port.channel)
        if ledger is not None:
            assert self.transport is not None
            ledger.grant(self.transport, msg, port.last_start)

    def arrived(self, port: OutputPort, msg: int) -> None:
        t = self.transport
        assert t is not None
        ch = port.channel
        if self.wire[msg] != ch:
            raise Violation(f"message {msg} arrives over {self.names[ch]} while {self._where(msg)}")
        node = self.far[ch]
        self.wire[msg] = -1
        self.at[msg] = node
        self.came_over[msg] = ch
        if node in self.bound and t.dst[msg] != node:
            key = (node, ch, t.vc[msg])
            self.occupancy[key] += 1
            held = self.occupancy[key]
            self.peak[node] = max(self.peak[node], held)
            if held > self.bound[node]:
                raise Violation(
                    f"{t.nodes[node]}'s buffer of {self.names[ch]} VC {t.vc[msg]} holds {held} "
                    f"messages with message {msg}, above its {self.bound[node]}"
                )
        ledger = self.ledgers.get(ch)
        if ledger is not None:
            ledger.arrive(msg, t.env.now)

    def delivered(self, msg: int) -> None:
        t = self.transport
        assert t is not None
        if not math.isnan(self.t_delivered[msg]):
            raise Violation(f"message {msg} delivered a second time")
        if self.at[msg] != t.dst[msg]:
            raise Violation(f"message {msg} for {t.nodes[t.dst[msg]]} delivered {self._where(msg)}")
        self.t_delivered[msg] = t.env.now

    # --- the end -------------------------------------------------------------------

    def _pending_arrivals(self) -> set[tuple[int, int]]:
        """(channel, msg) of every arrival event still on SimPy's queue."""
        t = self.transport
        assert t is not None
        channel_of = {id(p._arrived_cbs): p.channel for p in t.ports}
        return {
            (channel_of[id(ev.callbacks)], ev.msg)
            for _, _, _, ev in t.env._queue
            if isinstance(ev, Hop) and id(ev.callbacks) in channel_of
        }

    def _waiting_at_nodes(self) -> set[int]:
        """Every message the model keeps waiting at a node."""
        t = self.transport
        assert t is not None
        known: set[int] = set()
        for node in t.node_objects:
            if isinstance(node, InputQueuedSwitch):
                known.update(msg for _, _, msg in node.waiting())
            elif isinstance(node, AnsweringEndpoint):
                known.update(msg for msg, _ in node.waiting())
        for port in t.ports:
            if isinstance(port, CreditedPort):
                known.update(port.queue)
        return known

    def check_end(self, result: RunResult) -> None:
        t = self.transport
        if t is None:
            raise Violation("the run was not built with the observed transport")
        idle = t.stopped is None
        if len(self.at) != len(t.src):
            raise Violation(f"{len(t.src)} messages, {len(self.at)} injections seen")
        if sum(map(len, self.hops)) != sum(p.messages for p in t.ports):
            raise Violation("the ports counted serialisations the observer did not see")
        delivered = np.asarray(self.t_delivered)
        lost = np.flatnonzero(np.isnan(delivered)).tolist()
        if idle and lost:
            raise Violation(f"idle with messages {lost[:10]} undelivered")
        if lost:
            pending = self._pending_arrivals()
            waiting = self._waiting_at_nodes()
            for msg in lost:
                on = self.wire[msg]
                if not ((on, msg) in pending if on >= 0 else msg in waiting):
                    raise Violation(f"message {msg} is lost: {self._where(msg)}, unknown there")
        if idle and any(self.occupancy.values()):
            raise Violation(f"idle with switch buffers holding {dict(self.occupancy)}")
        for ledger in self.ledgers.values():
            ledger.check_end(idle)
        self._check_messages_table(result.tables["messages"], delivered)
        self.cut_recoveries = check_link_states(
            result.tables["link_states"], allow_cut_recoveries=True
        )
        if not self.ltssm.transitions:
            raise Violation("no LTSSM transition was seen")

    def _check_messages_table(self, messages: pd.DataFrame, delivered: np.ndarray) -> None:
        t = self.transport
        assert t is not None
        if not np.array_equal(messages["t_deliver_ns"].to_numpy(), delivered, equal_nan=True):
            raise Violation("the messages table's delivery times are not the ones observed")
        hops = messages["hops"].to_numpy()
        paths = messages["path"].astype(str).to_numpy()
        for msg in np.flatnonzero(~np.isnan(delivered)):
            seen = [t.nodes[t.src[msg]], *(t.nodes[self.far[ch]] for ch in self.hops[msg])]
            if hops[msg] != len(self.hops[msg]) or paths[msg] != ">".join(seen):
                raise Violation(
                    f"message {msg}: the messages table says {hops[msg]} hops over "
                    f"{paths[msg]}, it crossed {'>'.join(seen)}"
                )


@contextmanager
def _watching(observer: RunObserver) -> Iterator[None]:
    """``simulate`` builds its packet transport (``simulation._packet_transport``) as the
    observer's, and every LTSSM's ``handle`` reports to it."""
    transport = type("ObservedTransport", (ObservedTransport,), {"observer": observer})
    with (
        patch.object(simulation, "Transport", transport),
        patch.object(Ltssm, "handle", observer.ltssm.wrap(Ltssm.handle)),
    ):
        yield


def observed_run(scenario: Scenario) -> tuple[RunResult, RunObserver]:
    """Simulate ``scenario`` under a :class:`RunObserver`, checking as it runs and at its
    end (:meth:`RunObserver.check_end`)."""
    observer = RunObserver(scenario)
    with _watching(observer):
        result = simulation.simulate(scenario)
    observer.check_end(result)
    return result, observer

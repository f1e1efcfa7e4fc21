"""The dual-clock CDC FIFO between PHYCLK and REFCLK, its synchronisers and handshake (L2).

Theory of operation
-------------------
Received data cross from the PHY's clock (PHYCLK, 8 GHz: one narrow word per cycle at
64 GT/s, 8 bits per lane) to the link layer's clock (REFCLK, 250 MHz) through a dual-clock
FIFO whose read port is ``ratio`` (32) narrow words wide, so both sides carry the same
bandwidth. Depth counts narrow-word entries.

* **Pointers.** The write pointer counts narrow words and is Gray-coded, so it changes one
  bit per write. The read pointer moves 32 narrow words per read; Gray-coding it in narrow
  units would flip two bits at once, so it is kept and Gray-coded in wide words (×32 on the
  write side). Each pointer crosses into the other domain through an N-flop synchroniser.
  A flop whose input changes inside its capture window goes metastable; with Gray coding
  it then resolves to either the old or the new pointer, and the model always takes the
  old one (the later of the two outcomes), which is the pessimistic choice for sizing.
* **Synchroniser clock.** At 8 GHz a synchroniser stage leaves ~60 ps to resolve
  metastability, far too little for any useful MTBF at the slow corner, so the
  REFCLK→PHYCLK synchronisers run on PHYCLK divided by ``sync_divider``: the smallest
  divider at which the *designed* flop count meets the MTBF target at SS/125 °C
  (:func:`sitssim.config.cdc_device.closing_divider`). PHYCLK→REFCLK synchronisers run
  on REFCLK (4 ns: ample).
* **Stop/go loop.** The consumer on the REFCLK side can stall (a full receive buffer,
  Recovery), but the PHY keeps delivering. The read side therefore asserts *stop* when it
  sees the FIFO at least half full, and *go* when it sees it below half: the formula's
  ``(max_rtt_cycles << 1) + 4`` is one round trip of headroom above the mark (to absorb
  what arrives while stop travels) and one below it (to feed the reader while go
  travels). Stop crosses REFCLK→PHYCLK through the synchroniser and closes the writer's
  gate; the ``pipeline`` words already past the gate still land. A word that arrives while
  the write side sees the FIFO full (against its own, stale copy of the read pointer) is
  lost: an overflow.
* **The loop's round trip** (``max_rtt_cycles``, write-clock cycles) is measured, not
  assumed: from the write that brings the FIFO to the stop mark to the last word that
  lands after the writer has seen stop. It is made of three measured parts: *detection*
  (the write pointer's crossing into REFCLK, including the wait for a REFCLK edge, and the
  stop register), the *stop path* (stop's crossing into PHYCLK) and the *in-flight* words.

The FIFO core (:class:`CdcFifo`) is sans-I/O: a driver calls :meth:`CdcFifo.ref_edge` and
:meth:`CdcFifo.phy_edge` in time order. It is vectorised over *lanes*: independent copies
of the FIFO, each with its own clock phases and traffic, so one run covers every phase
relation of the two asynchronous clocks at once. :func:`simulate` is that driver;
:func:`worst_case_burst` is the link's worst case (a full-rate burst into a stalled
consumer, at every relevant phase); :func:`min_safe_depth` bisects the depth against it.

The REFCLK→PHYCLK synchronisation latency (:func:`sync_latency`) and the training-complete
handshake (:func:`handshake_setup`) are measured from the same synchroniser model over a
sweep of clock phases. Our reading of the handshake: the PHY raises *trained*, a
return-to-zero (four-phase) req/ack handshake runs with the link layer, and the PHY then
starts the data stream; setup is complete when the first wide word has crossed the FIFO
and is read on the REFCLK side. Setup time is counted from the PHY's *trained* edge.

The device parameters (flop timing at the PVT corners, the MTBF model and its target, the
pointer width) are :mod:`sitssim.config.cdc_device`: the scenario's ``link_layer.cdc`` block
is checked against them too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from sitssim.config.cdc_device import MAX_DEPTH, POINTER_BITS, FlopTiming

# --- the design --------------------------------------------------------------


@dataclass(frozen=True)
class CdcDesign:
    """One FIFO as built: clocks, synchroniser stages, writer pipeline."""

    write_period_ps: float = 125.0
    ratio: int = 32
    to_phy_flops: int = 2
    to_ref_flops: int = 2
    sync_divider: int = 4
    pipeline: int = 2

    @property
    def read_period_ps(self) -> float:
        return self.write_period_ps * self.ratio

    @property
    def sync_period_ps(self) -> float:
        return self.write_period_ps * self.sync_divider

    def loop_bound_cycles(self) -> int:
        """A generous bound on the stop/go loop, to size simulation runs (not a result)."""
        return (
            (self.to_ref_flops + 2) * self.ratio
            + (self.to_phy_flops + 2) * self.sync_divider
            + self.pipeline
            + 8
        )


def stop_mark(depth: int) -> int:
    """Occupancy (as the read side sees it) at which stop is asserted: half the FIFO."""
    return depth // 2


def formula_depth(max_rtt_cycles: int) -> int:
    """SITS2026 §3.1: ``fifo_depth = (max_rtt_cycles << 1) + 4``."""
    return (max_rtt_cycles << 1) + 4


_POINTER_MASK = (1 << POINTER_BITS) - 1


def gray(x: np.ndarray) -> np.ndarray:
    return x ^ (x >> 1)


def _gray_decode_table() -> np.ndarray:
    b = np.arange(1 << POINTER_BITS, dtype=np.int64)
    g = gray(b)
    table = np.empty_like(b)
    table[g] = b
    return table


# Synchronised Gray pointers are decoded by lookup: one array access on the hot path.
_FROM_GRAY = _gray_decode_table()


# --- the FIFO core -----------------------------------------------------------


class CdcFifo:
    """An ensemble of identical CDC FIFOs (one per lane), advanced edge by edge.

    Call :meth:`ref_edge` for the REFCLK edges and :meth:`phy_edge` for the PHYCLK edges in
    time order (a REFCLK edge that coincides with a PHYCLK edge goes first). Lanes differ
    only in their clocks' phases and their traffic. Pointers are ``POINTER_BITS``-bit
    counters (the read pointer ``ratio`` times narrower), as in hardware; synchroniser
    flops hold Gray code.
    """

    def __init__(
        self,
        design: CdcDesign,
        timing: FlopTiming,
        depth: int,
        sync_offset: np.ndarray,
    ) -> None:
        if timing.crossing >= design.write_period_ps:
            raise ValueError(
                f"an asynchronous crossing needs {timing.crossing:.1f} ps, more than a "
                f"PHYCLK period ({design.write_period_ps:g} ps): the model assumes less"
            )
        if not 1 <= depth <= MAX_DEPTH:
            raise ValueError(f"depth {depth} outside 1..{MAX_DEPTH}")
        lanes = len(sync_offset)
        self.design, self.timing, self.depth = design, timing, depth
        self.mark = stop_mark(depth)
        self.lanes = lanes
        offset = np.asarray(sync_offset, dtype=np.int64)
        # Which lanes' synchronisers are clocked, by PHYCLK edge number modulo the divider.
        self._sync_edge = (
            np.arange(design.sync_divider)[:, None] + offset
        ) % design.sync_divider == 0
        self._rmask = _POINTER_MASK // design.ratio
        zeros = np.zeros(lanes, dtype=np.int64)
        # Write (PHYCLK) side: pointer in narrow words and the Gray word it launches.
        self.wptr = zeros.copy()
        self.wgray = zeros.copy()
        self.wgray_before = zeros.copy()  # launched before the latest PHYCLK edge
        self.t_phy = -math.inf
        self.rsync = np.zeros((design.to_phy_flops, lanes), dtype=np.int64)
        self.ssync = np.zeros((design.to_phy_flops, lanes), dtype=bool)
        self.pipe = np.zeros((design.pipeline + 1, lanes), dtype=bool)
        # Read (REFCLK) side: pointer in wide words and its Gray word, the stop register.
        self.rptr = zeros.copy()
        self.rgray = zeros.copy()
        self.rgray_before = zeros.copy()
        self.stop = np.zeros(lanes, dtype=bool)
        self.stop_before = np.zeros(lanes, dtype=bool)
        self.t_ref = np.full(lanes, -math.inf)
        self.wsync = np.zeros((design.to_ref_flops, lanes), dtype=np.int64)
        self.overflows = zeros.copy()

    # Views each side has of the FIFO, in narrow words (modular pointer arithmetic).
    def occupancy(self) -> np.ndarray:
        """True occupancy: words written and not yet read."""
        return (self.wptr - self.rptr * self.design.ratio) & _POINTER_MASK

    def read_view(self) -> np.ndarray:
        return (_FROM_GRAY[self.wsync[-1]] - self.rptr * self.design.ratio) & _POINTER_MASK

    def write_view(self) -> np.ndarray:
        return (self.wptr - _FROM_GRAY[self.rsync[-1]] * self.design.ratio) & _POINTER_MASK

    def stop_seen(self) -> np.ndarray:
        """Stop as the writer's gate sees it (the last synchroniser flop)."""
        return self.ssync[-1]

    def ref_edge(self, t_ps: np.ndarray, lanes: np.ndarray, ready: np.ndarray) -> None:
        """A REFCLK edge at ``t_ps`` on the ``lanes`` mask; ``ready``: the consumer takes data."""
        d = self.design
        view = self.read_view()
        reads = lanes & ready & (view >= d.ratio)
        # The first flop takes the latest write-pointer launch if it arrived before the
        # capture deadline; otherwise (metastable or late) the one before. Gray code makes
        # the two differ in one bit, so no other value can be captured.
        taken = (t_ps - self.t_phy) >= self.timing.crossing
        captured = np.where(taken, self.wgray, self.wgray_before)
        for i in range(d.to_ref_flops - 1, 0, -1):
            self.wsync[i] = np.where(lanes, self.wsync[i - 1], self.wsync[i])
        self.wsync[0] = np.where(lanes, captured, self.wsync[0])
        self.rgray_before = np.where(lanes, self.rgray, self.rgray_before)
        self.stop_before = np.where(lanes, self.stop, self.stop_before)
        self.rptr = (self.rptr + reads) & self._rmask
        self.rgray = gray(self.rptr)
        self.stop = np.where(lanes, view >= self.mark, self.stop)
        self.t_ref = np.where(lanes, t_ps, self.t_ref)

    def phy_edge(self, n: int, t_ps: float, offer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """PHYCLK edge ``n`` at ``t_ps``; ``offer``: the link has a word for the writer.

        Returns the words written and the words lost to overflow at this edge.
        """
        d = self.design
        issued = offer & ~self.ssync[-1]
        if d.pipeline:
            self.pipe[n % (d.pipeline + 1)] = issued
            landed = self.pipe[(n + 1) % (d.pipeline + 1)]
        else:
            landed = issued
        full = self.write_view() >= self.depth
        lost = landed & full
        written = landed & ~full
        self.overflows += lost
        self.wptr = (self.wptr + written) & _POINTER_MASK
        self.wgray_before = self.wgray
        self.wgray = gray(self.wptr)
        self.t_phy = t_ps
        sync_edge = self._sync_edge[n % d.sync_divider]
        taken = (t_ps - self.t_ref) >= self.timing.crossing
        r_in = np.where(taken, self.rgray, self.rgray_before)
        s_in = np.where(taken, self.stop, self.stop_before)
        for i in range(d.to_phy_flops - 1, 0, -1):
            self.rsync[i] = np.where(sync_edge, self.rsync[i - 1], self.rsync[i])
            self.ssync[i] = np.where(sync_edge, self.ssync[i - 1], self.ssync[i])
        self.rsync[0] = np.where(sync_edge, r_in, self.rsync[0])
        self.ssync[0] = np.where(sync_edge, s_in, self.ssync[0])
        return written, lost


# --- driving it --------------------------------------------------------------


@dataclass(frozen=True)
class Burst:
    """Traffic and clock phases for every lane.

    ``offer[n, lane]``: the link offers a word at PHYCLK edge ``n`` (edge ``n`` is at
    ``n`` write periods). ``ready[m, lane]``: the consumer would take a wide word at
    REFCLK edge ``m`` (at ``ref_phase_ps + m`` read periods, phase in ``[0, read
    period)``); past the end of ``ready`` it is stalled. ``sync_offset``: which PHYCLK
    edges clock the synchronisers (those with ``(n + offset) % divider == 0``).
    """

    offer: np.ndarray
    ready: np.ndarray
    ref_phase_ps: np.ndarray
    sync_offset: np.ndarray


@dataclass
class FifoRun:
    """What one run recorded, per PHYCLK edge and lane (empty arrays if not recorded)."""

    depth: int
    mark: int
    overflows: np.ndarray  # (lanes,) words lost
    peak: np.ndarray  # (lanes,) highest true occupancy
    occupancy: np.ndarray  # (cycles, lanes) true occupancy after each edge
    read_view: np.ndarray  # (cycles, lanes) the read side's view after each edge
    stop_seen: np.ndarray  # (cycles, lanes) the writer's gate was closed at this edge
    written: np.ndarray  # (cycles, lanes)
    lost: np.ndarray  # (cycles, lanes)
    stop_rise_ps: np.ndarray  # (lanes,) first REFCLK edge that asserted stop, NaN if none
    rptr: np.ndarray  # (cycles, lanes) read pointer (wide words) after each edge


def simulate(
    design: CdcDesign,
    timing: FlopTiming,
    depth: int,
    burst: Burst,
    record: bool = True,
    stop_on_overflow: bool = False,
) -> FifoRun:
    """Run ``burst`` through a FIFO of ``depth`` entries.

    Without ``record`` only overflows, peaks and stop times are kept. The run ends early
    once nothing can change (every consumer stalled for good, every gate closed, nothing
    in flight), or at the first overflow if ``stop_on_overflow``.
    """
    cycles, lanes = burst.offer.shape
    fifo = CdcFifo(design, timing, depth, burst.sync_offset)
    tw, tr, ratio = design.write_period_ps, design.read_period_ps, design.ratio
    phase = np.asarray(burst.ref_phase_ps, dtype=float)
    if ((phase < 0) | (phase >= tr)).any():
        raise ValueError("REFCLK phases must lie in [0, read period)")
    # REFCLK edge m of a lane lands in (t_{n-1}, t_n] for n = ceil(phase / tw) + m * ratio;
    # the whole schedule is worked out before the edge loop.
    first_step = np.ceil(phase / tw - 1e-9).astype(np.int64)
    n_ref = burst.ready.shape[0]
    lane_ids = np.arange(lanes)
    since = np.arange(cycles)[:, None] - first_step[None, :]
    due_at = (since >= 0) & (since % ratio == 0)
    edge_index = np.maximum(since, 0) // ratio
    ready_at = due_at & (edge_index < n_ref)
    ready_at &= burst.ready[np.minimum(edge_index, n_ref - 1), lane_ids[None, :]]
    t_edge_at = phase[None, :] + edge_index * tr
    any_due = due_at.any(axis=1)
    ever_ready = burst.ready.any(axis=0)
    last_ready = np.where(ever_ready, n_ref - 1 - burst.ready[::-1].argmax(axis=0), -1)
    settled_after = int((first_step + last_ready * ratio).max())  # no read after this step
    shape = (cycles, lanes) if record else (0, lanes)
    occupancy = np.zeros(shape, dtype=np.int32)
    view = np.zeros(shape, dtype=np.int32)
    seen = np.zeros(shape, dtype=bool)
    written = np.zeros(shape, dtype=bool)
    lost = np.zeros(shape, dtype=bool)
    rptr = np.zeros(shape, dtype=np.int64)
    peak = np.zeros(lanes, dtype=np.int64)
    stop_rise = np.full(lanes, np.nan)
    n = 0
    for n in range(cycles):
        if any_due[n]:
            due = due_at[n]
            fifo.ref_edge(t_edge_at[n], due, ready_at[n])
            rose = due & fifo.stop & np.isnan(stop_rise)
            stop_rise[rose] = t_edge_at[n][rose]
        gate = fifo.stop_seen().copy()
        w, lo = fifo.phy_edge(n, n * tw, burst.offer[n])
        occ = fifo.occupancy()
        np.maximum(peak, occ, out=peak)
        if record:
            occupancy[n], view[n], seen[n], written[n], lost[n] = (
                occ,
                fifo.read_view(),
                gate,
                w,
                lo,
            )
            rptr[n] = fifo.rptr
        if stop_on_overflow and lo.any():
            break
        if n % ratio == 0 and n > settled_after and gate.all() and not fifo.pipe.any():
            break
    end = n + 1 if record else 0
    return FifoRun(
        depth=depth,
        mark=fifo.mark,
        overflows=fifo.overflows,
        peak=peak,
        occupancy=occupancy[:end],
        read_view=view[:end],
        stop_seen=seen[:end],
        written=written[:end],
        lost=lost[:end],
        stop_rise_ps=stop_rise,
        rptr=rptr[:end],
    )


def word_rate(words_per_cycle: float, longest_period: int = 16) -> tuple[int, int]:
    """The link's words per PHYCLK cycle as ``p / q`` with ``q <= longest_period``.

    The PHY hands over words in a pattern that repeats every ``q`` cycles; a rate that is
    no such fraction is rounded up (never fewer words than the link carries).
    """
    if not 0 < words_per_cycle <= 1:
        raise ValueError(f"a link delivers between 0 and 1 word per cycle, not {words_per_cycle}")
    best = (1, 1)
    for q in range(1, longest_period + 1):
        p = math.ceil(words_per_cycle * q - 1e-9)
        if p * best[1] < best[0] * q:
            best = (p, q)
    return best


def offer_pattern(cycles: int, words_per_cycle: float, shift: int = 0) -> np.ndarray:
    """Which PHYCLK edges carry a word at ``words_per_cycle``, ``shift`` cycles into the pattern."""
    p, q = word_rate(words_per_cycle)
    n = np.arange(cycles + 1) + shift
    return np.diff(n * p // q) > 0


def critical_subphases(design: CdcDesign, timing: FlopTiming) -> np.ndarray:
    """One REFCLK phase (mod a PHYCLK period) inside each interval where outcomes are constant.

    A crossing's outcome flips only where a launch lands exactly on a capture deadline:
    at ``crossing`` after a PHYCLK edge (write pointer into REFCLK) and ``crossing``
    before one (stop and read pointer into PHYCLK). Between those points nothing
    changes, so the midpoints cover every behaviour.
    """
    tw = design.write_period_ps
    points = np.unique(np.mod([0.0, timing.crossing, -timing.crossing], tw))
    nxt = np.append(points[1:], points[0] + tw)
    return np.mod((points + nxt) / 2, tw)


def worst_case_burst(
    design: CdcDesign,
    timing: FlopTiming,
    depth: int,
    words_per_cycle: float = 1.0,
    stalls: tuple[int, ...] | None = None,
) -> Burst:
    """The link's worst case: a continuous burst at line rate while the consumer stalls.

    The consumer stalls at each REFCLK edge index in ``stalls`` (default: from the start,
    so an empty FIFO fills, and after a few edges of steady flow), at every relevant phase
    of the three clocks. Lanes sweep the REFCLK phase over every PHYCLK cycle of a REFCLK
    period (which word a REFCLK edge sees) at each critical sub-cycle phase, every
    synchroniser-clock offset and, on a link slower than one word per cycle, every phase
    of its word pattern.
    """
    tw, tr = design.write_period_ps, design.read_period_ps
    stall_at = np.array((0, design.to_ref_flops + 2) if stalls is None else stalls)
    sub = critical_subphases(design, timing)
    whole = np.arange(design.ratio) * tw
    phase = (whole[:, None] + sub[None, :]).ravel()
    offsets = np.arange(design.sync_divider)
    words, period = word_rate(words_per_cycle)
    shifts = np.arange(period)
    phase, offset, shift, stall = (
        a.ravel() for a in np.meshgrid(phase, offsets, shifts, stall_at, indexing="ij")
    )
    # A slower link takes proportionally longer to fill the FIFO.
    fill = math.ceil((depth + 2 * design.loop_bound_cycles()) * period / words)
    cycles = int((stall_at.max() + 1) * design.ratio + fill)
    n_ref = int(cycles * tw / tr) + 2
    patterns = np.stack([offer_pattern(cycles, words_per_cycle, int(s)) for s in shifts], axis=1)
    offer = patterns[:, shift]
    ready = np.arange(n_ref)[:, None] < stall[None, :]
    return Burst(offer=offer, ready=ready, ref_phase_ps=phase, sync_offset=offset)


@dataclass(frozen=True)
class LoopTiming:
    """The stop/go loop's round trip, measured on the lane where it is longest."""

    max_rtt_cycles: int
    detect_cycles: float  # the mark is reached -> stop asserted on REFCLK
    stop_path_cycles: float  # stop asserted -> the writer's gate sees it
    in_flight_words: int  # words landing at or after the edge the gate closed


def measure_loop(design: CdcDesign, timing: FlopTiming, words_per_cycle: float = 1.0) -> LoopTiming:
    """Measure the loop in a FIFO deep enough never to overflow, the consumer stalled."""
    depth = 4 * design.loop_bound_cycles()
    burst = worst_case_burst(design, timing, depth, words_per_cycle, stalls=(0,))
    run = simulate(design, timing, depth, burst)
    if run.overflows.any():
        raise RuntimeError("the loop-measuring FIFO overflowed: its depth is too small")
    tw = design.write_period_ps
    reached = run.occupancy >= run.mark
    n_cross = reached.argmax(axis=0)
    last = run.written.shape[0] - 1 - run.written[::-1].argmax(axis=0)
    gate = run.stop_seen.argmax(axis=0)
    if not (reached.any(axis=0).all() and run.stop_seen.any(axis=0).all()):
        raise RuntimeError("a lane never reached the stop mark: the run is too short")
    rtt = last - n_cross
    worst = int(rtt.argmax())
    t_cross = n_cross[worst] * tw
    return LoopTiming(
        max_rtt_cycles=int(rtt[worst]),
        detect_cycles=float((run.stop_rise_ps[worst] - t_cross) / tw),
        stop_path_cycles=float((gate[worst] * tw - run.stop_rise_ps[worst]) / tw),
        in_flight_words=int(run.written[gate[worst] :, worst].sum()),
    )


def overflows_at(
    design: CdcDesign, timing: FlopTiming, depth: int, words_per_cycle: float = 1.0
) -> bool:
    """Does the worst-case burst overflow a FIFO of ``depth`` entries?"""
    burst = worst_case_burst(design, timing, depth, words_per_cycle)
    run = simulate(design, timing, depth, burst, record=False, stop_on_overflow=True)
    return bool(run.overflows.any())


def min_safe_depth(
    design: CdcDesign, timing: FlopTiming, start: int, words_per_cycle: float = 1.0
) -> int:
    """The smallest depth the worst-case burst does not overflow, by bisection.

    ``start`` is a first guess (the formula's depth); it is doubled until safe.
    """
    hi = max(start, 2)
    while overflows_at(design, timing, hi, words_per_cycle):
        if hi >= MAX_DEPTH:
            raise ValueError(f"no depth up to {MAX_DEPTH} survives the worst-case burst")
        hi = min(2 * hi, MAX_DEPTH)
    lo = 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if overflows_at(design, timing, mid, words_per_cycle):
            lo = mid
        else:
            hi = mid
    return hi


# --- synchronisation latency and handshake -----------------------------------


def _next_edge(t: np.ndarray, phase: np.ndarray | float, period: float) -> np.ndarray:
    """The first edge of a clock (edges at ``phase + k * period``) at or after ``t``."""
    return phase + np.ceil((t - phase) / period - 1e-12) * period


def _cross(
    t_launch: np.ndarray, phase: np.ndarray | float, period: float, timing: FlopTiming
) -> np.ndarray:
    """Time of the first edge of the destination clock that takes the launched value."""
    return _next_edge(t_launch + timing.crossing, phase, period)


def ref_register_ps(
    design: CdcDesign, timing: FlopTiming, t_launch: np.ndarray, ref_phase: float = 0.0
) -> np.ndarray:
    """When REFCLK-side logic acts on a value launched from PHYCLK at ``t_launch``.

    The first flop takes it on the first REFCLK edge it meets in time, the last flop
    ``to_ref_flops - 1`` edges later, and a register fed by it one edge after that.
    """
    tr = design.read_period_ps
    return _cross(t_launch, ref_phase, tr, timing) + design.to_ref_flops * tr


def phy_register_ps(
    design: CdcDesign, timing: FlopTiming, t_launch: np.ndarray, sync_phase: np.ndarray
) -> np.ndarray:
    """When PHY-side logic (on the synchroniser clock) acts on a value launched from REFCLK."""
    ts = design.sync_period_ps
    return _cross(t_launch, sync_phase, ts, timing) + design.to_phy_flops * ts


def sync_phases(design: CdcDesign, points: int = 4096) -> np.ndarray:
    """Phases of the synchroniser clock against REFCLK, evenly over one sync period."""
    return (np.arange(points) + 0.5) * design.sync_period_ps / points


def sync_latency_ps(design: CdcDesign, timing: FlopTiming, phases: np.ndarray) -> np.ndarray:
    """REFCLK→PHYCLK latency for a signal launched at a REFCLK edge (t = 0), per phase.

    From the launching REFCLK edge to the last synchroniser flop's output being valid in
    the PHYCLK domain; ``phases``: the first synchroniser-clock edge after the launch.
    """
    first = _cross(np.zeros_like(phases), phases, design.sync_period_ps, timing)
    return first + (design.to_phy_flops - 1) * design.sync_period_ps + timing.t_cq


def handshake_setup_cycles(design: CdcDesign, timing: FlopTiming, phases: np.ndarray) -> np.ndarray:
    """Training-complete handshake setup time in REFCLK cycles, per synchroniser-clock phase.

    REFCLK edges are at multiples of the read period; the PHY's control logic runs on the
    synchroniser clock (edges at ``phase + k * sync period``) and raises *trained* on the
    edge at ``phase``. Each side registers what its synchroniser delivers on the edge after
    the last flop, then answers.
    """
    t0 = phases.astype(float)
    ack_up = ref_register_ps(design, timing, t0)  # the link layer saw trained: ack
    req_down = phy_register_ps(design, timing, ack_up, t0)  # the PHY saw ack: trained falls
    ack_down = ref_register_ps(design, timing, req_down)  # the link layer drops ack
    start = phy_register_ps(design, timing, ack_down, t0)  # the PHY saw the end: data flow
    # The gate opens on the PHYCLK edge after the PHY's state change; words then pass the
    # writer's pipeline, and the first wide word is complete with its last narrow word.
    full_word = start + (design.pipeline + design.ratio) * design.write_period_ps
    first_read = ref_register_ps(design, timing, full_word)  # the read side reads it
    return (first_read - t0) / design.read_period_ps


def with_faults(design: CdcDesign, to_phy_flops: int | None) -> CdcDesign:
    """The design as a faulty device builds it (a synchroniser of another flop count)."""
    return design if to_phy_flops is None else replace(design, to_phy_flops=to_phy_flops)

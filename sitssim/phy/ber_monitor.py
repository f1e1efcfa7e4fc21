"""BER monitoring in L0, one training cycle at a time, and dynamic retraining.

Theory of operation
-------------------
From the moment a link enters L0 its receivers count bit errors over
back-to-back *training cycles* of ``training_cycle_bits`` bits each (the
device's window, 1e9 by default; at 64 GT/s x 16 lanes one cycle lasts about
0.98 ms). A cycle's error count is drawn binomially from the bits and the
receiver's BER during that cycle, so a BER of 1e-30 gives no errors and one of
1e-5 about 10^4, with the spread a real counter shows.

The BER follows the channel. While the link's channel is the one it last
trained on, the BER of each direction is the one its Level-3 EQ measured at the
end of training. When drift (``profile.ChannelDrift``) has changed the channel,
the receiver's background adaptation is assumed to keep its equaliser tuned to
the channel in force (as real SerDes do between trainings): the BER is that of
a receiver trained, at the link's tuned Tx preset, on the drifted channel.
Noise cannot be equalised away, so a drop in SNR raises the BER however well
the equaliser adapts. Each channel state's BER is computed once and cached.

Each cycle's measured BER (errors / bits) is compared with the device's
``retrain_threshold``; when ``retrain_windows`` consecutive cycles of one
direction exceed it, the device requests dynamic retraining at the end of that
cycle: L0 -> Recovery.RcvrLock -> a full Level-3 EQ round on the channel in
force -> L0 (``training.retrain``), and counting starts afresh when the link is
back in L0. Partial cycles at the end of the run are not counted.

Times here are on the PHY clock (0 = the reset); drift is given on the traffic
clock, which starts at ``traffic_start_ns`` on the PHY clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache

import numpy as np

from sitssim.config.phy_profile import ChannelDrift
from sitssim.phy.channel import ChannelProfile
from sitssim.phy.equalizer import EqProfile, equalize, estimate_ber
from sitssim.phy.links import PhyLink
from sitssim.phy.training import LinkTrace, retrain
from sitssim.rng import component_rng


def drifted_channel(
    base: ChannelProfile, drifts: list[ChannelDrift], t_traffic_ns: float
) -> ChannelProfile:
    """The channel of a link with ``drifts`` (sorted by start) at a traffic-clock time."""
    loss, snr = base.loss_db, base.snr_db
    for drift in drifts:
        loss = drift.value_at(loss, drift.loss_db, t_traffic_ns)
        snr = drift.value_at(snr, drift.snr_db, t_traffic_ns)
    if loss == base.loss_db and snr == base.snr_db:
        return base
    return replace(base, loss_db=loss, snr_db=snr)


@lru_cache(maxsize=512)
def adapted_ber(channel: ChannelProfile, tx_preset: str, training_symbols: int, seed: int) -> float:
    """BER of a receiver adapted to ``channel`` behind the partner's ``tx_preset``."""
    rng = component_rng(seed, "phy", "adapted", repr(channel), tx_preset, training_symbols)
    eq = EqProfile(block_symbols=training_symbols, initial_preset=tx_preset)
    z, d = equalize(channel, rng, eq.final_eval_blocks * training_symbols, 1, tx_preset, eq)
    return float(estimate_ber(z, d, eq.min_errors).ber[0])


def _runs(above: np.ndarray) -> np.ndarray:
    """Length of the run of True ending at each position, along the last axis."""
    count = np.cumsum(above, axis=-1)
    reset = np.maximum.accumulate(np.where(above, 0, count), axis=-1)
    return count - reset


def retrain_due(errors: np.ndarray, bits: float, threshold: float, windows: int) -> int | None:
    """The first cycle (index along the last axis) ending a run of ``windows`` consecutive
    cycles whose measured BER (errors / bits) exceeds ``threshold`` in some direction."""
    above = errors / bits > threshold
    due = np.flatnonzero((_runs(above) >= windows).any(axis=0))
    return int(due[0]) if due.size else None


def monitor_link(
    trace: LinkTrace,
    end_ns: float,
    rng: np.random.Generator,
    ber_at: Callable[[np.ndarray], np.ndarray],
    retrain_at: Callable[[float], None],
) -> list[dict]:
    """One link's training cycles in L0 until ``end_ns``, retraining when the device says.

    ``ber_at(mids)`` gives each direction's BER at the cycles' mid-times, shape
    (2, cycles); ``retrain_at(t)`` retrains the link from L0 at ``t`` (it appends the
    states to ``trace``). Returns the ``ber_windows`` rows.
    """
    link = trace.link
    device = link.device
    bits = device.training_cycle_bits
    window = bits / link.lane_rate_bits_per_ns
    rows: list[dict] = []
    while trace.in_l0:
        t0 = trace.states[-1].t_enter_ns
        n = math.floor((end_ns - t0) / window * (1 + 1e-12))
        if n <= 0:
            break
        starts = t0 + window * np.arange(n)
        errors = rng.binomial(int(bits), ber_at(starts + window / 2))
        due = retrain_due(errors, bits, device.retrain_threshold, device.retrain_windows)
        last = n - 1 if due is None else due
        for j in range(last + 1):
            for d in (0, 1):
                rows.append(
                    {
                        "link": link.name,
                        "direction": link.channel_names[d],
                        "t_start_ns": float(starts[j]),
                        "t_ns": float(starts[j] + window),
                        "bits": int(bits),
                        "errors": int(errors[d, j]),
                    }
                )
        if due is None:
            break
        retrain_at(float(starts[due] + window))
    return rows


def monitor(
    traces: list[LinkTrace],
    end_ns: float,
    seed: int,
    channel_at: Callable[[PhyLink, float], ChannelProfile],
) -> list[dict]:
    """Count errors per training cycle of every link in L0 until ``end_ns``; retrain as due.

    ``channel_at(link, t_phy_ns)`` is the link's channel at a PHY-clock time.
    Returns the ``ber_windows`` rows; retrainings are appended to the traces.
    """
    rows: list[dict] = []
    for trace in traces:

        def ber_at(mids: np.ndarray, trace: LinkTrace = trace) -> np.ndarray:
            return _window_ber(trace, mids, seed, channel_at)

        def retrain_at(t: float, trace: LinkTrace = trace) -> None:
            retrain(trace, t, seed, channel_at)

        rng = component_rng(seed, "phy", "ber", trace.link.name)
        rows.extend(monitor_link(trace, end_ns, rng, ber_at, retrain_at))
    return rows


def _window_ber(
    trace: LinkTrace,
    mids: np.ndarray,
    seed: int,
    channel_at: Callable[[PhyLink, float], ChannelProfile],
) -> np.ndarray:
    """BER of each direction in each window, shape (2, windows)."""
    physics = trace.physics
    assert physics is not None
    link = trace.link
    trained = physics.channel
    out = np.empty((2, mids.size))
    states: dict[ChannelProfile, list[int]] = {}
    for j, t in enumerate(mids):
        states.setdefault(channel_at(link, float(t)), []).append(j)
    for channel, where in states.items():
        for d in (0, 1):
            if channel == trained:
                value = physics.eq.final_ber[d]
            else:
                value = adapted_ber(
                    channel, physics.eq.tx_presets[d], link.device.training_symbols, seed
                )
            out[d, where] = value
    return out

"""PHY figures: the reset-to-L0 training Gantt chart, the retrainings after it, and eye
diagrams before and after EQ.

All are drawn from the run's tables: ``link_states`` for the Gantt chart and the
retrainings (every stay out of L0 after a link's first L0, by what sent it there), and
``phy_groups`` (each signal-level group's channel, tuned Tx preset and linear Rx
FFE) for the eyes, which re-create the received waveform from the channel's
pulse response: before EQ behind the initial Tx preset, after EQ behind the
tuned preset and the Rx FFE (the DFE acts on decisions and is not drawn).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.patches import Patch

from sitssim.phy.channel import PAM4_LEVELS, ChannelProfile, noise_rms, pulse_response
from sitssim.phy.equalizer import preset_coefficients
from sitssim.phy.ltssm import State
from sitssim.spec.catalogue import CLAUSES

# The budget line is the clause's own limit, so the chart and the verdict cannot disagree.
RESET_TO_L0_US = CLAUSES["phy.reset_to_l0"].limits["time"].bound()
MAX_GANTT_LINKS = 40
MAX_EYE_GROUPS = 4
EYE_SYMBOLS = 600
EYE_SEED = 0

_COLOURS = {
    "Detect": "0.6",
    "Polling": "tab:blue",
    "Configuration": "tab:cyan",
    "Recovery": "tab:purple",
    "EQ phase 0": "#fdd49e",
    "EQ phase 1": "#fdbb84",
    "EQ phase 2": "#fc8d59",
    "EQ phase 3": "#d7301f",
    "L0": "tab:green",
    "other": "black",
}


def _family(state: str) -> str:
    if state.startswith("Recovery.Equalization.Phase"):
        return f"EQ phase {state[-1]}"
    for family in ("Detect", "Polling", "Configuration", "Recovery", "L0"):
        if state.startswith(family):
            return family
    return "other"


def _bars(ax: plt.Axes, y: np.ndarray, x0: np.ndarray, x1: np.ndarray, colours: list[str]) -> None:
    """Horizontal bars ``x0..x1`` on rows ``y``, as one collection: a patch per bar was
    most of a chart's drawing time."""
    corners = np.stack(
        [
            np.stack([x0, x1, x1, x0], axis=-1),
            np.stack([y - 0.35, y - 0.35, y + 0.35, y + 0.35], axis=-1),
        ],
        axis=-1,
    )
    ax.add_collection(PolyCollection(corners, facecolors=colours, linewidths=0))


def training_gantt(tables: dict[str, pd.DataFrame], title: str, path: Path) -> bool:
    """Each link's LTSSM states from the reset to its first L0, slowest links on top."""
    states = tables.get("link_states")
    if states is None or states.empty:
        return False
    l0 = states[states["state"] == State.L0.value].groupby("link")["t_enter_ns"].min()
    order = (
        pd.Series(math.inf, index=sorted(states["link"].unique()))
        .combine(l0, lambda a, b: b if not math.isnan(b) else a)
        .sort_values(ascending=False, kind="stable")
    )
    shown = list(order.index[:MAX_GANTT_LINKS])
    finite = order[np.isfinite(order)]
    end_ns = float(finite.max()) if len(finite) else float(states["t_enter_ns"].max())
    horizon_us = max(end_ns / 1e3, RESET_TO_L0_US) * 1.08
    fig, ax = plt.subplots(figsize=(9, max(3.0, 0.28 * len(shown) + 1.5)))
    row = {link: y for y, link in enumerate(shown)}
    bars = states[states["link"].isin(row) & (states["t_enter_ns"] <= end_ns)]
    stop_ns = bars["t_exit_ns"].fillna(math.inf).clip(upper=horizon_us * 1e3)
    _bars(
        ax,
        bars["link"].map(row).to_numpy(dtype=float),
        bars["t_enter_ns"].to_numpy() / 1e3,
        stop_ns.to_numpy() / 1e3,
        [_COLOURS[_family(s)] for s in bars["state"]],
    )
    # Room above the first link for the limit's label.
    ax.set_ylim(-1.5, len(shown) - 0.5)
    ax.axvline(RESET_TO_L0_US, color="red", linestyle="--", linewidth=1)
    ax.text(
        RESET_TO_L0_US,
        -0.9,
        f"{RESET_TO_L0_US:g} µs (phy.reset_to_l0) ",
        color="red",
        fontsize="small",
        ha="right",
    )
    ax.set_yticks(range(len(shown)), shown, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, horizon_us)
    ax.set_xlabel("time since reset (µs)")
    more = f" ({len(shown)} slowest of {len(order)})" if len(order) > len(shown) else ""
    ax.set_title(f"{title}: link training, reset to L0{more}")
    ax.legend(
        handles=[Patch(color=c, label=k) for k, c in _COLOURS.items() if k != "other"],
        fontsize="x-small",
        ncol=5,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.12),
    )
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True


# What sends a link in L0 back through Recovery, as ``link_states`` records it.
_RETRAIN_COLOURS = {
    "ber_retrain": "tab:orange",
    "replay_rollover": "tab:purple",
}


def retrain_episodes(states: pd.DataFrame) -> pd.DataFrame:
    """Each stay out of L0 after a link's first L0: ``link``, ``cause`` (of the first state
    entered), ``t_start_ns``, ``t_end_ns`` (back in L0; inf if the run ended first)."""
    rows: list[tuple[str, str, float, float]] = []
    # Links in name order, each link's rows by entry time (ties in table order), in one
    # pass over plain columns: per-link frames cost seconds at a thousand links.
    ordered = states.sort_values("t_enter_ns", kind="stable").sort_values("link", kind="stable")
    link_before = None
    trained = False
    start: tuple[float, str] | None = None
    for link, state, t_enter, cause in zip(
        ordered["link"].tolist(),
        ordered["state"].tolist(),
        ordered["t_enter_ns"].tolist(),
        ordered["cause"].tolist(),
        strict=True,
    ):
        if link != link_before:
            if start is not None:
                rows.append((link_before, start[1], start[0], math.inf))
            link_before, trained, start = link, False, None
        if state == State.L0.value:
            if start is not None:
                rows.append((link, start[1], start[0], t_enter))
                start = None
            trained = True
        elif trained and start is None:
            start = (t_enter, cause)
    if start is not None:
        rows.append((link_before, start[1], start[0], math.inf))
    return pd.DataFrame(rows, columns=["link", "cause", "t_start_ns", "t_end_ns"])


def retrain_timeline(
    tables: dict[str, pd.DataFrame], title: str, path: Path, end_ns: float
) -> bool:
    """Every retraining after reset-to-L0, per link, over the whole run (none: no figure)."""
    states = tables.get("link_states")
    if states is None or states.empty:
        return False
    episodes = retrain_episodes(states)
    if episodes.empty:
        return False
    links = sorted(episodes["link"].unique())
    shown = links[:MAX_GANTT_LINKS]
    end_us = max(end_ns, float(episodes["t_start_ns"].max())) / 1e3
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.3 * len(shown) + 1.5)))
    row = {link: y for y, link in enumerate(shown)}
    drawn = episodes[episodes["link"].isin(row)]
    start_us = drawn["t_start_ns"].to_numpy() / 1e3
    # Recoveries last tens of µs in runs of ms: never thinner than a hairline.
    stop_us = np.maximum(
        np.minimum(drawn["t_end_ns"].to_numpy() / 1e3, end_us), start_us + end_us / 800
    )
    _bars(
        ax,
        drawn["link"].map(row).to_numpy(dtype=float),
        start_us,
        stop_us,
        [_RETRAIN_COLOURS.get(c, _COLOURS["other"]) for c in drawn["cause"]],
    )
    ax.set_ylim(-0.5, len(shown) - 0.5)
    ax.set_yticks(range(len(shown)), shown, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, end_us * 1.02)
    ax.set_xlabel("time since reset (µs)")
    more = f" ({len(shown)} of {len(links)} links)" if len(links) > len(shown) else ""
    counts = episodes["cause"].value_counts()
    ax.set_title(
        f"{title}: retrainings after L0{more}: "
        + ", ".join(f"{n} {cause}" for cause, n in sorted(counts.items()))
    )
    ax.legend(
        handles=[Patch(color=c, label=k) for k, c in _RETRAIN_COLOURS.items() if k in counts.index],
        fontsize="x-small",
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
    )
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True


def _eye_traces(
    channel: ChannelProfile,
    tx_preset: str,
    rx_ffe: np.ndarray | None,
    rx_ffe_pre: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Received waveform cut into 2-UI traces centred on each sampling instant.

    The equaliser samples where the CDR locked on the channel behind the Tx preset
    (see ``equalizer.py``), so the eye after the Rx FFE is centred there too.
    """
    pulse = pulse_response(channel).with_tx_ffe(preset_coefficients(tx_preset))
    sampling_ui = pulse.lock_ui
    sigma = noise_rms(channel)
    if rx_ffe is not None:
        pulse = pulse.with_ffe(rx_ffe, rx_ffe_pre)
        sigma *= float(np.linalg.norm(rx_ffe))
    symbols = PAM4_LEVELS[rng.integers(0, 4, EYE_SYMBOLS)]
    taps = np.arange(-pulse.n_pre - 1, pulse.n_post + 2)
    offsets = np.arange(-pulse.os, pulse.os) / pulse.os
    centres = np.arange(taps.max(), EYE_SYMBOLS + taps.min())
    # waveform(n + f) = sum_k x[n - k] p(f + k)
    response = pulse.at(offsets[:, None] + taps[None, :] + (sampling_ui - pulse.lock_ui))
    window = symbols[centres[:, None] - taps[None, :]]
    traces = window @ response.T
    traces = traces + rng.normal(0.0, sigma, traces.shape)
    return offsets, traces


def eye_diagrams(tables: dict[str, pd.DataFrame], title: str, path: Path) -> bool:
    """Eyes before and after EQ for up to four signal-level groups."""
    groups = tables.get("phy_groups")
    if groups is None or groups.empty:
        return False
    shown = groups.head(MAX_EYE_GROUPS)
    fig, axes = plt.subplots(len(shown), 2, figsize=(9, 3.2 * len(shown)), squeeze=False)
    for row, g in enumerate(shown.itertuples()):
        channel = ChannelProfile(
            loss_db=g.loss_db,
            snr_db=g.snr_db,
            rj_rms_ui=g.rj_ui,
            n_pre=int(g.pre_cursors),
            n_post=int(g.post_cursors),
            dielectric_fraction=g.dielectric_fraction,
        )
        for col, (label, preset, ffe) in enumerate(
            (
                (f"before EQ (Tx {g.initial_preset})", g.initial_preset, None),
                (f"after EQ (Tx {g.tx_preset} + Rx FFE)", g.tx_preset, np.asarray(g.rx_ffe)),
            )
        ):
            rng = np.random.default_rng(EYE_SEED)
            t, traces = _eye_traces(channel, preset, ffe, int(g.rx_ffe_pre), rng)
            ax = axes[row, col]
            # One collection of traces, not a line object each (as a scope's persistence).
            ax.add_collection(
                LineCollection(
                    np.stack(np.broadcast_arrays(t, traces), axis=-1),
                    colors="tab:blue",
                    alpha=0.04,
                    linewidths=0.6,
                )
            )
            ax.set_xlim(t[0], t[-1])
            ax.set_ylim(-6, 6)
            ax.set_xlabel("time from sampling instant (UI)")
            ax.set_title(f"{g.loss_db:g} dB, SNR {g.snr_db:g} dB: {label}", fontsize="small")
            ax.grid(True, alpha=0.3)
    fig.suptitle(f"{title}: PAM4 eye diagrams", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def write_phy_figures(
    tables: dict[str, pd.DataFrame], title: str, folder: Path, end_ns: float
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    training_gantt(tables, title, folder / "training_gantt.png")
    retrain_timeline(tables, title, folder / "link_retrains.png", end_ns)
    eye_diagrams(tables, title, folder / "eye_diagrams.png")

"""How a link's pre-FEC BER turns into message-latency tails: a sweep of one scenario.

For each pre-FEC BER the scenario is run with every flit-mode link at that BER. A point
is only worth reading if replays actually happen in it, so each run is made long enough
for at least ``min_replays`` replays to be *expected* (from the per-flit replay
probability and the flit rate of an error-free run); where that would need more than
``max_duration`` of traffic, the point is run at the scenario's own duration and marked
"none expected". Latency percentiles get distribution-free confidence intervals from
order statistics: for the q-quantile of n samples the interval runs between the order
statistics whose ranks bound a Binomial(n, q) variable with the requested confidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import binom

from sitssim.link.flit import BurstModel, flit_error_rates
from sitssim.link.flit_link import TLP_BYTES_PER_FLIT
from sitssim.scenario import Scenario
from sitssim.simulation import RunResult, simulate

DEFAULT_BERS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4)
QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999}


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float


def quantile_interval(samples: np.ndarray, q: float, confidence: float = 0.95) -> Interval:
    """The q-quantile of ``samples`` with a distribution-free confidence interval (NaN if n is
    too small for the interval to exist)."""
    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan)
    value = float(np.quantile(x, q))
    alpha = 1.0 - confidence
    lo_rank = int(binom.ppf(alpha / 2, n, q))
    hi_rank = int(binom.ppf(1 - alpha / 2, n, q)) + 1
    low = float(x[lo_rank - 1]) if lo_rank >= 1 else math.nan
    high = float(x[hi_rank - 1]) if hi_rank <= n else math.nan
    return Interval(value, low, high)


def _with(scenario: Scenario, ber: float | None, duration: float) -> Scenario:
    flit = scenario.link_layer.flit.model_copy(update={"pre_fec_ber": ber})
    link_layer = scenario.link_layer.model_copy(update={"flit": flit})
    return scenario.updated(link_layer=link_layer, duration=duration)


def _replay_probability(scenario: Scenario, ber: float, result: RunResult) -> float:
    """Largest per-flit replay probability among the run's flit-mode channels (the expected
    replay count uses it for every channel, so a point is judged by its worst link)."""
    burst = scenario.link_layer.flit.burst_propagation
    lanes = {c.lanes for c in result.fabric.channels if c.encoding == "flit256"}
    return max(
        (
            float(flit_error_rates(ber, BurstModel(p_propagate=burst, lanes=n)).p_replay)
            for n in lanes
        ),
        default=0.0,
    )


def ber_latency_sweep(
    scenario: Scenario,
    bers: tuple[float, ...] = DEFAULT_BERS,
    min_replays: int = 100,
    max_duration_ns: float | None = None,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """One row per BER: run length, expected and observed replays, latency quantiles + CIs."""
    cap = max_duration_ns if max_duration_ns is not None else 16 * scenario.duration
    clean = simulate(_with(scenario, None, scenario.duration))
    flits_per_ns = _flit_rate_per_ns(clean)
    rows = []
    for ber in bers:
        p = _replay_probability(scenario, ber, clean)
        needed = min_replays / (p * flits_per_ns) if p > 0 and flits_per_ns > 0 else math.inf
        duration = max(scenario.duration, needed) if needed <= cap else scenario.duration
        status = "ok" if needed <= cap else "none expected"
        result = simulate(_with(scenario, ber, duration))
        messages = result.tables["messages"]
        latency = messages.loc[messages["kind"] == "data", "latency_ns"].to_numpy()
        row: dict[str, object] = {
            "pre_fec_ber": ber,
            "p_replay_flit": p,
            "duration_ns": duration,
            "expected_replays": p * flits_per_ns * duration,
            "replays": result.metrics["link_layer"]["replays"],
            "messages": len(latency),
            "status": status,
        }
        for name, q in QUANTILES.items():
            interval = quantile_interval(latency, q, confidence)
            row[name] = interval.value
            row[f"{name}_low"] = interval.low
            row[f"{name}_high"] = interval.high
        rows.append(row)
    return pd.DataFrame(rows)


def _flit_rate_per_ns(result: RunResult) -> float:
    """Flits per ns crossing the run's flit-mode channels (bytes over TLP bytes per flit)."""
    links = result.tables["links"]
    carried = links.loc[links["encoding"] == "flit256", "bytes"].sum()
    return float(carried) / TLP_BYTES_PER_FLIT / result.scenario.duration


def plot_sweep(table: pd.DataFrame, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in QUANTILES:
        value = table[name].to_numpy()
        low = np.nan_to_num(value - table[f"{name}_low"].to_numpy(), nan=0.0)
        high = np.nan_to_num(table[f"{name}_high"].to_numpy() - value, nan=0.0)
        ax.errorbar(
            table["pre_fec_ber"],
            value,
            yerr=[low, high],
            marker="o",
            capsize=3,
            label=f"{name[:-1]}.{name[-1]}" if name == "p999" else name,
        )
    for ber, status in zip(table["pre_fec_ber"], table["status"], strict=True):
        if status != "ok":
            # Along the top edge, clear of the curves whatever their scale.
            ax.text(
                ber,
                0.97,
                "none expected",
                transform=ax.get_xaxis_transform(),
                fontsize="x-small",
                rotation=90,
                va="top",
                ha="right",
                color="grey",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pre-FEC BER")
    ax.set_ylabel("message latency (ns)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)

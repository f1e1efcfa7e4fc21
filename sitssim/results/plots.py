"""Figures a person looks at first: latency against its bound, and link load."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from sitssim.results.inference_plots import write_inference_figures
from sitssim.simulation import RunResult


def _cdf(ax: plt.Axes, values: np.ndarray, label: str, **style: object) -> None:
    values = np.sort(values)
    ax.plot(values, np.arange(1, len(values) + 1) / len(values), label=label, **style)


def latency_cdf(result: RunResult, path: Path) -> None:
    messages = result.tables["messages"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for kind, group in messages.groupby("kind", observed=True):
        _cdf(ax, group["latency_ns"].to_numpy(), f"{kind}: measured")
        _cdf(ax, group["zero_load_ns"].to_numpy(), f"{kind}: zero-load bound", linestyle="--")
    ax.set_xscale("log")
    ax.set_xlabel("latency (ns)")
    ax.set_ylabel("fraction of messages")
    ax.set_title(f"{result.scenario.name}: message latency vs zero-load bound")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def link_utilisation(result: RunResult, path: Path) -> None:
    links = result.tables["links"].sort_values("utilisation", ascending=False)
    shown = links.head(40)
    fig, ax = plt.subplots(figsize=(7, max(3.0, 0.22 * len(shown) + 1)))
    ax.barh(shown["name"], shown["utilisation"], color="tab:blue")
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("utilisation (busy time / simulated time)")
    title = f"{result.scenario.name}: busiest channels"
    if len(links) > len(shown):
        title += f" ({len(shown)} of {len(links)})"
    ax.set_title(title)
    ax.tick_params(axis="y", labelsize="small")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_figures(result: RunResult, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if len(result.tables["messages"]):
        latency_cdf(result, folder / "latency_cdf.png")
    link_utilisation(result, folder / "link_utilisation.png")
    write_inference_figures(result.tables, result.scenario.name, folder)

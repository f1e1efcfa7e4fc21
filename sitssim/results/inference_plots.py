"""Figures of inference runs: TTFT and TPOT per request, and what a decode step is made of."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

NS_PER_MS = 1e6


def ttft_tpot(requests: pd.DataFrame, steps: pd.DataFrame, title: str, path: Path) -> None:
    """Left: TTFT and TPOT per request. Right: decode steps split into compute and fabric time."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    x = np.arange(len(requests))
    left.bar(x - 0.2, requests["ttft_ns"] / NS_PER_MS, width=0.4, label="TTFT")
    left.bar(x + 0.2, requests["tpot_ns"] / NS_PER_MS, width=0.4, label="TPOT")
    left.set_yscale("log")
    shown = pd.concat([requests["ttft_ns"], requests["tpot_ns"]]).dropna() / NS_PER_MS
    if len(shown) and shown.min() > 0:
        left.set_ylim(bottom=shown.min() / 2)
    left.set_xticks(x, [str(r) for r in requests["request"]])
    left.set_xlabel("request")
    left.set_ylabel("ms")
    left.set_title("time to first token, time per output token")
    left.grid(True, axis="y", which="both", alpha=0.3)
    left.legend(fontsize="small")

    decode = steps[steps["phase"] == "decode"]
    if len(decode):
        per_token = decode["tokens_out"].to_numpy()
        parts = {
            "compute": decode["compute_ns"].to_numpy(),
            "collectives (fabric)": decode["collective_ns"].to_numpy(),
            "pipeline transfers (fabric)": decode["transfer_ns"].to_numpy(),
            "kernel launches": decode["launch_ns"].to_numpy(),
        }
        bottom = np.zeros(len(decode))
        for label, values in parts.items():
            if values.any():
                share = values / per_token / NS_PER_MS
                right.bar(np.arange(len(decode)), share, bottom=bottom, width=1.0, label=label)
                bottom += share
        fabric = (decode["collective_ns"] + decode["transfer_ns"]).sum()
        total = (decode["t_end_ns"] - decode["t_start_ns"]).sum()
        right.set_title(f"decode time per token; fabric share {fabric / total:.1%}")
        right.legend(fontsize="small")
    else:
        right.set_title("no decode steps")
    right.set_xlabel("decode step")
    right.set_ylabel("ms per output token")
    right.grid(True, axis="y", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_inference_figures(tables: dict[str, pd.DataFrame], name: str, folder: Path) -> None:
    """One TTFT / TPOT figure per inference workload of the run (nothing without one)."""
    requests = tables.get("requests")
    steps = tables.get("inference_steps")
    if requests is None or steps is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for workload, reqs in requests.groupby("workload", sort=True):
        ttft_tpot(
            reqs,
            steps[steps["workload"] == workload],
            f"{name}: inference workload {workload}",
            folder / f"inference_{workload}_ttft_tpot.png",
        )

"""Write notebooks/load_latency_study.ipynb from the cells below (and run it).

``python notebooks/make_load_latency_study.py`` rewrites the notebook and executes it in
place with the full studies (``--no-execute`` writes it without outputs). The test suite
checks that the shipped cells match ``build_notebook()`` and executes it with
``SITSSIM_QUICK=1``; the last cell checks what the notebook computed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from notebook_io import STUDY_SETUP, generate, python_notebook  # noqa: E402

NOTEBOOK = HERE / "load_latency_study.ipynb"

INTRO = """\
# Latency against offered load, up to saturation

The classic interconnect curve, for each shipped fabric and four traffic patterns: every
GPU injects 4 KiB messages (Poisson arrivals) at a fraction of its link rate, from 0.1 to
1.0, and the run measures what was delivered and how long messages took. Three study
files in `studies/`, three replications each:

* `load_latency_fat_tree`: the two-level fat tree of `scenarios/fat_tree_8gpu.yaml`
  (8 GPUs, radix-4 leaves, 4 spines, deterministic shortest-path routes);
* `load_latency_nvswitch`: `scenarios/nvswitch_8gpu.yaml` (8 GPUs, 4 NVSwitch planes,
  18 links per GPU);
* `load_latency_direct_rc`: `scenarios/direct_rc_4gpu.yaml` (4 GPUs on one root complex).

Each run also carries its own **throughput bound**: the channel-load LP of the traffic it
offered (the most that traffic could deliver over these routes), and its **channel
headroom**, the bottleneck channel's capacity over its offered load. A pattern's
saturation point is therefore predicted from the channel loads of a run below it: the
offered load times the headroom of the heaviest run that still had some. The dotted
lines below are that prediction; the curves are what the runs observed.
"""

RUN = """\
FABRICS = ("fat_tree", "nvswitch", "direct_rc")
QUICK_KEEP = {"workloads.0.pattern": ["uniform_random", "bit_complement"],
              "workloads.0.load": [0.2, 0.7]}
runs = {f: run(f"load_latency_{f}", QUICK_KEEP) for f in FABRICS}
"""

PLOT = """\
PATTERN, LOAD = "workloads.0.pattern", "workloads.0.load"
fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
saturation = {}
for ax, fabric in zip(axes, FABRICS):
    study, points, summary = runs[fabric]
    for k, (pattern, curve) in enumerate(summary.groupby(PATTERN, sort=False)):
        colour = f"C{k}"
        offered = curve["metrics.offered_GBps.mean"]
        ax.errorbar(offered, curve["metrics.data_latency_ns.mean.mean"] / 1e3,
                    yerr=curve["metrics.data_latency_ns.mean.ci"].fillna(0) / 1e3,
                    color=colour, marker="o", ms=3, capsize=2, label=f"{pattern}: mean")
        ax.plot(offered, curve["metrics.data_latency_ns.p99.mean"] / 1e3,
                color=colour, ls="--", lw=1, label=f"{pattern}: p99")
        # The heaviest run the LP still gave headroom: its busiest channel, scaled to full.
        below = curve[curve["metrics.channel_headroom.mean"] > 1]
        light = below.iloc[-1] if len(below) else curve.iloc[0]
        knee = light["metrics.offered_GBps.mean"] * light["metrics.channel_headroom.mean"]
        saturation[fabric, pattern] = knee
        ax.axvline(knee, color=colour, ls=":", lw=1)
    ax.plot(offered, curve["metrics.data_zero_load_ns.mean.mean"] / 1e3, "k-", lw=0.8,
            label="zero-load bound (mean)")
    ax.set_yscale("log")
    ax.set_xlabel("offered load (GB/s, all GPUs)")
    ax.set_ylabel("data-message latency (µs)")
    ax.set_title(study.description, fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
axes[0].legend(fontsize="x-small")
fig.tight_layout()
plt.show()
"""

TABLE = """\
rows = []
for fabric in FABRICS:
    _, _, summary = runs[fabric]
    for pattern, curve in summary.groupby(PATTERN, sort=False):
        top = curve.iloc[-1]
        rows.append({
            "fabric": fabric,
            "pattern": pattern,
            "first channel full at (GB/s)": round(saturation[fabric, pattern]),
            "delivered, heaviest load (GB/s)": round(top["metrics.delivered_GBps.mean"]),
            "LP bound, heaviest load (GB/s)": round(top["metrics.throughput_bound_GBps.mean"]),
            "mean latency, lightest / heaviest (ns)": (
                f"{curve['metrics.data_latency_ns.mean.mean'].iloc[0]:.0f} / "
                f"{top['metrics.data_latency_ns.mean.mean']:.0f}"
            ),
        })
import pandas as pd  # noqa: E402
pd.DataFrame(rows)
"""

DISCUSSION = """\
**Reading the curves.** Every curve starts at its zero-load bound and stays flat until the
bottleneck channel fills, then rises steeply where the LP said it would, and what the
fabric delivers stops growing at the LP bound: the saturation points were predicted from
the channel loads of runs below them, and the heavier runs queue there. The dotted line
is where the first channel fills; a pattern whose flows do not all cross that channel
delivers more than that (the other flows still get through) up to the LP bound, which
is why the table's delivered bandwidth can exceed the line.

* **Fat tree.** Uniform random traffic uses every spine evenly and saturates only near
  full load. The adversarial patterns do not: the fat tree pins pair (s, d) to spine
  (s + d) mod 4 among its tied shortest paths (ordering kept per pair, no adaptive
  routing), and every bit-complement pair sums to 7, so every message of it crosses
  spine 3: a quarter of the bisection, and saturation near a quarter of the load (about
  240 GB/s of 950). Permutation and tornado collide on fewer spines and land between.
  This is the textbook case for ECMP or adaptive routing in a fat tree, produced here by
  the model's own routing rule.
* **NVSwitch.** One switch hop with 18 links per GPU spread over 4 planes: every pattern
  is a permutation of the switch's ports or close to it, the GPU's own links are the
  bottleneck, and every pattern saturates near full load; uniform random, whose
  destinations collide at random, queues earliest.
* **Root complex.** Four GPUs on one root complex: every pattern loads each GPU's link to
  the root complex the same way, so the three permutations give the same curve; uniform
  random differs only in how its destinations collide.

Runs last 20 µs of traffic, so a saturated run's latency grows with the run's length
rather than settling (its queue grows for as long as the run lasts): above saturation the
curve says "unbounded", not a value to read. Mean and p99 intervals are 95 % Student-t
over three seeds (common random numbers across loads).
"""

CHECKS = """\
for fabric in FABRICS:
    _, points, summary = runs[fabric]
    assert (points["status"] == "ok").all(), fabric
    # Nothing delivers more than the LP bound of the traffic it offered.
    assert (points["metrics.delivered_GBps"]
            <= points["metrics.throughput_bound_GBps"] * (1 + 1e-9)).all(), fabric
    # Where the bottleneck channel has room to spare, what is offered is delivered, at
    # near the zero-load latency; where the LP says it is oversubscribed, it is not.
    roomy = points[points["metrics.channel_headroom"] > 2]
    assert len(roomy) and (roomy["metrics.delivered_GBps"]
                           > 0.97 * roomy["metrics.offered_GBps"]).all(), fabric
    assert (roomy["metrics.data_latency_ns.mean"]
            < 1.5 * roomy["metrics.data_zero_load_ns.mean"]).all(), fabric
    over = points[points["metrics.channel_headroom"] < 0.9]
    assert (over["metrics.delivered_GBps"] < 0.95 * over["metrics.offered_GBps"]).all(), fabric
    for pattern, curve in summary.groupby(PATTERN, sort=False):
        latency = curve["metrics.data_latency_ns.mean.mean"].to_numpy()
        assert latency[-1] > latency[0], (fabric, pattern)
# Deterministic routes on the fat tree: bit-complement saturates far below uniform random.
assert saturation["fat_tree", "bit_complement"] < 0.5 * saturation["fat_tree", "uniform_random"]
print("checks passed")
"""


def build_notebook() -> nbformat.NotebookNode:
    return python_notebook(
        [
            new_markdown_cell(INTRO),
            new_code_cell(STUDY_SETUP),
            new_code_cell(RUN),
            new_code_cell(PLOT),
            new_code_cell(TABLE),
            new_markdown_cell(DISCUSSION),
            new_code_cell(CHECKS),
        ]
    )


if __name__ == "__main__":
    generate(build_notebook, NOTEBOOK, __doc__.splitlines()[0], timeout=3600)

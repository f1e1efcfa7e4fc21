"""Write notebooks/calibration_allreduce.ipynb from the cells below (and run it).

The notebook is generated so that its code lives in a reviewable Python file;
``python notebooks/make_calibration.py`` rewrites it and executes it in place
(``--no-execute`` writes it without outputs). The test suite checks that the
shipped notebook's cells match ``build_notebook()`` and runs it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from notebook_io import generate, python_notebook  # noqa: E402

NOTEBOOK = HERE / "calibration_allreduce.ipynb"

INTRO = """\
# Calibration: ring all-reduce on an HGX H100 fabric against nccl-tests

`scenarios/hgx_h100.yaml` models one HGX H100 board: 8 GPUs, each with 18 NVLink4-class
links spread 5-4-4-5 over 4 NVSwitch planes, and runs a ring all-reduce from 8 B to 1 GiB,
one size after the other. Every all-reduce is 2(N-1) = 14 dependent steps of real messages
through the simulated ports and switches; nothing in its timing is fitted.

It is compared with three published references (files in `notebooks/data/`, each naming its
exact source in its header):

* **measured, NVLS:** an `all_reduce_perf` table from one 8x H100 node, 128 MiB to 4 GiB
  (NVIDIA/nccl-tests issue #290). NCCL used NVLink SHARP there, reducing inside the switches.
* **measured, ring:** the ring-only bus bandwidth of such a node with NVLS disabled
  (368.76 GB/s, nccl-tests #309; ~370 GB/s by the NCCL maintainers, nccl-tests #212).
* **NCCL's cost model:** the latency and bandwidth tables NCCL itself uses to pick an
  algorithm (`src/graph/tuning.cc`), evaluated for a ring on NVLink with the measured ring
  bandwidth. No stored public table covers one 8x H100 node below 128 MiB, so this model is
  the reference for small and medium sizes; it is NCCL's estimate, not a measurement.

Bus bandwidth is nccl-tests' `busbw = algbw * 2(N-1)/N`, with `algbw = bytes / time`.
"""

SETUP = """\
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "pyproject.toml").exists())
# This checkout's sitssim, even if another copy is installed.
sys.path.insert(0, str(ROOT))
import sitssim  # noqa: E402

DATA = ROOT / "notebooks" / "data"
result = sitssim.simulate(sitssim.load_scenario(ROOT / "scenarios" / "hgx_h100.yaml"))
sim = result.tables["collectives"]
N = int(sim["n_ranks"].iloc[0])
fabric = result.fabric
per_gpu = sum(c.bytes_per_ns for c in fabric.channels if c.src == fabric.gpus[0])
print(f"{len(sim)} ring all-reduces, {N} GPUs, {sim['bytes'].min()} B to {sim['bytes'].max()} B")
print(f"injection bandwidth per GPU: {per_gpu:.1f} GB/s (NVLink4 line rate: 450 GB/s)")
print(f"every rank ended with every contribution: {bool(sim['result_complete'].all())}")
"""

REFERENCES = """\
published = pd.read_csv(DATA / "nccl_tests_h100_allreduce.csv", comment="#")
ring_busbw = pd.read_csv(DATA / "h100_ring_busbw.csv", comment="#")
tuning = pd.read_csv(DATA / "nccl_tuning_nvlink.csv", comment="#").set_index("protocol")
RING_BUSBW = float(ring_busbw["busbw_GBps"].iloc[0])
STEPS = 2 * (N - 1)


def nccl_model_us(size_bytes: np.ndarray) -> pd.DataFrame:
    \"\"\"NCCL's ring estimate per protocol and the fastest one (what NCCL would pick).\"\"\"
    out = {}
    for proto, row in tuning.iterrows():
        busbw = RING_BUSBW * row["bw_factor"]
        algbw = busbw * N / STEPS
        latency = row["base_latency_us"] + STEPS * row["step_latency_us"]
        out[proto] = latency + size_bytes / algbw / 1e3
    frame = pd.DataFrame(out, index=size_bytes)
    frame["best"] = frame.min(axis=1)
    frame["protocol"] = frame[list(tuning.index)].idxmin(axis=1)
    return frame


model = nccl_model_us(sim["bytes"].to_numpy(dtype=float))
table = pd.DataFrame(
    {
        "bytes": sim["bytes"],
        "sim_us": sim["duration_ns"].to_numpy() / 1e3,
        "bound_us": sim["lower_bound_ns"].to_numpy() / 1e3,
        "sim_busbw": sim["busbw_GBps"],
        "model_us": model["best"].to_numpy(),
        "model_protocol": model["protocol"].to_numpy(),
    }
)
table = table.merge(
    published[["size_bytes", "time_us", "busbw_GBps"]].rename(
        columns={"size_bytes": "bytes", "time_us": "nvls_us", "busbw_GBps": "nvls_busbw"}
    ),
    on="bytes",
    how="left",
)
table["err_vs_model"] = table["sim_us"] / table["model_us"] - 1
table["err_vs_nvls"] = table["sim_us"] / table["nvls_us"] - 1
pd.set_option("display.width", 160)
print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
"""

PLOT = """\
fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(12, 4.2))
ax_t.loglog(table["bytes"], table["sim_us"], "o-", label="sitssim ring (this fabric)")
ax_t.loglog(table["bytes"], table["bound_us"], ":", label="analytic lower bound")
ax_t.loglog(table["bytes"], table["model_us"], "--", label="NCCL cost model, ring")
ax_t.loglog(published["size_bytes"], published["time_us"], "s", label="nccl-tests #290 (NVLS)")
ax_t.set_xlabel("all-reduce size (bytes)")
ax_t.set_ylabel("time (us)")
ax_t.legend()
ax_b.semilogx(table["bytes"], table["sim_busbw"], "o-", label="sitssim ring")
ax_b.semilogx(published["size_bytes"], published["busbw_GBps"], "s", label="nccl-tests #290 (NVLS)")
ax_b.axhline(RING_BUSBW, color="grey", ls="--", label="ring, NVLS off (#309)")
ax_b.axhline(per_gpu, color="grey", ls=":", label="simulated link bandwidth per GPU")
ax_b.set_xlabel("all-reduce size (bytes)")
ax_b.set_ylabel("busbw (GB/s)")
ax_b.legend()
fig.tight_layout()
"""

RANGES = """\
KiB, MiB = 1024, 1024 * 1024
ranges = [
    ("8 B - 64 KiB", 8, 64 * KiB),
    ("128 KiB - 64 MiB", 128 * KiB, 64 * MiB),
    ("128 MiB - 1 GiB", 128 * MiB, 1024 * MiB),
]
rows = []
for name, lo, hi in ranges:
    part = table[(table["bytes"] >= lo) & (table["bytes"] <= hi)]
    nvls = part.dropna(subset=["nvls_us"])
    rows.append(
        {
            "sizes": name,
            "sim (us)": f"{part['sim_us'].min():.3g} - {part['sim_us'].max():.3g}",
            "NCCL model (us)": f"{part['model_us'].min():.3g} - {part['model_us'].max():.3g}",
            "error vs model": (
                f"{part['err_vs_model'].min():+.0%} .. {part['err_vs_model'].max():+.0%}"
            ),
            "error vs measured NVLS": (
                f"{nvls['err_vs_nvls'].min():+.0%} .. {nvls['err_vs_nvls'].max():+.0%}"
                if len(nvls)
                else "no measured row"
            ),
            "sim busbw (GB/s)": f"{part['sim_busbw'].max():.0f} max",
        }
    )
summary = pd.DataFrame(rows)
print(summary.to_string(index=False))
largest = table.iloc[-1]
print(
    f"\\nat {largest['bytes'] / MiB:.0f} MiB: simulated busbw {largest['sim_busbw']:.0f} GB/s, "
    f"{largest['sim_busbw'] / RING_BUSBW - 1:+.1%} vs the measured ring-only {RING_BUSBW} GB/s; "
    f"time {largest['err_vs_nvls']:+.1%} vs the NVLS measurement"
)
print(f"largest ratio to the analytic bound: {(table['sim_us'] / table['bound_us']).max():.3f}")
"""

DISCUSSION = """\
## Why the error differs per size range

**8 B - 64 KiB: the simulation is one to two orders of magnitude faster than NCCL.** Here the
simulated time is almost all fabric latency: 14 steps, each crossing a GPU link, an NVSwitch
(40 ns arbitration) and a second link, ~50 ns a step, plus a few ns of serialisation. A real
all-reduce pays costs the fabric model does not contain: launching and completing a CUDA kernel
and its synchronisation (NCCL's `baseLat`, 6.6 us for Ring/LL), and per step the LL protocol's
flag handshakes through GPU memory and the SM time to pack and unpack 8-byte flag/data words
(`hwLat` 0.6 us a step on NVLink). These are GPU and software costs; to get absolute
small-message times they belong in the GPU-side model (the engine's compute segments), not in
the links. The fabric's part of a small all-reduce (well under 1 us) is what the simulation
isolates.

**128 KiB - 64 MiB: the gap closes as the bandwidth term grows.** NCCL switches protocol with
size (LL, then LL128, then Simple; the model column shows which it would pick), each trading
latency against bandwidth, while the simulation always moves raw bytes at the link rate. Two
modelling artefacts also show here: ports store and forward whole messages (up to 256 KiB, at
least 18 per chunk), so each step pays one message's serialisation twice where NVLink forwards
flits; this is why the ratio to the analytic bound peaks at ~1.25 in this range.

**128 MiB - 1 GiB: bandwidth-bound, within ~10-20 %.** Against the ring-only measurement the
simulation is a few per cent fast: its links carry 22.1 GB/s each (3 SITS lanes at 64 GT/s with
256-byte flits) where NVLink4 signals 25 GB/s but loses ~20 % to its packet protocol
(nccl-tests #212), so the two differences partly cancel. Against the NVLS measurement (the
default NCCL choice on H100) the simulated ring is slower: with NVLink SHARP the switches
reduce the data, so each GPU sends its buffer once and receives the result once instead of
2(N-1)/N times each way, and nccl-tests' busbw (computed with the ring's factor) rises above
the link rate (465 GB/s at 1 GiB). The fabric model has no in-switch reduction, so no
simulated algorithm can reach that.
"""


def build_notebook() -> nbformat.NotebookNode:
    return python_notebook(
        [
            new_markdown_cell(INTRO),
            new_code_cell(SETUP),
            new_markdown_cell("## Simulated sweep beside the references"),
            new_code_cell(REFERENCES),
            new_code_cell(PLOT),
            new_markdown_cell("## Error per size range"),
            new_code_cell(RANGES),
            new_markdown_cell(DISCUSSION),
        ]
    )


if __name__ == "__main__":
    generate(build_notebook, NOTEBOOK, __doc__.splitlines()[0], timeout=300)

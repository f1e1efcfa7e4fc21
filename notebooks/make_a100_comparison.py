"""Build notebooks/a100_comparison.ipynb: the engine model beside the source's A100 table.

Run ``python notebooks/make_a100_comparison.py`` to regenerate the notebook: it is
built, executed and saved with its outputs (stderr and timings dropped, so a rebuild
changes the file only when a result changes). The test suite executes it again. The
source's figures appear only in the notebook's comparison column: the model never
sees them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_markdown_cell

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from notebook_io import python_notebook  # noqa: E402

INTRO = """\
# Llama-3-8B on one A100-80GB: the engine model beside the source's table

SITS2026 §1 reports, for Llama-3-8B at batch 1 with a 1024-token prompt and 256
generated tokens on one A100-80GB, a Hugging Face Transformers baseline and a run
with "all SITS2026 optimisations". This notebook runs the same two configurations
through sitssim's engine model (`sitssim.workloads.engine`: a per-segment roofline
from the model's shape and the GPU's datasheet, plus measured sparsity, KV compression
and speculative decoding) and puts the results beside the source's figures, which
appear **only** in the comparison column below. Nothing in the model is fitted to them.

What the two configurations mean here:

* **off**: BF16 weights and KV cache, eager attention (score and probability matrices
  written to HBM, as HF's eager attention does), no sparsity, no compression, no draft.
* **on**: FP8 (E4M3) weights, embeddings and KV cache; sparse attention (heads whose
  importance score falls below a threshold are skipped); sliding-window + sink KV
  compression with similarity merging; speculative decoding with Llama-3.2-1B as draft.
  The optimisation parameters below are ordinary choices, stated, not tuned.
"""

SETUP = """\
import dataclasses

import numpy as np
import pandas as pd

from sitssim.config.catalog import A100_80GB, LLAMA3_8B, LLAMA32_1B, format_bytes
from sitssim.workloads.engine import (
    KERNELS,
    EngineConfig,
    EngineModel,
    HeadScoreDistribution,
    KvCompressionConfig,
    Speculation,
    compress_kv,
    plan_sparsity,
    synthetic_keys,
)

BATCH, PROMPT, GENERATED = 1, 1024, 256
rng = np.random.default_rng(2026)

# Optimisation parameters: choices, not fits.
HEAD_THRESHOLD = 0.3          # skip heads whose Beta(2, 2) importance score is below 0.3
KV = KvCompressionConfig(sink_tokens=4, window=256, similarity_threshold=0.9)
GAMMA, ALPHA = 4, 0.7         # draft length and per-token acceptance of the 1B draft

off = EngineModel(EngineConfig(LLAMA3_8B, A100_80GB, materialise_scores=True))

keys = synthetic_keys(PROMPT + GENERATED, LLAMA3_8B.head_dim, rng, n_kv_heads=LLAMA3_8B.n_kv_heads)
kv_result = compress_kv(keys, KV)
on = EngineModel(
    EngineConfig(
        LLAMA3_8B,
        A100_80GB,
        weight_format="fp8_e4m3",
        kv_format="fp8_e4m3",
        kv_compression=kv_result,
        speculation=Speculation(LLAMA32_1B, GAMMA, ALPHA),
    )
)
positions = PROMPT + GENERATED + GAMMA
scores = HeadScoreDistribution("beta", 2.0, 2.0).draw(
    positions, LLAMA3_8B.n_layers, LLAMA3_8B.n_heads, rng
)
plan = plan_sparsity(scores, HEAD_THRESHOLD)

result_off = off.run(BATCH, PROMPT, GENERATED)
result_on = on.run(BATCH, PROMPT, GENERATED, sparsity=plan)
"""

TABLE = """\
# The source's table (SITS2026 §1), kept here as the comparison column only.
SOURCE = {
    "off": {"TTFT (ms)": 1242.0, "decode (tok/s)": 38.1, "memory (GB)": 18.4},
    "on": {"TTFT (ms)": 396.0, "decode (tok/s)": 142.7, "memory (GB)": 7.2},
}

rows = []
for name, result in (("off", result_off), ("on", result_on)):
    model = {
        "TTFT (ms)": result.ttft_s * 1e3,
        "decode (tok/s)": result.decode_tokens_per_s,
        "memory (GB)": result.memory.total_bytes / 1e9,
    }
    for metric, value in model.items():
        source = SOURCE[name][metric]
        rows.append(
            {
                "optimisations": name,
                "metric": metric,
                "sitssim model": round(value, 2),
                "source (§1)": source,
                "model / source": round(value / source, 2),
            }
        )
table = pd.DataFrame(rows)
table
"""

MEMORY = """\
# Memory, from first principles (GB per GPU, TP = 1).
parts = pd.DataFrame(
    {
        name: {
            "weights": r.memory.weights_bytes / 1e9,
            "KV cache": r.memory.kv_cache_bytes / 1e9,
            "activations (peak)": r.memory.activation_bytes / 1e9,
            "draft model": r.memory.draft_bytes / 1e9,
            "total": r.memory.total_bytes / 1e9,
        }
        for name, r in (("off", result_off), ("on", result_on))
    }
).round(3)
floor_gb = LLAMA3_8B.n_params * format_bytes("fp8_e4m3") / 1e9
print(f"Llama-3-8B has {LLAMA3_8B.n_params / 1e9:.2f} B parameters (computed from its shape).")
print(f"At one byte each (FP8) the weights alone take {floor_gb:.2f} GB:")
print(f"  {floor_gb:.2f} GB > {SOURCE['on']['memory (GB)']} GB, the source's optimised total.")
parts
"""

MECHANISMS = """\
# What each optimisation measured, and what the GPU can do with it.
removed = plan.removed_attention_fraction(0, PROMPT + GENERATED - 1)
print(f"sparse attention: {removed:.1%} of attention-core FLOPs removed (measured from the scores)")
print(f"KV compression: {kv_result.kept_fraction:.1%} of {kv_result.original_tokens} keys kept")
print(f"speculation: {result_on.expected_tokens_per_step:.2f} tokens per target pass "
      f"(gamma={GAMMA}, alpha={ALPHA})")
for note in on.notes:
    print("note:", note)
"""

OVERHEAD = """\
# Roofline vs HF eager: what per-kernel launch cost would turn the modelled decode
# time into the source's baseline rate. A Llama layer in HF eager mode launches on the
# order of 15-25 kernels (norms, projections, rotary, attention, activation, adds).
tpot_model = result_off.tpot_s
tpot_source = 1.0 / SOURCE["off"]["decode (tok/s)"]
gap_s = tpot_source - tpot_model
for kernels_per_layer in (15, 25):
    launches = kernels_per_layer * LLAMA3_8B.n_layers
    print(f"{kernels_per_layer} kernels/layer: {gap_s / launches * 1e6:.1f} us of overhead "
          f"per kernel would close the gap of {gap_s * 1e3:.1f} ms per token")
# The inference driver's own count (sitssim.workloads.kernel_launch): the kernels whose
# traffic the engine counts, as fused engines launch them.
launches = (KERNELS["attention"] + KERNELS["mlp"]) * LLAMA3_8B.n_layers + KERNELS["lm_head"]
host_bound_enqueue_us = tpot_source / launches * 1e6
print(f"the driver's {launches} kernels per token: eager launches of "
      f"{host_bound_enqueue_us:.1f} us each would make the host take the source's "
      f"{tpot_source * 1e3:.1f} ms per token")
step = result_off.decode_steps[0].passes[-1]
bounds = {segment.bound for layer in step.layers for segment in (layer.attention, layer.mlp)}
print(f"modelled baseline decode step: {step.time_s * 1e3:.2f} ms, {sorted(bounds)}-bound segments")
prefill = result_off.prefill[0]
bounds = {segment.bound for layer in prefill.layers for segment in (layer.attention, layer.mlp)}
print(f"modelled baseline prefill: {prefill.time_s * 1e3:.1f} ms for {PROMPT} tokens, "
      f"{sorted(bounds)}-bound segments")
"""

TTFT = """\
# Where the optimised TTFT goes: the target's prefill and the draft's.
target, draft = (p.time_s * 1e3 for p in result_on.prefill)
print(f"optimised prefill: target {target:.1f} ms + draft {draft:.1f} ms = "
      f"{result_on.ttft_s * 1e3:.1f} ms; baseline {result_off.ttft_s * 1e3:.1f} ms")
print("optimised TTFT above the baseline's:", result_on.ttft_s > result_off.ttft_s)
bf16_target = EngineModel(dataclasses.replace(on.config, weight_format="bf16", kv_format="bf16",
                                              speculation=None)).prefill(BATCH, PROMPT, plan)
print(f"the same sparse prefill with BF16 weights: {bf16_target.time_s * 1e3:.1f} ms "
      "(FP8 storage does not speed up compute-bound work on an A100)")
"""

DIFFERENCES = """\
## Why the model and the source differ

**Baseline TTFT (model tens of ms, source 1242 ms).** A 1024-token prefill of an 8 B
model is about 2 · 8.0e9 · 1024 ≈ 16 TFLOP: tens of milliseconds at 70 % of the A100's
312 TFLOP/s BF16 peak. The roofline models kernels only: no Python dispatch, no
tokenisation, no first-call CUDA/cuBLAS initialisation or autotuning, no host-device
copies. An un-warmed HF `generate` call pays all of those, the most plausible reading of a
figure well over ten times the compute bound. The model does not add them, because the
source does not say which of them it measured.

**Baseline decode rate (model well above 38.1 tok/s).** Batch-1 decode is bound by reading
the weights once per token (16 GB at 80 % of 2039 GB/s ≈ 10 ms). HF eager adds a kernel
launch and Python overhead for every operator of every layer; the cell above shows the
per-kernel overhead (tens of µs) that would close the gap. The engine model used here is
the roofline alone, so it predicts what the hardware allows, not what eager PyTorch
reaches. sitssim's inference driver adds kernel launches on top (`engine.launch`): decode
replayed as a CUDA graph by default, or launched eagerly at `enqueue` per kernel, whose
default (3 µs) is the CUDA driver's cost without a Python framework around it. The cell
above gives the `enqueue` at which an eager decode step of the driver's kernels would be
host-bound at the source's rate.

**Baseline memory (model ≈ 16.4 GB, source 18.4 GB).** The model counts weights, KV cache
and the peak transient of the largest pass. PyTorch's caching allocator reserves more than
it uses, and HF computes FP32 logits for all 1024 prompt positions during prefill
(1024 · 128256 · 4 B ≈ 0.5 GB, plus copies), where the model computes the last one only.

**Optimised memory (model above 7.2 GB).** 8.0 B parameters at one byte each are already
more than 7.2 GB before any KV cache, activation or draft model. Unless the weights are also
pruned (the source does not say so), 7.2 GB is below the FP8 floor; the model reports what
its components add up to, including the 1 B draft model that speculation needs.

**Optimised decode rate.** The A100 has no FP8 tensor cores (engine note above): FP8 weights
there only halve the bytes read and are dequantised to BF16 for compute (whose cost the model
does not add). Decode, bound by weight reads, speeds up by about that ratio, and speculative
decoding multiplies the tokens per target pass by the measured expected count while adding the
draft's passes. Sparse attention removes part of the attention-core FLOPs, which at a 1-2 k
context are a small share of a step dominated by weight reads. The model's optimised rate is
above the source's for the same reason its baseline is: no launch overheads in the engine
model.

**Optimised TTFT (model above its own baseline, source 3× below its baseline).** Prefill is
compute-bound, FP8 storage does not speed it up on an A100, and speculation adds the draft's
own prefill (cell above). The mechanisms the source names cannot make an A100 prefill 3×
faster; the source's drop is most plausibly the baseline's non-kernel overheads going away
(warm-up, a compiled or fused engine), which is not an optimisation the model represents.
"""

TENSOR_PARALLEL = """\
## Beyond one A100: tensor parallelism over the fabric

Everything above is one GPU, so no fabric enters it. `notebooks/tp_degree_study.ipynb`
splits the same model over 2, 4 and 8 A100s of an HGX A100 board (and of an HGX H100 one),
with every all-reduce run as NCCL runs it over the simulated NVSwitch fabric: at batch 1 the
communication share of TPOT grows from about a seventh at TP = 2 to about half at TP = 8 on
A100, because each 8 KiB all-reduce costs NCCL's kernel and handshakes (about 20 us at
TP = 8) whatever the GPU count divides. Its decode steps are replayed as CUDA graphs, each
paying a graph launch and a GPU gap before every kernel.
"""


CHECKS = """\
# What this notebook found, checked on what it computed, each against a figure worked out
# here from the model's published shape and the A100's datasheet, not read back from
# the engine model.
m = LLAMA3_8B
per_layer = (
    m.hidden * m.n_heads * m.head_dim * 2           # Q and O projections
    + m.hidden * m.n_kv_heads * m.head_dim * 2      # K and V projections
    + 3 * m.hidden * m.ffn_hidden                   # gate, up, down
    + 2 * m.hidden                                  # two RMSNorms
)
params = m.n_layers * per_layer + 2 * m.vocab * m.hidden + m.hidden  # untied embeddings, final norm
assert abs(params / 8.03e9 - 1) < 0.001, params
# BF16 weights are two bytes a parameter, FP8 one.
assert abs(result_off.memory.weights_bytes / (2 * params) - 1) < 0.01
assert abs(result_on.memory.weights_bytes / params - 1) < 0.01
# Batch-1 decode reads every weight once a token: HBM bandwidth over the weights is a ceiling
# the roofline must stay under, and reach within the efficiency it assumes (well above half).
ceiling = A100_80GB.hbm_bytes_per_s / (2 * params)
rate = result_off.decode_tokens_per_s
assert 0.6 * ceiling < rate < ceiling, (rate, ceiling)
# A 1024-token prefill is 2 FLOP a parameter a token at most at the BF16 peak.
floor_s = 2 * params * PROMPT / A100_80GB.bf16_flops_per_s
assert floor_s < result_off.ttft_s < 2 * floor_s, (result_off.ttft_s, floor_s)
# The source's baseline is far from both bounds: 18x its TTFT, a third of its decode rate.
assert SOURCE["off"]["TTFT (ms)"] / 1e3 > 10 * result_off.ttft_s
assert SOURCE["off"]["decode (tok/s)"] < 0.5 * rate
# Heads skipped: Beta(2, 2) below 0.3 has probability 3 t^2 - 2 t^3.
t = HEAD_THRESHOLD
assert abs(removed - (3 * t**2 - 2 * t**3)) < 0.01, removed
# Speculation: tokens per target pass of a draft of GAMMA accepted each with ALPHA
# (Leviathan et al., 2023): (1 - ALPHA^(GAMMA + 1)) / (1 - ALPHA).
expected = (1 - ALPHA ** (GAMMA + 1)) / (1 - ALPHA)
assert abs(result_on.expected_tokens_per_step - expected) < 1e-9
# KV compression keeps at least the sinks and the window.
assert kv_result.kept_fraction >= (KV.sink_tokens + KV.window) / kv_result.original_tokens
# The findings the text states: FP8 weights alone exceed the source's optimised total, and
# the optimised TTFT is above the baseline's on an A100.
assert floor_gb > SOURCE["on"]["memory (GB)"] and result_on.memory.total_bytes / 1e9 > floor_gb
assert result_on.ttft_s > result_off.ttft_s
print("checks passed")
"""


def build() -> nbformat.NotebookNode:
    return python_notebook(
        [
            new_markdown_cell(INTRO),
            new_code_cell(SETUP),
            new_markdown_cell("## The comparison"),
            new_code_cell(TABLE),
            new_markdown_cell("## Memory, component by component"),
            new_code_cell(MEMORY),
            new_markdown_cell("## What the optimisations measured"),
            new_code_cell(MECHANISMS),
            new_markdown_cell("## Compute bound vs eager overheads"),
            new_code_cell(OVERHEAD),
            new_code_cell(TTFT),
            new_markdown_cell(DIFFERENCES),
            new_markdown_cell(TENSOR_PARALLEL),
            new_markdown_cell("## Checks"),
            new_code_cell(CHECKS),
        ]
    )


def execute(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Run every cell in this folder; keep stdout and results, drop stderr and timings."""
    NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(HERE)}}).execute()
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.metadata.pop("execution", None)
            cell.outputs = [o for o in cell.outputs if o.get("name") != "stderr"]
    return nb


if __name__ == "__main__":
    nbformat.write(execute(build()), HERE / "a100_comparison.ipynb")

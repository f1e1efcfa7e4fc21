"""Write notebooks/tp_degree_study.ipynb from the cells below (and run it).

``python notebooks/make_tp_degree_study.py`` rewrites the notebook and executes it in
place with the full study (``--no-execute`` writes it without outputs). The test suite
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

NOTEBOOK = HERE / "tp_degree_study.ipynb"

INTRO = """\
# TPOT and its communication share against the tensor-parallel degree

`studies/tp_degree.yaml` decodes Llama-3-8B at batch 1 (a 64-token prompt, 8 generated
tokens) on 1, 2, 4 and 8 GPUs of two boards: HGX H100 (18 NVLink4-class links per GPU over
4 NVSwitch planes) and HGX A100 (12 NVLink3-class links over 6 planes). Each layer's compute
comes from the engine model (a roofline per segment on the GPU's datasheet figures, divided
over the TP group), and each of its two all-reduces (8 KiB per token while decoding) runs
as NCCL runs it over the simulated fabric: NCCL's own choice of algorithm, protocol and
channels, with the kernel's and the handshakes' endpoint costs. The next layer waits for
the all-reduce. Each decode step is replayed as a CUDA graph, as serving engines run it
(`engine.launch`): one graph launch per step and a GPU gap before each of its kernels.

What each run measured: the decode time per output token (TPOT), the share of it the
collectives took (`fabric_share_of_decode`: collective time over decode time) and the share
the GPUs waited on the graph's launch and gaps (`launch_share_of_decode`). The last
section replaces NCCL by a serving engine's custom all-reduce (vLLM's one-shot kernel at
this size) with the costs `scenarios/custom_allreduce_h100.yaml` fits on SGLang's H100
table.
"""

RUN = """\
TP = "workloads.0.gpus"
study, points, summary = run("tp_degree", {TP: [1, 8]})
M = "metrics.inference.llama3_8b."
table = summary.assign(
    board=summary["workloads.0.gpu"],
    tpot_ms=summary[M + "decode_time_per_token_ns.mean"] / 1e6,
    fabric_share=summary[M + "fabric_share_of_decode.mean"],
    launch_share=summary[M + "launch_share_of_decode.mean"],
    all_reduces_per_token=summary[M + "all_reduces_per_decode_token.mean"],
)
table["fabric_ms"] = table["tpot_ms"] * table["fabric_share"]
table["launch_ms"] = table["tpot_ms"] * table["launch_share"]
table["compute_ms"] = table["tpot_ms"] - table["fabric_ms"] - table["launch_ms"]
table["us_per_all_reduce"] = (1e3 * table["fabric_ms"] / table["all_reduces_per_token"]
                              .where(table["all_reduces_per_token"] > 0))
shown = ["board", TP, "tpot_ms", "compute_ms", "fabric_ms", "launch_ms", "fabric_share",
         "us_per_all_reduce"]
table[shown].round(3)
"""

PLOT = """\
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
for board, part in table.groupby("board"):
    left.plot(part[TP], part["tpot_ms"], "o-", label=f"{board}: TPOT")
    left.plot(part[TP], part["compute_ms"], "s--", ms=3, label=f"{board}: compute alone")
    right.plot(part[TP], 100 * part["fabric_share"], "o-", label=board)
for ax in (left, right):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tensor-parallel GPUs")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
left.set_ylabel("ms per output token")
right.set_ylabel("communication share of TPOT (%)")
fig.tight_layout()
plt.show()
"""

CUSTOM = """\
# TP = 8 on H100 with a serving engine's custom all-reduce instead of NCCL, at the costs the
# custom all-reduce scenario fits (read from it, not restated here).
import ruamel.yaml

fitted = ruamel.yaml.YAML(typ="safe").load(
    (ROOT / "scenarios" / "custom_allreduce_h100.yaml").read_text())["workloads"][0]["custom"]


def with_custom(data):
    data["workloads"][0]["collective"] = "custom"
    data["workloads"][0]["custom"] = dict(fitted)


engines = {}
for name, edit in (("NCCL", None), ("custom all-reduce", with_custom)):
    scenario = sitssim.load_scenario(ROOT / "scenarios" / "llama3_8b_decode_hgx.yaml", edit=edit)
    result = sitssim.simulate(scenario)
    m = result.metrics["inference"]["llama3_8b"]
    calls = result.tables["inference_collectives"]
    steps = result.tables["inference_steps"]
    decoding = calls["step"].isin(steps.loc[steps["phase"] == "decode", "step"])
    kinds = sorted(set(calls.loc[decoding & (calls["operation"] == "all_reduce"), "algorithm"]))
    engines[name] = {"tpot_ms": m["decode_time_per_token_ns"] / 1e6,
                     "fabric_share": m["fabric_share_of_decode"], "decode_all_reduces": kinds}
print(fitted)
engines
"""

DISCUSSION = """\
**Reading it.** Splitting the model over more GPUs divides the compute (each GPU reads an
n-th of the weights per token), but every layer adds two all-reduces whose cost does not
shrink with n: at 8 KiB NCCL runs a one-channel LL ring, whose time is its kernel's fixed
cost and 2(n - 1) handshakes, so it grows with n. On H100 the communication share climbs
from a fifth of TPOT at TP = 2 to more than half at TP = 8, where TPOT falls only by a
seventh from TP = 4. The graph's launch and gaps cost the same on both boards (about a
quarter of a millisecond per token, a tenth of TPOT at TP = 8): they count kernels, not
bytes. The A100 computes more slowly (2.0 against 3.35 TB/s of HBM), so
its share is lower at each degree and its gain from TP larger. The all-reduce time per
call is about the same on both boards: at this size it is endpoint cost, not bandwidth.

**A serving engine's kernel.** vLLM's one-shot all-reduce (two barriers and one read of every
peer's buffer) takes about half of NCCL's LL ring at TP = 8 with the fitted costs, which are
an eager call's (the host's launch included): inside this run's CUDA graph it pays the
graph's gap as well, so it is counted a little dear, by an amount no table here measures.
This is why serving engines bypass NCCL for decode.
"""

CHECKS = """\
assert (points["status"] == "ok").all()
by = table.set_index(["board", TP])
for board in ("H100-SXM", "A100-80GB"):
    part = by.loc[board]
    # One GPU has nothing to reduce; every other degree reduces twice per layer.
    assert part.loc[1, "fabric_share"] == 0 and part.loc[1, "all_reduces_per_token"] == 0
    assert (part.loc[part.index > 1, "all_reduces_per_token"] == 64).all()
    # More GPUs: less compute per token, a larger communication share, a lower TPOT.
    assert part["compute_ms"].is_monotonic_decreasing
    assert part["fabric_share"].is_monotonic_increasing
    assert part["tpot_ms"].is_monotonic_decreasing
    # A graph's launch and gaps count kernels, not bytes: a TP group adds its collectives'
    # kernels, and every degree above 1 launches the same ones.
    grouped = part.loc[part.index > 1, "launch_ms"]
    assert 0 < part.loc[1, "launch_ms"] < grouped.min()
    assert grouped.max() - grouped.min() < 1e-3 * grouped.min()
launch = by["launch_ms"].unstack("board")
assert ((launch["H100-SXM"] - launch["A100-80GB"]).abs() < 1e-3 * launch["H100-SXM"]).all()
# H100 computes faster, so communication is a larger share of its TPOT at TP = 8.
assert by.loc[("H100-SXM", 8), "fabric_share"] > by.loc[("A100-80GB", 8), "fabric_share"]
# vLLM's kernel runs the decode all-reduces and takes less of the token than NCCL's ring.
assert engines["NCCL"]["decode_all_reduces"] == ["ring"]
assert engines["custom all-reduce"]["decode_all_reduces"] == ["custom_one_shot"]
assert engines["custom all-reduce"]["tpot_ms"] < engines["NCCL"]["tpot_ms"]
assert engines["custom all-reduce"]["fabric_share"] < engines["NCCL"]["fabric_share"]
print("checks passed")
"""


def build_notebook() -> nbformat.NotebookNode:
    return python_notebook(
        [
            new_markdown_cell(INTRO),
            new_code_cell(STUDY_SETUP),
            new_code_cell(RUN),
            new_code_cell(PLOT),
            new_markdown_cell("## NCCL or a serving engine's kernel"),
            new_code_cell(CUSTOM),
            new_markdown_cell(DISCUSSION),
            new_code_cell(CHECKS),
        ]
    )


if __name__ == "__main__":
    generate(build_notebook, NOTEBOOK, __doc__.splitlines()[0], timeout=3600)

"""Bad input in ``kind: inference`` workloads and token faults: exit 2, file, line, field.

Each snippet marks the line the message must name with a trailing ``# <-``.
Cases go through ``sitssim run --out DIR``: nothing may be written. The cases
that only the built fabric can reject (GPU names, trace files, fault stages)
also go through ``sitssim validate``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from located_errors import MARK, assert_located
from typer.testing import CliRunner

from sitssim.cli import app

HEAD = (
    "version: 1\nname: bad\nduration: 1us\n"
    "topology: {kind: fat_tree, gpus: 4, levels: 1, radix: 4}\n"
    "workloads:\n"
    "  - kind: inference\n"
    "    name: engine\n"
)
REQUESTS = (
    "    requests: {kind: generator, count: 1, prompt_tokens: 8, generated_tokens: 2, "
    "interval: 1ms}\n"
)
TINY = (
    "    model: {name: tiny, n_layers: 2, hidden: 64, n_heads: 4, n_kv_heads: 2, "
    "ffn_hidden: 128, vocab: 100}\n"
)


def mark(text: str) -> str:
    return text.rstrip("\n") + "  " + MARK + "\n"


CASES = [
    pytest.param(
        HEAD + mark("    model: Llama-9") + REQUESTS,
        "workloads[0].model",
        "unknown model 'Llama-9'",
        id="unknown-model",
    ),
    pytest.param(
        HEAD + mark("    model: {name: m, n_layers: 2, hidden: 64}") + REQUESTS,
        "workloads[0].model",
        "missing field 'ffn_hidden'",
        id="inline-model-incomplete",
    ),
    pytest.param(
        HEAD
        + mark("    gpu: {name: g, hbm_bytes_per_s: -1, memory_bytes: 1, bf16_flops_per_s: 1}")
        + REQUESTS,
        "workloads[0].gpu",
        "'hbm_bytes_per_s' must be a positive number",
        id="inline-gpu-negative",
    ),
    pytest.param(
        HEAD
        + mark(
            "    model: {name: m, n_layers: 1000000000, hidden: 64, n_heads: 4, n_kv_heads: 4,"
            " ffn_hidden: 128, vocab: 1000}"
        )
        + REQUESTS,
        "workloads[0].model",
        "'n_layers' must be a whole number from 1 to 4096, got 1000000000",
        id="inline-model-too-deep",
    ),
    pytest.param(
        HEAD
        + mark("    gpu: {name: g, hbm_bytes_per_s: 1e300, memory_bytes: 1, bf16_flops_per_s: 1}")
        + REQUESTS,
        "workloads[0].gpu",
        "'hbm_bytes_per_s' must be a positive number up to 1e+21, got 1e+300",
        id="inline-gpu-beyond-range",
    ),
    pytest.param(
        HEAD + mark("    gpus: 3") + REQUESTS,
        "workloads[0].gpus",
        "do not divide n_heads=32",
        id="tp-not-dividing-heads",
    ),
    pytest.param(
        HEAD + TINY + mark("    stages: [[gpu0, gpu1], [gpu2]]") + REQUESTS,
        "workloads[0].stages",
        "same number of GPUs",
        id="uneven-stages",
    ),
    pytest.param(
        HEAD + TINY + "    gpus: 2\n" + mark("    stages: [[gpu0], [gpu1]]") + REQUESTS,
        "workloads[0].stages",
        "not both",
        id="gpus-and-stages",
    ),
    pytest.param(
        HEAD
        + TINY
        + "    requests:\n      kind: generator\n      count: 1\n      prompt_tokens: 8\n"
        + mark("      generated_tokens: {dist: uniform, low: 5, high: 4}")
        + "      interval: 1ms\n",
        "workloads[0].requests.generated_tokens.high",
        "at least 'low'",
        id="uniform-high-below-low",
    ),
    pytest.param(
        HEAD
        + TINY
        + REQUESTS
        + "    engine:\n      fp8:\n"
        + mark("        activations: {distribution: student_t, std: 2.0}"),
        "workloads[0].engine.fp8.activations.nu",
        "needs 'nu'",
        id="student-t-without-nu",
    ),
    pytest.param(
        HEAD
        + TINY
        + "    stages: [[gpu0], [gpu1]]\n"
        + REQUESTS
        + mark("    engine: {speculation: {draft: Llama-3.2-1B, gamma: 2, alpha: 0.5}}"),
        "workloads[0].engine.speculation",
        "single stage",
        id="speculation-with-stages",
    ),
    pytest.param(
        HEAD
        + TINY
        + "    requests:\n      kind: generator\n"
        + mark("      cont: 1")
        + "      prompt_tokens: 8\n      generated_tokens: 2\n      interval: 1ms\n",
        "workloads[0].requests.cont",
        "did you mean 'count'?",
        id="misspelt-generator-key",
    ),
    pytest.param(
        HEAD
        + TINY
        + "    requests:\n      kind: trace\n      path: t.csv\n"
        + mark("      limt: 1"),
        "workloads[0].requests.limt",
        "did you mean 'limit'?",
        id="misspelt-trace-key",
    ),
    pytest.param(
        HEAD + TINY + "    collective: butterfly  # <-\n" + REQUESTS,
        "workloads[0].collective",
        "one of",
        id="unknown-collective",
    ),
    pytest.param(
        HEAD + TINY + REQUESTS + "    engine:\n      launch:\n" + mark("        decode: cuda"),
        "workloads[0].engine.launch.decode",
        "one of",
        id="unknown-launch-mode",
    ),
    pytest.param(
        HEAD + TINY + REQUESTS + "    engine:\n      launch:\n" + mark("        enqueue: 0us"),
        "workloads[0].engine.launch.enqueue",
        "expected a positive time",
        id="launch-without-host-time",
    ),
]

FABRIC_CASES = [
    pytest.param(
        HEAD + TINY + "    gpus: [gpu0,\n" + mark("           gpu9]") + REQUESTS,
        "workloads[0].gpus[1]",
        "unknown node 'gpu9'",
        id="unknown-gpu",
    ),
    pytest.param(
        HEAD + TINY + "    gpus: [gpu0,\n" + mark("           sw1.0]") + REQUESTS,
        "workloads[0].gpus[1]",
        "is a switch, not a GPU",
        id="switch-as-gpu",
    ),
    pytest.param(
        HEAD + mark("    gpus: 8") + REQUESTS,
        "workloads[0].gpus",
        "8 GPUs asked, the fabric has 4",
        id="too-many-gpus",
    ),
    pytest.param(
        HEAD + TINY + "    requests:\n      kind: trace\n" + mark("      path: traces/nowhere.csv"),
        "workloads[0].requests.path",
        "no such trace file",
        id="missing-trace",
    ),
    pytest.param(
        HEAD + TINY + "    requests:\n      kind: trace\n" + mark("      path: not_a_trace.csv"),
        "workloads[0].requests.path",
        "match no trace layout",
        id="unrecognised-trace",
    ),
    pytest.param(
        HEAD
        + TINY
        + "    stages: [[gpu0], [gpu1]]\n"
        + REQUESTS
        + "faults:\n  - kind: renumber_tokens\n"
        + mark("    stage: 1"),
        "faults[0].stage",
        "holds the sampler",
        id="fault-on-the-sampler-stage",
    ),
    pytest.param(
        HEAD
        + TINY
        + REQUESTS
        + "faults:\n  - kind: pacing_ignores_hint\n"
        + mark("    workload: other"),
        "faults[0].workload",
        "no inference workload named 'other'",
        id="fault-on-unknown-workload",
    ),
    pytest.param(
        HEAD
        + TINY
        + REQUESTS
        + "    engine:\n      fp8:\n        activations:\n"
        + mark("          std: [1.0, 2.0, 3.0]"),
        "workloads[0].engine.fp8.activations.std",
        "3 values for 2 layers",
        id="fp8-std-per-layer-count",
    ),
]


def check(tmp_path: Path, text: str, field: str, expect: str, command: str) -> None:
    (tmp_path / "not_a_trace.csv").write_text("a,b\n1,2\n")
    assert_located(tmp_path, text, field, expect, command)


@pytest.mark.parametrize(("text", "field", "expect"), CASES)
def test_bad_inference_input_is_located(tmp_path, text, field, expect):
    check(tmp_path, text, field, expect, "run")


@pytest.mark.parametrize("command", ["run", "validate"])
@pytest.mark.parametrize(("text", "field", "expect"), FABRIC_CASES)
def test_input_only_the_fabric_can_reject_is_located(tmp_path, text, field, expect, command):
    check(tmp_path, text, field, expect, command)


def test_validate_rejects_a_token_fault_with_no_inference_workload(tmp_path: Path) -> None:
    path = tmp_path / "fault.yaml"
    path.write_text(
        "name: t\nduration: 10us\ntopology: {kind: fat_tree, gpus: 4, levels: 1, radix: 4}\n"
        "faults:\n  - kind: renumber_tokens\n    stage: 0\n"
    )
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert f"{path}:5: faults[0].kind: 0 inference workloads" in result.output

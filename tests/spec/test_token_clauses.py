"""Judges of the L5 token clauses: hand-built tables, then the shipped witnesses.

The unit tests feed each judge tables with one defect planted (a mutated wire
byte, a renumbered frame, a frame paced too soon, an off-by-one layout, an
overflowing layer) and check that the judge finds exactly it. The witness
tests run the shipped scenarios through the CLI: every token clause passes on
the main scenario, and each violation scenario fails its own clause only.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.spec.registry import JUDGES, RunContext, Verdict

ROOT = Path(__file__).resolve().parents[2]
TOKEN_CLAUSES = (
    "token.frame_format",
    "token.passthrough",
    "token.emit_window",
    "token.mhf_kv_alignment",
    "engine.fp8_overflow",
)
MS = 1_000_000
# The spec's 14-byte frame, restated: the judge's codec is what is under test.
WIRE = struct.Struct("<IhQ")


def judge(clause: str, **tables: pd.DataFrame) -> Verdict:
    return JUDGES[clause](RunContext(tables=tables))


def hop(request, token_id, ts, hint, stage, to_stage, born, t_emit, t_arrive, wire=None):
    return {
        "workload": 0,
        "request": request,
        "token_id": token_id,
        "ts_logical": ts,
        "latency_hint": hint,
        "stage": stage,
        "to_stage": to_stage,
        "born": born,
        "t_emit_ns": float(t_emit),
        "t_arrive_ns": float(t_arrive),
        "wire": WIRE.pack(token_id, hint, ts) if wire is None else wire,
    }


def frames_table(rows: list[dict]) -> pd.DataFrame:
    table = pd.DataFrame(rows)
    table.insert(0, "row", np.arange(len(table)))
    return table


def pipeline(n_tokens: int = 4, hint: int = 2) -> list[dict]:
    """Two stages: the sampler (stage1) feeds frames back to stage0, which forwards them."""
    rows = []
    for k in range(n_tokens):
        t = k * 20 * MS
        rows.append(hop(0, 100 + k, k, hint, "stage1", "emitter", True, t, t))
        rows.append(hop(0, 100 + k, k, hint, "emitter", "client", False, t, t))
        rows.append(hop(0, 100 + k, k, hint, "stage1", "stage0", True, t, t + 10))
        rows.append(hop(0, 100 + k, k, hint, "stage0", "stage1", False, t + 50, t + 60))
    return rows


# --- token.frame_format -----------------------------------------------------------


def test_frame_format_passes_in_range_round_tripping_frames():
    v = judge("token.frame_format", tokens=frames_table(pipeline()))
    assert v.verdict == "pass" and v.measured == 0


def test_frame_format_catches_a_mutated_wire_byte():
    rows = pipeline()
    wire = bytearray(rows[5]["wire"])
    wire[0] ^= 0x01
    rows[5]["wire"] = bytes(wire)
    v = judge("token.frame_format", tokens=frames_table(rows))
    assert v.verdict == "fail" and v.measured == 1
    assert v.evidence[0].rows == (5,)


def test_frame_format_catches_a_hint_the_codec_refused():
    rows = pipeline()
    rows[2].update(latency_hint=40_000, wire=b"")
    v = judge("token.frame_format", tokens=frames_table(rows))
    assert v.verdict == "fail" and v.evidence[0].rows == (2,)
    assert "latency_hint" in v.detail and "40000" in v.detail


def test_frame_format_has_nothing_to_judge_without_frames():
    assert judge("token.frame_format").verdict == "n/a"


# --- token.passthrough ------------------------------------------------------------


def test_passthrough_passes_when_every_forwarder_passes_frames_on():
    v = judge("token.passthrough", tokens=frames_table(pipeline()))
    assert v.verdict == "pass"
    assert "8 frames" in v.detail  # 4 through stage0, 4 through the emitter


@pytest.mark.parametrize(
    ("plant", "defect"),
    [
        ("renumber", "renumbered 1"),
        ("drop", "lost 1"),
        ("duplicate", "duplicated 1"),
        ("reorder", "order_violations"),
    ],
)
def test_passthrough_names_the_stage_and_the_defect(plant, defect):
    rows = pipeline()
    forwarded = [i for i, r in enumerate(rows) if r["stage"] == "stage0"]
    if plant == "renumber":
        rows[forwarded[1]].update(token_id=999)
        rows[forwarded[1]]["wire"] = WIRE.pack(999, 2, 1)
    elif plant == "drop":
        del rows[forwarded[2]]
    elif plant == "duplicate":
        rows.append(dict(rows[forwarded[0]], t_emit_ns=rows[forwarded[0]]["t_emit_ns"] + 1))
    else:
        a, b = forwarded[1], forwarded[2]
        rows[a]["t_emit_ns"], rows[b]["t_emit_ns"] = rows[b]["t_emit_ns"], rows[a]["t_emit_ns"]
    v = judge("token.passthrough", tokens=frames_table(rows))
    assert v.verdict == "fail"
    assert "stage0:" in v.detail and defect in v.detail
    assert "emitter" not in v.detail


def test_passthrough_treats_the_frames_a_sampler_creates_as_originals():
    rows = [r for r in pipeline() if r["stage"] != "stage0"]
    rows = [r for r in rows if r["to_stage"] != "stage0"]
    v = judge("token.passthrough", tokens=frames_table(rows))
    assert v.verdict == "pass" and "4 frames" in v.detail


# --- token.emit_window ------------------------------------------------------------


def test_emit_window_passes_at_hint_plus_five_ms():
    v = judge("token.emit_window", tokens=frames_table(pipeline(hint=15)))
    assert v.verdict == "pass"
    assert "gap minus window 0.000 ms" in v.detail


def test_emit_window_catches_frames_paced_by_the_base_window_only():
    v = judge("token.emit_window", tokens=frames_table(pipeline(hint=16)))
    assert v.verdict == "fail" and v.measured == 3
    assert "-1.000 ms" in v.detail


def test_emit_window_needs_two_frames_of_one_stream():
    rows = [r for r in pipeline(n_tokens=1)]
    assert judge("token.emit_window", tokens=frames_table(rows)).verdict == "n/a"


# --- token.mhf_kv_alignment --------------------------------------------------------


def layouts(off_by: int, marked: bool = True) -> pd.DataFrame:
    real = np.array([10, 20])
    return pd.DataFrame(
        {
            "row": [0, 1],
            "marked": [marked, marked],
            "real_tokens": real,
            "kv_length": real + off_by,
            "attention_mask_length": real + off_by,
            "rope_offset": real + off_by,
        }
    )


def test_mhf_alignment_passes_when_lengths_equal_the_real_count():
    assert judge("token.mhf_kv_alignment", mhf_layouts=layouts(0)).verdict == "pass"


def test_mhf_alignment_fails_on_the_naive_plus_one():
    v = judge("token.mhf_kv_alignment", mhf_layouts=layouts(1))
    assert v.verdict == "fail" and v.measured == 1 and v.evidence[0].rows == (0, 1)
    assert "rope_offset off by 1..1" in v.detail


def test_mhf_alignment_ignores_unmarked_buffers():
    assert judge("token.mhf_kv_alignment", mhf_layouts=layouts(1, False)).verdict == "n/a"


# --- engine.fp8_overflow ----------------------------------------------------------


def engine_layers(overflows: list[int], fmt: str = "E4M3") -> pd.DataFrame:
    n = len(overflows)
    return pd.DataFrame(
        {
            "row": range(n),
            "layer": range(n),
            "format": [fmt] * n,
            "std": [1.0] * n,
            "amax": [500.0] * n,
            "rel_error": [0.02] * n,
            "overflows": overflows,
            "values": [1000] * n,
        }
    )


def test_fp8_overflow_counts_values_beyond_the_format():
    v = judge("engine.fp8_overflow", engine_layers=engine_layers([0, 3, 0, 2]))
    assert v.verdict == "fail" and v.measured == 5 and v.evidence[0].rows == (1, 3)
    assert judge("engine.fp8_overflow", engine_layers=engine_layers([0, 0])).verdict == "pass"
    off = engine_layers([0, 0], fmt="off")
    assert judge("engine.fp8_overflow", engine_layers=off).verdict == "n/a"


# --- witnesses: the shipped scenarios ---------------------------------------------

runner = CliRunner()


def run_cli(path: Path, out: Path) -> tuple[int, dict[str, str]]:
    result = runner.invoke(app, ["run", str(path), "--out", str(out), "--no-figures"])
    report = json.loads((out / "report.json").read_text())
    return result.exit_code, {c["id"]: c["verdict"] for c in report["clauses"]}


def test_the_shipped_inference_scenario_passes_every_token_clause() -> None:
    # Its golden report is byte for byte what a run of it writes (tests/test_shipped_scenarios.py).
    golden = ROOT / "tests" / "golden" / "llama3_8b_tp8_nvswitch.json"
    verdicts = {c["id"]: c["verdict"] for c in json.loads(golden.read_text())["clauses"]}
    assert all(verdicts[c] == "pass" for c in TOKEN_CLAUSES)


@pytest.mark.parametrize(
    ("scenario", "fails"),
    [
        ("violations/latency_hint_overflow.yaml", "token.frame_format"),
        ("violations/token_renumbering.yaml", "token.passthrough"),
        ("violations/pacing_ignores_hint.yaml", "token.emit_window"),
        ("violations/mhf_naive.yaml", "token.mhf_kv_alignment"),
        ("violations/fp8_heavy_tail.yaml", "engine.fp8_overflow"),
    ],
)
def test_shipped_scenario_fails_only_its_own_token_clause(tmp_path, scenario, fails):
    code, verdicts = run_cli(ROOT / "scenarios" / scenario, tmp_path / "out")
    assert code == 1
    assert [c for c, v in verdicts.items() if v == "fail"] == [fails]

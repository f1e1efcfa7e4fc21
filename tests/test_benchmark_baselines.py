"""The benchmarks' baselines stay as they are: a faster sitssim must show against the same
naive model and the same plain LFSR, so a change to either fails here.
A deliberate change re-pins the hash here, with its reason in the commit."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

NAIVE_TRANSPORT_SHA256 = "db2a34d3ff098efb39e6b5606c6d39d978b616291123ea03f570d2ecbc06faf9"
PLAIN_LFSR_SHA256 = "2879d937909baa8791596608f6b5480c59a60c863eb2a7c50f48ae047c9ed59d"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_the_naive_transport_model_is_unchanged() -> None:
    text = (BENCHMARKS / "naive_transport.py").read_text(encoding="utf-8")
    assert _sha256(text) == NAIVE_TRANSPORT_SHA256


def test_the_plain_lfsr_baseline_is_unchanged() -> None:
    """Its source, as written in bench_phy.py: the rest of that file may change."""
    source = (BENCHMARKS / "bench_phy.py").read_text(encoding="utf-8")
    (lfsr,) = (
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name == "plain_lfsr_prbs31"
    )
    segment = ast.get_source_segment(source, lfsr)
    assert segment is not None
    assert _sha256(segment) == PLAIN_LFSR_SHA256

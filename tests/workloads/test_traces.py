"""Request traces: CSV layouts, replay options, and the synthetic generator."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from sitssim.config.inference_config import (
    LengthDistribution,
    SyntheticRequests,
    TraceRequests,
)
from sitssim.workloads import traces
from sitssim.workloads.traces import draw_counts, read_trace, synthetic_requests, trace_requests

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_azure_timestamps_become_ns_after_the_earliest_row_in_arrival_order(tmp_path):
    path = write(
        tmp_path,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:46.2505900,396,109\n"
        "2023-11-16 18:15:47.0000000,0,0\n",
    )
    fmt, reqs = read_trace(path)
    assert fmt == "azure"
    np.testing.assert_allclose(reqs.arrival_ns, [0.0, 430e6, 749.41e6])
    assert reqs.prompt_tokens.tolist() == [396, 374, 1]
    assert reqs.generated_tokens.tolist() == [109, 44, 1]


@pytest.mark.parametrize(
    ("columns", "fmt"),
    [
        (("arrival_timestamp", "prompt_size", "token_size"), "splitwise"),
        (("Time", "PromptTokenCount", "CompletionTokenCount"), "vidur"),
        (("arrived_at", "num_prefill_tokens", "num_decode_tokens"), "vidur"),
    ],
)
def test_second_based_layouts_are_recognised_by_their_columns(tmp_path, columns, fmt):
    header = "request_id," + ",".join(columns) + ",batch_size"
    rows = "7,2.5,100,10,1\n8,2.0,200,20,1\n"
    found, reqs = read_trace(write(tmp_path, header + "\n" + rows))
    assert found == fmt
    np.testing.assert_allclose(reqs.arrival_ns, [0.0, 0.5e9])
    assert reqs.prompt_tokens.tolist() == [200, 100]
    assert reqs.generated_tokens.tolist() == [20, 10]


def test_replay_options_limit_scale_and_shift_the_trace(tmp_path):
    write(tmp_path, "arrived_at,num_prefill_tokens,num_decode_tokens\n1,5,6\n3,7,8\n9,1,1\n")
    cfg = TraceRequests(kind="trace", path="trace.csv", limit=2, time_scale=0.001, start="5us")
    reqs = trace_requests(cfg, tmp_path)
    assert len(reqs) == 2
    np.testing.assert_allclose(reqs.arrival_ns, [5e3, 5e3 + 2e9 * 0.001])


def test_shipped_sample_is_an_azure_style_trace():
    fmt, reqs = read_trace(ROOT / "scenarios" / "traces" / "azure_style_sample.csv")
    assert fmt == "azure"
    assert len(reqs) >= 2
    assert np.all(np.diff(reqs.arrival_ns) >= 0)


@pytest.mark.parametrize(
    ("text", "fmt", "message"),
    [
        ("a,b,c\n1,2,3\n", "auto", "match no trace layout"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n", "auto", "date-time"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens\n0,1.5,1\n", "auto", "row 1"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens\nsoon,1,1\n", "auto", "seconds"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n", "azure", "azure:"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens\n", "auto", "no requests"),
    ],
)
def test_bad_traces_say_what_is_wrong(tmp_path, text, fmt, message):
    with pytest.raises(ValueError, match=message):
        read_trace(write(tmp_path, text), fmt)


def test_missing_trace_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="no such trace file"):
        read_trace(tmp_path / "absent.csv")


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "trace.csv"
    os.mkfifo(fifo)
    with ThreadPoolExecutor(1) as pool:
        attempt = pool.submit(read_trace, fifo)
        with pytest.raises(ValueError, match="is a named pipe"):
            attempt.result(timeout=10)


def test_a_token_count_past_the_bound_is_refused_before_it_wraps_int64(tmp_path):
    text = f"arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n1,{10**30},1\n"
    with pytest.raises(ValueError, match=r"num_prefill_tokens.*data row 2.*up to 16777216"):
        read_trace(write(tmp_path, text))


def test_a_trace_over_the_bound_is_read_only_with_a_limit(tmp_path, monkeypatch):
    rows = "".join(f"{t},8,2\n" for t in range(100))
    path = write(tmp_path, "arrived_at,num_prefill_tokens,num_decode_tokens\n" + rows)
    monkeypatch.setattr(traces, "MAX_TRACE_BYTES", path.stat().st_size - 1)
    with pytest.raises(ValueError, match="give 'limit'"):
        read_trace(path)
    _, first = read_trace(path, limit=3)
    assert first.prompt_tokens.tolist() == [8, 8, 8]


def test_periodic_arrivals_are_evenly_spaced_from_start():
    cfg = SyntheticRequests(
        kind="generator",
        count=5,
        prompt_tokens=8,
        generated_tokens=2,
        arrivals="periodic",
        interval="2ms",
        start="1ms",
    )
    reqs = synthetic_requests(cfg, np.random.default_rng(0))
    np.testing.assert_allclose(reqs.arrival_ns, 1e6 + 2e6 * np.arange(5))
    assert set(reqs.prompt_tokens) == {8}


def test_poisson_gaps_average_the_interval():
    cfg = SyntheticRequests(
        kind="generator", count=4001, prompt_tokens=1, generated_tokens=1, interval="1ms"
    )
    gaps = np.diff(synthetic_requests(cfg, np.random.default_rng(1)).arrival_ns)
    assert gaps.mean() == pytest.approx(1e6, rel=0.05)
    assert gaps.std() == pytest.approx(1e6, rel=0.1)


def test_length_distributions_respect_their_parameters():
    rng = np.random.default_rng(2)
    uniform = draw_counts(LengthDistribution(dist="uniform", low=3, high=5), 3000, rng)
    assert set(uniform) == {3, 4, 5}
    capped = draw_counts(
        LengthDistribution(dist="lognormal", median=200.0, sigma=1.0, max=400), 3000, rng
    )
    assert capped.max() == 400 and capped.min() >= 1
    assert np.median(capped) == pytest.approx(200, rel=0.1)
    fixed = draw_counts(LengthDistribution(dist="fixed", value=9), 4, rng)
    assert fixed.tolist() == [9] * 4


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dist": "uniform", "low": 5}, "needs 'high'"),
        ({"dist": "uniform", "low": 5, "high": 4}, "at least 'low'"),
        ({"dist": "fixed", "value": 3, "sigma": 1.0}, "does not belong"),
    ],
)
def test_length_distribution_parameters_are_checked(fields, message):
    with pytest.raises(ValueError, match=message):
        LengthDistribution.model_validate(fields)

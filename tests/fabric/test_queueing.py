"""Queueing at an output port is exact.

On a single link every message's waiting time (latency minus its zero-load
latency) must equal Lindley's recursion W[n+1] = max(0, W[n] + S[n] - A[n+1])
computed from the recorded injection times and the service times bytes /
bandwidth, to float precision. With Poisson arrivals of one size the port is
an M/D/1 queue, whose mean wait rho·D / (2(1 - rho)) must lie inside a 99 %
batch-means confidence interval.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy import stats

from sitssim.scenario import scenario_from_data
from sitssim.simulation import RunResult, simulate

# Float error of the recorded times grows with their magnitude and, inside a
# busy period, with the number of messages whose service times were summed.
ULP_BUDGET = 64


def _lindley(t_inject: np.ndarray, service: np.ndarray) -> np.ndarray:
    waits = np.zeros(len(t_inject))
    for n in range(1, len(t_inject)):
        gap = t_inject[n] - t_inject[n - 1]
        waits[n] = max(0.0, waits[n - 1] + service[n - 1] - gap)
    return waits


def _waits_and_service(result: RunResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Recorded waits, Lindley's prediction, and service times, in injection order."""
    messages = result.tables["messages"].sort_values("msg_id")
    links = result.tables["links"].set_index("name")
    bandwidth = links.loc["a>b", "bytes_per_ns"]
    service = messages["bytes"].to_numpy() / bandwidth
    waits = (messages["latency_ns"] - messages["zero_load_ns"]).to_numpy()
    return waits, _lindley(messages["t_inject_ns"].to_numpy(), service), service


def _pair(size: str, load: float, arrivals: str, start: str = "0ns") -> dict[str, Any]:
    return {
        "kind": "synthetic",
        "pattern": "pair",
        "src": "a",
        "dst": "b",
        "message_bytes": size,
        "load": load,
        "arrivals": arrivals,
        "start": start,
    }


LINDLEY_CASES = {
    # Two sizes mixed on one port, so service times differ from message to message.
    "poisson": [_pair("4KiB", 0.35, "poisson"), _pair("512B", 0.35, "poisson")],
    # Two periodic streams drifting against each other: waits come and go.
    "periodic": [_pair("4KiB", 0.45, "periodic"), _pair("1000B", 0.4, "periodic", "3ns")],
    "overload": [_pair("2KiB", 1.3, "poisson")],
}


@pytest.mark.parametrize("case", LINDLEY_CASES)
def test_every_wait_follows_lindleys_recursion(
    case: str, one_link_data: Callable[..., dict[str, Any]]
) -> None:
    result = simulate(scenario_from_data(one_link_data(LINDLEY_CASES[case], seed=11)))
    waits, expected, service = _waits_and_service(result)
    assert len(waits) > 500
    atol = ULP_BUDGET * np.finfo(float).eps * result.simulated_ns
    np.testing.assert_allclose(waits, expected, rtol=1e-9, atol=atol)
    # The comparison only means something if messages really queued.
    assert np.mean(expected > service.min() / 10) > 0.1


def test_overload_waits_grow_without_bound(one_link_data: Callable[..., dict[str, Any]]) -> None:
    result = simulate(scenario_from_data(one_link_data(LINDLEY_CASES["overload"], seed=11)))
    waits, _, service = _waits_and_service(result)
    half = len(waits) // 2
    # At rho = 1.3 the backlog grows by about 0.3 service times per arrival.
    assert waits[-1] - waits[half] > 0.1 * (len(waits) - half) * service.mean()


MD1_ARRIVALS = 210_000
MD1_WARMUP = 10_000
MD1_BATCHES = 40


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_md1_mean_wait_inside_batch_means_interval(
    rho: float,
    one_link_data: Callable[..., dict[str, Any]],
    channel_bandwidth: Callable[[dict[str, Any], str, str], float],
) -> None:
    size = 4096
    service = size / channel_bandwidth(one_link_data([]), "a", "b")
    # ``a`` injects only through this channel, so load is the port's utilisation rho.
    duration = MD1_ARRIVALS * service / rho
    data = one_link_data(
        [_pair(f"{size}B", rho, "poisson")], duration=f"{duration:.3f}ns", seed=2026
    )
    result = simulate(scenario_from_data(data))
    waits, _, _ = _waits_and_service(result)
    assert len(waits) >= 200_000
    assert len(waits) * service / duration == pytest.approx(rho, rel=0.01)

    kept = waits[MD1_WARMUP:]
    kept = kept[: len(kept) - len(kept) % MD1_BATCHES]
    batch_means = kept.reshape(MD1_BATCHES, -1).mean(axis=1)
    mean = batch_means.mean()
    half_width = stats.t.ppf(0.995, MD1_BATCHES - 1) * stats.sem(batch_means)

    md1 = rho * service / (2 * (1 - rho))
    assert abs(mean - md1) <= half_width, (mean, md1, half_width)
    # The interval is narrow enough to tell deterministic from exponential service (M/M/1).
    mm1 = rho * service / (1 - rho)
    assert abs(mean - mm1) > half_width

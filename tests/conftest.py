"""Shared test configuration and scenario builders.

The Hypothesis `ci` profile is the default everywhere. The builder fixtures
return functions that build plain scenario data (a dict, as a YAML file would
hold it), so a test can adjust one field before validating it with
``scenario_from_data``. Builders never pick expected values; tests derive those
from the built fabric.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from sitssim.fabric.topology import build_fabric
from sitssim.scenario import scenario_from_data

# Hypothesis profiles. No deadline in any: on a shared 2-core machine a slow example says
# nothing about the code. ``ci``, the default and what .ci/run's HYPOTHESIS_PROFILE names:
# derandomised, so every CI run draws the same examples, and bounded, so the suite fits its
# budget. ``dev``: a few hundred random examples, while working on a property. ``nightly``:
# thousands of random examples. ``pytest --hypothesis-profile NAME`` wins over the variable:
# Hypothesis's plugin loads NAME at pytest_configure, after this file is imported. A test
# whose examples are whole runs caps its count with ``properties.budget.examples``, which
# scales with the profile.
_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", max_examples=40, derandomize=True, **_COMMON)
settings.register_profile("dev", max_examples=300, print_blob=True, **_COMMON)
settings.register_profile("nightly", max_examples=2000, print_blob=True, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ScenarioData = dict[str, Any]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/ from this run (say why in the commit)",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def _one_link(
    workloads: list[dict[str, Any]],
    duration: str = "20us",
    seed: int = 0,
) -> ScenarioData:
    """Two GPUs, ``a`` and ``b``, joined by a single link."""
    return {
        "name": "one_link",
        "seed": seed,
        "duration": duration,
        "topology": {
            "kind": "graph",
            "nodes": [{"id": "a", "kind": "gpu"}, {"id": "b", "kind": "gpu"}],
            "edges": [{"a": "a", "b": "b"}],
        },
        "links": {"default": {"rate": "64GT/s", "lanes": 16, "propagation": "5ns"}},
        "workloads": workloads,
    }


def _fat_tree(
    pattern: str = "uniform_random",
    load: float = 0.4,
    duration: str = "10us",
    message_bytes: str = "2KiB",
    probes: str | None = "500ns",
    **workload: Any,
) -> ScenarioData:
    """An 8-GPU, 4-spine fat tree shaped like the shipped one, one synthetic workload, probes."""
    workloads: list[dict[str, Any]] = [
        {
            "kind": "synthetic",
            "pattern": pattern,
            "message_bytes": message_bytes,
            "load": load,
            **workload,
        }
    ]
    if probes is not None:
        workloads.append({"kind": "probes", "interval": probes})
    return {
        "name": "fat_tree",
        "seed": 1,
        "duration": duration,
        "topology": {"kind": "fat_tree", "gpus": 8, "levels": 2, "radix": 4, "spines": 4},
        "links": {"default": {"rate": "64GT/s", "lanes": 16, "length": "30cm"}},
        "switch": {"arbitration": "40ns"},
        "root_complex": {"arbitration": "20ns"},
        "workloads": workloads,
    }


def _bandwidth(data: ScenarioData, src: str, dst: str) -> float:
    """Payload bandwidth (bytes/ns) of the channel ``src -> dst`` as the builder derives it."""
    fabric = build_fabric(scenario_from_data(data))
    return fabric.channels[fabric.channel_index[(src, dst)]].bytes_per_ns


@pytest.fixture(scope="session")
def one_link_data() -> Callable[..., ScenarioData]:
    return _one_link


@pytest.fixture(scope="session")
def fat_tree_data() -> Callable[..., ScenarioData]:
    return _fat_tree


@pytest.fixture(scope="session")
def channel_bandwidth() -> Callable[[ScenarioData, str, str], float]:
    return _bandwidth

"""Saturation throughput of the crossbar bench (``sitssim.switch.saturation``) and the
shipped reference scenario ``scenarios/reference/switch_hol.yaml``.

The shipped bench at N = 2, 4, 8 must measure Karol, Hluchyj and Morgan's FIFO saturation
throughput (0.750 / 0.655 / 0.618) within 0.01 over at least 20,000 cells per input after
the warm-up; the same bench with VOQs and iSLIP must pass 0.95. The window and backlog
rules are pinned on hand-made tables, where every figure is known.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from ruamel.yaml import YAML

from sitssim.fabric.messages import KIND_DATA, KIND_NAMES
from sitssim.fabric.topology import Fabric, build_fabric
from sitssim.scenario import scenario_from_data
from sitssim.simulation import RunResult, simulate
from sitssim.switch.saturation import WARM_UP, saturation_metrics

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "scenarios" / "reference" / "switch_hol.yaml"
GOLDEN = ROOT / "tests" / "golden" / "reference" / "switch_hol.json"
# Karol, Hluchyj and Morgan (1987), Table I: FIFO saturation throughput by N.
KAROL = {2: 0.750, 4: 0.655, 8: 0.618}


def bench_data() -> dict[str, Any]:
    return YAML(typ="safe").load(BENCH.read_text(encoding="utf-8"))


def run_bench(ports: int, **switch: Any) -> RunResult:
    """The shipped bench with ``ports`` senders and receivers (and ``switch`` changed)."""
    data = copy.deepcopy(bench_data())
    data["topology"]["ports"] = ports
    wl = data["workloads"][0]
    wl["sources"] = [f"in{i}" for i in range(ports)]
    wl["destinations"] = [f"out{j}" for j in range(ports)]
    data["switch"].update(switch)
    return simulate(scenario_from_data(data))


# --- the shipped bench -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("ports", sorted(KAROL))
def test_the_bench_measures_karols_fifo_saturation_throughput(ports: int) -> None:
    # Over seeds 1-4 at N = 8 the bench measured 0.6176 to 0.6203: 0.01 is several times
    # that spread, and still fails a switch without head-of-line blocking (about 1) or one
    # that loses a matching now and then (a few per cent low).
    if ports == 8:
        # The shipped bench as it is: its golden report, which tests/test_shipped_scenarios.py
        # holds byte for byte to a fresh run of it, so the bench is not run twice.
        sw = json.loads(GOLDEN.read_text(encoding="utf-8"))["metrics"]["switch"]
    else:
        sw = run_bench(ports).metrics["switch"]
    assert isinstance(sw, dict)
    assert sw["saturation_backlogged"] is True
    assert sw["saturation_cells_per_input"] >= 20_000
    assert sw["saturation_throughput"] == pytest.approx(KAROL[ports], abs=0.01)


@pytest.mark.slow
def test_voqs_with_islip_remove_the_head_of_line_blocking() -> None:
    sw = run_bench(8, voq=True, allocator="islip").metrics["switch"]
    assert isinstance(sw, dict)
    assert sw["saturation_backlogged"] is True
    assert sw["saturation_cells_per_input"] >= 20_000
    assert sw["saturation_throughput"] > 0.95


def test_the_bench_header_states_its_verdicts() -> None:
    """The header's verdict list is what the run gives: checked on a short run of the same
    bench (the verdicts do not depend on the run's length)."""
    data = bench_data()
    data["duration"] = "2us"
    result = simulate(scenario_from_data(data))
    verdicts = {v.id: v.verdict for v in result.verdicts}
    header = BENCH.read_text(encoding="utf-8").split("\nversion:")[0]
    assert [c for c, v in verdicts.items() if v == "fail"] == ["fabric.topology_limits"]
    passing = [c for c, v in verdicts.items() if v == "pass"]
    assert passing == [
        "phy.symbol_rate",
        "phy.training_sequence",
        "phy.eq_level3",
        "phy.phase_alignment",
        "phy.reset_to_l0",
        "fabric.hop_limit",
    ]
    for clause in [*passing, "fabric.topology_limits"]:
        assert clause in header, clause
    # The switch advertises credits; the receivers' channels carry none.
    assert result.metrics["link_layer"]["credit_links"] == 16  # type: ignore[index]


def test_a_light_load_is_no_saturation_measurement() -> None:
    # Half the line rate is below even FIFO inputs' 0.618: the inputs run dry, so the run
    # reports no saturation throughput rather than the offered load under its name.
    data = bench_data()
    data["duration"] = "5us"
    data["workloads"][0]["load"] = 0.5
    sw = simulate(scenario_from_data(data)).metrics["switch"]
    assert isinstance(sw, dict)
    assert sw["saturation_backlogged"] is False
    assert sw["saturation_throughput"] is None
    assert sw["saturation_cells_per_input"] > 500


def test_other_fabrics_report_no_switch_section() -> None:
    data = {
        "name": "t",
        "duration": "1us",
        "topology": {"kind": "fat_tree", "gpus": 4, "levels": 1},
        "workloads": [
            {"kind": "synthetic", "pattern": "uniform_random", "message_bytes": "256B", "load": 0.2}
        ],
    }
    result = simulate(scenario_from_data(data))
    assert "switch" not in result.metrics


# --- the window and the backlog, on hand-made tables -----------------------------------


CELL = 256


def crossbar(ports: int) -> Fabric:
    return build_fabric(
        scenario_from_data(
            {
                "name": "t",
                "duration": "1us",
                "topology": {"kind": "crossbar", "ports": ports},
                "links": {"default": {"rate": "64GT/s", "lanes": 16, "propagation": "5ns"}},
            }
        )
    )


def tables(
    fabric: Fabric, cells: list[tuple[str, str, float, float]], cell_ns: float
) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """Messages (src, dst, injected, delivered) of ``CELL`` bytes, and a links table whose
    receiver channels were busy ``cell_ns`` per cell; crossings one cell time and 5 ns of
    flight before each delivery."""
    nodes = sorted(fabric.graph)
    messages = pd.DataFrame(
        {
            "msg_id": np.arange(len(cells)),
            "kind": pd.Categorical([KIND_NAMES[KIND_DATA]] * len(cells)),
            "src": pd.Categorical([c[0] for c in cells], categories=nodes),
            "dst": pd.Categorical([c[1] for c in cells], categories=nodes),
            "bytes": [CELL] * len(cells),
            "t_inject_ns": [c[2] for c in cells],
            "t_deliver_ns": [c[3] for c in cells],
        }
    )
    into = {c[1] for c in cells}
    links = pd.DataFrame(
        {
            "src": [ch.src for ch in fabric.channels],
            "dst": [ch.dst for ch in fabric.channels],
            "messages": [sum(c[1] == ch.dst for c in cells) for ch in fabric.channels],
            "busy_ns": [
                cell_ns * sum(c[1] == ch.dst for c in cells) if ch.dst in into else 0.0
                for ch in fabric.channels
            ],
        }
    )
    crossed = messages["t_deliver_ns"].to_numpy() - cell_ns - 5.0
    return messages, links, crossed


def test_the_window_opens_after_warm_up_and_closes_when_the_first_input_is_done() -> None:
    fabric = crossbar(2)
    cell_ns = 2.0
    # in0 delivers every 2 ns from 100 to 298; in1 from 110 to 208 (it runs out first).
    # Both were injected long before, so both are backlogged throughout.
    cells = [("in0", "out0", 0.0, 100.0 + 2 * k) for k in range(100)]
    cells += [("in1", "out1", 0.0, 110.0 + 2 * k) for k in range(50)]
    sw = saturation_metrics(fabric, *tables(fabric, cells, cell_ns))
    assert sw is not None
    start = 110.0 + WARM_UP * (208.0 - 110.0)
    assert sw["saturation_window_ns"] == {"start": pytest.approx(start), "end": 208.0}
    done = np.array([c[3] for c in cells])
    counted = int(((done >= start) & (done < 208.0)).sum())
    assert sw["saturation_throughput"] == pytest.approx(counted / (2 * (208.0 - start) / 2.0))
    assert sw["saturation_cell_ns"] == cell_ns
    assert sw["saturation_backlogged"] is True
    # in1's cells in [start, 208): 208 itself, its last, is outside.
    assert sw["saturation_cells_per_input"] == int(
        ((done[100:] >= start) & (done[100:] < 208.0)).sum()
    )


def test_an_input_that_runs_dry_inside_the_window_is_not_backlogged() -> None:
    fabric = crossbar(2)
    # in1's cells are injected 50 ns before delivery, 43 ns before crossing: less than the
    # 47.2 ns a cell takes to reach the switch's buffer, so each arrives only as the one
    # before it has gone and nothing ever waits. (60 ns before delivery would be enough.)
    cells = [("in0", "out0", 0.0, 100.0 + 2 * k) for k in range(100)]
    cells += [("in1", "out1", 110.0 + 2 * k - 50.0, 110.0 + 2 * k) for k in range(50)]
    sw = saturation_metrics(fabric, *tables(fabric, cells, 2.0))
    assert sw is not None
    assert sw["saturation_backlogged"] is False
    assert sw["saturation_throughput"] is None
    cells[100:] = [("in1", "out1", 110.0 + 2 * k - 60.0, 110.0 + 2 * k) for k in range(50)]
    assert saturation_metrics(fabric, *tables(fabric, cells, 2.0))["saturation_backlogged"]  # type: ignore[index]


def test_cells_of_two_sizes_or_a_silent_sender_measure_nothing() -> None:
    fabric = crossbar(2)
    cells = [("in0", "out0", 0.0, 100.0 + 2 * k) for k in range(10)]
    messages, links, crossed = tables(fabric, cells, 2.0)
    # in1 sent nothing: "every input backlogged" never held.
    assert saturation_metrics(fabric, messages, links, crossed)["saturation_throughput"] is None  # type: ignore[index]
    cells += [("in1", "out1", 0.0, 100.0 + 2 * k) for k in range(10)]
    messages, links, crossed = tables(fabric, cells, 2.0)
    messages.loc[3, "bytes"] = 512
    assert saturation_metrics(fabric, messages, links, crossed)["saturation_throughput"] is None  # type: ignore[index]


def test_a_fabric_other_than_a_crossbar_has_no_saturation_section() -> None:
    fabric = build_fabric(
        scenario_from_data(
            {"name": "t", "duration": "1us", "topology": {"kind": "nvswitch", "gpus": 2}}
        )
    )
    empty = pd.DataFrame()
    assert saturation_metrics(fabric, empty, empty, np.zeros(0)) is None

"""NCCL's choices per call on built NVSwitch fabrics, and the scenario fields that narrow them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.config.collective_config import CollectiveWorkload
from sitssim.config.switch_capabilities import SwitchCapabilities
from sitssim.estimate import estimate
from sitssim.fabric.topology import build_fabric
from sitssim.scenario import scenario_from_data
from sitssim.simulation import simulate
from sitssim.workloads.ccl_choice import CallChooser, nvlinks_of


def hgx(links: int = 18, planes: int = 4, gpus: int = 8) -> dict[str, Any]:
    return {"kind": "nvswitch", "gpus": gpus, "planes": planes, "links_per_gpu": links}


NVLS_SWITCHES = SwitchCapabilities(multicast=True, reduction=True)


def chooser(
    topology: dict[str, Any], switches: SwitchCapabilities | None = None, **fields: Any
) -> CallChooser:
    fabric = build_fabric(
        scenario_from_data({"name": "c", "duration": "1us", "topology": topology})
    )
    wl = CollectiveWorkload(kind="collective", sizes=["8B"], **fields)
    return CallChooser(wl, fabric, list(fabric.gpus), switches)


def test_an_hgx_gpu_has_its_18_links_over_4_planes() -> None:
    fabric = build_fabric(scenario_from_data({"name": "c", "duration": "1us", "topology": hgx()}))
    assert {nvlinks_of(fabric, g) for g in fabric.gpus} == {18}


def test_h100_and_a100_communicators_have_24_channels() -> None:
    assert chooser(hgx(18), algorithm="auto").comm_channels == 24
    assert chooser(hgx(12, 6), algorithm="auto", gpu="A100-80GB").comm_channels == 24
    assert chooser(hgx(18), algorithm="auto", channels=8).comm_channels == 8


def test_auto_goes_from_ll_on_few_channels_to_simple_on_all_of_them() -> None:
    c = chooser(hgx(), algorithm="auto")
    small, large = c.call(8), c.call(256 << 20)
    assert (small.algorithm, small.protocol, small.channels) == ("ring", "ll", 1)
    assert (large.algorithm, large.protocol, large.channels) == ("ring", "simple", 24)
    assert small.costs.step_ns < large.costs.step_ns


def test_nvls_takes_over_from_half_a_megabyte_where_nccl_would_set_it_up() -> None:
    c = chooser(hgx(), NVLS_SWITCHES, algorithm="auto")
    picks = {1 << k: c.call(1 << k) for k in range(3, 32)}
    assert {n for n, call in picks.items() if call.algorithm == "nvls"} == {
        1 << k for k in range(19, 32)
    }
    assert picks[1 << 30].channels == 16 and picks[1 << 30].costs.kernel_ns == 23_000.0
    # Not on Ampere, not on two GPUs, not on switches that cannot multicast and reduce.
    for other in (
        chooser(hgx(12, 6), NVLS_SWITCHES, algorithm="auto", gpu="A100-80GB"),
        chooser(hgx(gpus=2), NVLS_SWITCHES, algorithm="auto"),
        chooser(hgx(), SwitchCapabilities(multicast=True), algorithm="auto"),
    ):
        assert other.call(1 << 30).algorithm == "ring"


def test_a_fixed_protocol_is_kept_at_every_size() -> None:
    c = chooser(hgx(), algorithm="ring", protocol="ll128")
    assert {c.call(1 << k).protocol for k in range(3, 31, 3)} == {"ll128"}


def test_the_table_records_what_each_call_ran_with() -> None:
    data = {
        "name": "auto",
        "duration": "1us",
        "topology": hgx(),
        "links": {"default": {"rate": "64GT/s", "lanes": 3}},
        "workloads": [{"kind": "collective", "algorithm": "auto", "sizes": ["8B", "64MiB"]}],
    }
    table = simulate(scenario_from_data(data)).tables["collectives"]
    assert list(table["protocol"]) == ["ll", "simple"]
    assert list(table["channels"]) == [1, 24]
    assert table["result_complete"].all()
    assert (table["duration_ns"] >= table["lower_bound_ns"]).all()


runner = CliRunner()


@pytest.mark.parametrize(
    ("topology", "body", "field", "expected"),
    [
        (
            "{kind: fat_tree, gpus: 4, levels: 1, radix: 4}",
            "    algorithm: auto\n",
            "workloads[0].algorithm",
            "one NVSwitch node",
        ),
        (
            "{kind: nvswitch, gpus: 4}",
            "    algorithm: tree\n    protocol: ll\n",
            "workloads[0].protocol",
            "bare data movement",
        ),
        ("{kind: nvswitch, gpus: 4}", "    channels: 4\n", "workloads[0].channels", "needs a"),
        (
            "{kind: nvswitch, gpus: 4}",
            "    algorithm: auto\n    min_messages: 4\n",
            "workloads[0].min_messages",
            "stripe",
        ),
        ("{kind: nvswitch, gpus: 4}", "    gpu: V100\n", "workloads[0].gpu", "unknown GPU"),
        (
            "{kind: nvswitch, gpus: 4}",
            "    algorithm: nvls\n",
            "workloads[0].algorithm",
            "multicast: true",
        ),
        (
            "{kind: nvswitch, gpus: 4}",
            "    algorithm: nvls\n    protocol: ll\n",
            "workloads[0].protocol",
            "simple protocol only",
        ),
    ],
)
def test_nccl_fields_that_cannot_hold_exit_2_naming_the_field(
    tmp_path: Path, topology: str, body: str, field: str, expected: str
) -> None:
    text = (
        f"version: 1\nname: bad\nduration: 1us\ntopology: {topology}\n"
        "workloads:\n  - kind: collective\n    sizes: [1KiB]\n" + body
    )
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    result = runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert field in result.output
    assert expected in result.output
    assert not (tmp_path / "o").exists()


def test_the_estimate_counts_the_messages_the_run_sends() -> None:
    data = {
        "name": "auto",
        "duration": "1us",
        "topology": hgx(),
        "links": {"default": {"rate": "64GT/s", "lanes": 3}},
        "workloads": [
            {
                "kind": "collective",
                "algorithm": "auto",
                "operation": "reduce_scatter",
                "sweep": {"min": "1B", "max": "64MiB", "factor": 8},
            }
        ],
    }
    scenario = scenario_from_data(data)
    table = simulate(scenario).tables["collectives"]
    assert estimate(scenario, build_fabric(scenario)).messages == table["messages"].sum()

"""Scenario loading: defaults, the line map behind every message, and the shipped scenarios."""

from __future__ import annotations

import hashlib
import re
from itertools import pairwise
from pathlib import Path

import networkx as nx
import pytest

from sitssim.errors import InputError
from sitssim.fabric.topology import build_fabric
from sitssim.scenario import (
    FatTree,
    LinkProfile,
    RootComplexParams,
    Scenario,
    SwitchParams,
    SyntheticWorkload,
    load_scenario,
    scenario_from_data,
)
from sitssim.stages.schedule import scenario_schedule

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "scenarios").rglob("*.yaml"))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def validate(scenario: Scenario) -> None:
    """What ``sitssim validate`` checks beyond the schema: the fabric and the workloads."""
    fabric = build_fabric(scenario)
    scenario_schedule(scenario, fabric, {n: i for i, n in enumerate(sorted(fabric.graph))})


MINIMAL = "name: minimal\nduration: 1us\ntopology:\n  kind: fat_tree\n  gpus: 4\n"


def test_omitted_fields_take_the_schema_defaults(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, MINIMAL))
    given = {"name", "duration", "topology"}
    for name, info in Scenario.model_fields.items():
        if name not in given:
            assert getattr(scenario, name) == info.get_default(call_default_factory=True), name
    for name, info in FatTree.model_fields.items():
        if name not in ("kind", "gpus"):
            assert getattr(scenario.topology, name) == info.get_default(), name
    assert scenario.switch == SwitchParams()
    assert scenario.root_complex == RootComplexParams()


def test_the_default_scenario_is_coherent(tmp_path: Path) -> None:
    # Defaults must name each other correctly: the topology's profile and a tenant exist.
    scenario = load_scenario(write(tmp_path, MINIMAL))
    assert scenario.topology.link in scenario.links
    assert scenario.tenants
    validate(scenario)


def test_the_default_link_is_the_sits_profile() -> None:
    # SPEC.md (reading 5): link rates are parameters, with the SITS 64 GT/s PAM4 as default.
    profile = LinkProfile()
    assert (profile.rate, profile.modulation) == (64.0, "pam4")


def test_an_empty_link_profile_equals_the_default_one(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, MINIMAL + "links:\n  default: {}\n"))
    assert scenario.links["default"] == LinkProfile()


def test_quantities_arrive_in_internal_units(tmp_path: Path) -> None:
    text = MINIMAL + (
        "workloads:\n"
        "  - kind: synthetic\n"
        "    pattern: uniform_random\n"
        "    message_bytes: 2KiB\n"
        "    interval: 1.5us\n"
        "    start: 250ns\n"
    )
    scenario = load_scenario(write(tmp_path, text))
    workload = scenario.workloads[0]
    assert isinstance(workload, SyntheticWorkload)
    assert workload.message_bytes == 2 * 1024 and isinstance(workload.message_bytes, int)
    assert (workload.interval, workload.start, scenario.duration) == (1500.0, 250.0, 1000.0)


def test_an_unquoted_date_is_text(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, MINIMAL + "description: 2026-01-01\n"))
    assert scenario.description == "2026-01-01"


def test_source_records_path_and_hash(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    source = load_scenario(path).source
    assert source.path == str(path)
    assert source.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


# Each "# @ <field>" comment names the field whose key sits on that line.
LOCATED = """\
version: 1  # @ version
name: lines
duration: 10us  # @ duration
topology:  # @ topology
  kind: graph
  nodes:  # @ topology.nodes
    - id: g0  # @ topology.nodes[0]
      kind: gpu  # @ topology.nodes[0].kind
    - {id: g1, kind: gpu}  # @ topology.nodes[1]
    - id: s0  # @ topology.nodes[2]

      kind: switch  # @ topology.nodes[2].kind
  edges:
    - {a: g0, b: s0}  # @ topology.edges[0]
    - a: g1
      b: s0  # @ topology.edges[1].b
links:
  default:  # @ links.default
    lanes: 8  # @ links.default.lanes
workloads:
  - kind: probes
    requester: g0  # @ workloads[0].requester
  - kind: synthetic  # @ workloads[1]
    pattern: pair
    src: g0
    dst: g1  # @ workloads[1].dst
    message_bytes: 64B
    interval: 1us  # @ workloads[1].interval
"""


def parse_loc(dotted: str) -> tuple:
    return tuple(
        int(part[1:-1]) if part.startswith("[") else part
        for part in re.findall(r"\[\d+\]|[^.\[\]]+", dotted)
    )


def marked_fields(text: str) -> dict[str, int]:
    marks = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if "# @ " in line:
            marks[line.split("# @ ")[1].strip()] = number
    return marks


@pytest.fixture
def located(tmp_path: Path) -> Scenario:
    return load_scenario(write(tmp_path, LOCATED))


@pytest.mark.parametrize(("dotted", "line"), sorted(marked_fields(LOCATED).items()))
def test_line_map_finds_nested_fields(located: Scenario, dotted: str, line: int) -> None:
    assert located.source.line_of(parse_loc(dotted)) == line


def test_line_of_an_absent_field_is_its_nearest_present_parent(located: Scenario) -> None:
    marks = marked_fields(LOCATED)
    assert located.source.line_of(("workloads", 1, "tenant")) == marks["workloads[1]"]
    assert located.source.line_of(("switch", "arbitration")) is None


@pytest.mark.parametrize("dotted", ["workloads[1].dst", "topology.edges[1].b", "duration"])
def test_scenario_error_points_at_the_field(located: Scenario, dotted: str) -> None:
    error = located.error(parse_loc(dotted), "something is wrong here")
    line = marked_fields(LOCATED)[dotted]
    assert isinstance(error, InputError)
    assert (error.file, error.line, error.field) == (located.source.path, line, dotted)
    assert str(error) == f"{located.source.path}:{line}: {dotted}: something is wrong here"


def test_builder_errors_use_the_line_map(tmp_path: Path) -> None:
    text = LOCATED.replace("dst: g1  # @", "dst: g9  # @")
    scenario = load_scenario(write(tmp_path, text))
    fabric = build_fabric(scenario)
    with pytest.raises(InputError) as info:
        scenario_schedule(scenario, fabric, {n: i for i, n in enumerate(sorted(fabric.graph))})
    assert info.value.line == marked_fields(text)["workloads[1].dst"]
    assert info.value.field == "workloads[1].dst"


def test_data_without_a_file_reports_where_it_can() -> None:
    with pytest.raises(InputError) as info:
        scenario_from_data({"name": "x", "duration": "1us", "topology": {"kind": "fat_tree"}})
    assert (info.value.file, info.value.line, info.value.field) == (
        "<memory>",
        None,
        "topology.gpus",
    )


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(ROOT)) for p in SHIPPED])
def test_every_shipped_scenario_loads_and_validates(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.source.path == str(path)
    validate(scenario)


def test_scenarios_are_shipped() -> None:
    assert len(SHIPPED) >= 2


def test_a_fat_tree_beyond_the_spec_gpu_limit_is_valid_input(tmp_path: Path) -> None:
    # fabric.topology_limits allows 8 GPUs; asking for 12 is a misconfiguration, not bad input.
    text = MINIMAL.replace("gpus: 4", "gpus: 12\n  radix: 4\n  levels: 2")
    scenario = load_scenario(write(tmp_path, text))
    validate(scenario)
    assert len(build_fabric(scenario).gpus) == 12


def test_a_nine_hop_chain_is_valid_input(tmp_path: Path) -> None:
    # fabric.hop_limit allows 7 hops; a longer path runs and fails its clause instead.
    switches = [f"s{i}" for i in range(1, 9)]
    chain = ["g0", *switches, "g1"]
    nodes = "".join(f"    - {{id: {s}, kind: switch}}\n" for s in switches)
    edges = "".join(f"    - {{a: {a}, b: {b}}}\n" for a, b in pairwise(chain))
    text = (
        "name: chain\nduration: 1us\ntopology:\n  kind: graph\n  nodes:\n"
        "    - {id: g0, kind: gpu}\n    - {id: g1, kind: gpu}\n" + nodes + "  edges:\n" + edges
    )
    scenario = load_scenario(write(tmp_path, text))
    validate(scenario)
    graph = build_fabric(scenario).graph
    assert nx.shortest_path_length(graph, "g0", "g1") == len(chain) - 1 > 7

"""The switch-quota stage: which table each port gets, when it is loaded, and the order a
port's device sees its events in."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sitssim.config.vc_quota_config import QuotaUpdate, VcQuota
from sitssim.fabric.topology import build_fabric
from sitssim.scenario import load_scenario
from sitssim.simulation import simulate
from sitssim.stages.base import Stage
from sitssim.stages.switch_quota import (
    STAGE,
    QuotaPort,
    QuotaSection,
    build_tables,
    l0_entries,
    offer_events,
    quota_section,
    switch_ports,
)
from sitssim.switch.vc_quota import Action, QuotaTable

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
EXAMPLE = SCENARIOS / "nvswitch_tenants_quota.yaml"


def _section(quota: VcQuota, vcs_per_port: int = 8) -> QuotaSection:
    return QuotaSection(quota, vcs_per_port, ("A", "B"), (), 1e6)


def test_every_switch_port_is_the_channel_from_the_switch_to_a_peer() -> None:
    fabric = build_fabric(load_scenario(EXAMPLE))
    ports = switch_ports(fabric)
    # 4 planes, each linked to 8 GPUs by one trunk: 32 ports.
    assert len(ports) == 32
    assert ports[0] == QuotaPort(
        fabric.channel_index[("nvs0", "gpu0")], "nvs0", "gpu0", "gpu0-nvs0"
    )
    for port in ports:
        channel = fabric.channels[port.channel]
        assert (channel.src, channel.dst) == (port.switch, port.peer)


def test_a_peer_override_beats_a_switch_override_beats_the_default_in_any_order() -> None:
    ports = [
        QuotaPort(0, "s0", "g0", "g0-s0"),
        QuotaPort(1, "s0", "g1", "g1-s0"),
        QuotaPort(2, "s1", "g0", "g0-s1"),
    ]
    quota = VcQuota(
        table={"A": [1]},
        ports=[
            {"switch": "s0", "peer": "g1", "table": {"A": [3]}},
            {"switch": "s0", "table": {"A": [2]}},
        ],
    )
    tables = build_tables(_section(quota, vcs_per_port=4), ports)
    assert [dict(t.rows()) for t in tables] == [{"A": (2,)}, {"A": (3,)}, {"A": (1,)}]
    # Each table spans the port's 4 VCs.
    assert [t.width for t in tables] == [4, 4, 4]
    # Each port owns its table: loading one loads no other.
    tables[0].load(0.0)
    assert [t.loaded for t in tables] == [True, False, False]


def test_l0_entries_are_put_on_the_traffic_clock_of_the_last_first_entry() -> None:
    states = pd.DataFrame(
        {
            "link": ["a-s", "a-s", "a-s", "b-s", "c-s"],
            "state": ["L0", "Recovery.RcvrLock", "L0", "L0", "Detect.Quiet"],
            "t_enter_ns": [100.0, 900.0, 1200.0, 400.0, 0.0],
        }
    )
    assert l0_entries(states, ["a-s", "b-s", "c-s"]) == {
        "a-s": [-300.0, 800.0],
        "b-s": [0.0],
        "c-s": [],
    }
    # No PHY stage: every link is up at the start of traffic.
    assert l0_entries(None, ["a-s"]) == {"a-s": [0.0]}


def test_a_write_at_the_instant_of_l0_finds_the_table_loaded() -> None:
    port = QuotaPort(0, "s0", "g0", "g0-s0")
    table = QuotaTable({"A": [1]})
    writes = [
        QuotaUpdate(at="0ns", switch="s0", tenant="A", slots=[5]),
        QuotaUpdate(at="0ns", switch="s0", peer="g0", tenant="B", slots=[6]),
        QuotaUpdate(at="0ns", switch="s0", peer="g9", tenant="B", slots=[7]),
        QuotaUpdate(at="0ns", switch="s1", tenant="B", slots=[8]),
    ]
    offer_events([table], [port], {"g0-s0": [0.0, 50.0]}, writes)
    # Loaded first; then the two writes that name this port, in the order written.
    assert table.loaded_at_ns == 0.0
    assert [(u.tenant, u.slots, u.applied) for u in table.updates] == [
        ("A", (5,), False),
        ("B", (6,), False),
    ]
    # The second L0 entry (a retrain) kept the table.
    assert table.load(60.0) is Action.KEEP and table.loaded_at_ns == 0.0


def test_a_write_before_a_late_link_reaches_l0_is_applied() -> None:
    port = QuotaPort(0, "s0", "g0", "g0-s0")
    table = QuotaTable({"A": [1]})
    writes = [QuotaUpdate(at="10ns", switch="s0", tenant="A", slots=[9])]
    offer_events([table], [port], {"g0-s0": [20.0]}, writes)
    assert [u.applied for u in table.updates] == [True]
    assert table.facts().loaded_slot_sum == 9


def test_a_scenario_without_a_quota_table_gets_no_stage_tables() -> None:
    scenario = load_scenario(SCENARIOS / "nvswitch_8gpu.yaml").updated(duration=2000.0)
    fabric = build_fabric(scenario)
    section = quota_section(scenario)
    assert section.quota is None
    stage = STAGE.build(scenario, fabric, None)  # type: ignore[arg-type]
    assert type(stage) is Stage
    tables = simulate(scenario).tables
    assert not {"vc_quota", "vc_quota_ports", "vc_quota_updates"} & set(tables)


@pytest.fixture(scope="module")
def example_tables() -> dict[str, pd.DataFrame]:
    return simulate(load_scenario(EXAMPLE)).tables


def test_the_example_loads_every_port_at_its_links_first_l0_entry(
    example_tables: dict[str, pd.DataFrame],
) -> None:
    states = example_tables["link_states"]
    first = states[states["state"] == "L0"].groupby("link")["t_enter_ns"].min()
    ports = example_tables["vc_quota_ports"]
    expected = ports["link"].map(first) - first.max()
    assert ports["loaded_at_ns"].tolist() == expected.tolist()
    assert ports["loaded_at_ns"].max() == 0.0 and ports["loaded_at_ns"].min() < 0.0
    # Tenant A's cells, then B's, per port: 2 tenants x 8 VCs.
    cells = example_tables["vc_quota"]
    assert len(cells) == 32 * 16
    port0 = cells[cells["port_id"] == 0]
    assert port0.groupby("tenant")["slots"].apply(list).to_dict() == {
        "A": [8, 8, 8, 8, 0, 0, 0, 0],
        "B": [0, 0, 0, 0, 8, 8, 8, 8],
    }

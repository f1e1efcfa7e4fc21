"""Per-tenant accounting: the ``links_by_tenant`` table splits each channel's traffic by
tenant and VC, derived after the run from the messages table and the routes."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.scenario import load_scenario
from sitssim.simulation import RunResult, _links_by_tenant_table, simulate

ROOT = Path(__file__).resolve().parents[1]
TWO_TENANTS = ROOT / "scenarios" / "nvswitch_tenants_quota.yaml"
COLUMNS = ["link_id", "name", "tenant", "vc", "messages", "bytes"]


@pytest.fixture(scope="module")
def run() -> RunResult:
    return simulate(load_scenario(TWO_TENANTS))


def test_the_split_sums_to_each_channels_traffic(run: RunResult) -> None:
    messages = run.tables["messages"]
    # The equality holds for delivered traffic; this scenario delivers everything.
    assert messages["t_deliver_ns"].notna().all()
    links = run.tables["links"]
    split = run.tables["links_by_tenant"]
    summed = (
        split.groupby("link_id")[["messages", "bytes"]]
        .sum()
        .reindex(links["link_id"], fill_value=0)
    )
    assert links["messages"].sum() > 0
    np.testing.assert_array_equal(summed["messages"].to_numpy(), links["messages"].to_numpy())
    np.testing.assert_array_equal(summed["bytes"].to_numpy(), links["bytes"].to_numpy())


def test_each_tenant_is_charged_its_own_messages_on_every_hop(run: RunResult) -> None:
    # A table that gave one tenant's traffic to another, or counted a message on one
    # channel of its route only, keeps the channel sums above and breaks these.
    messages = run.tables["messages"]
    split = run.tables["links_by_tenant"]
    assert set(split["tenant"].astype(str)) == {"A", "B"}
    for tenant, mine in messages.groupby("tenant", observed=True):
        rows = split[split["tenant"] == tenant]
        assert rows["messages"].sum() == mine["hops"].sum()
        assert rows["bytes"].sum() == (mine["bytes"] * mine["hops"]).sum()
        assert set(rows["vc"]) == set(mine["vc"])
    # The quota table gives the tenants disjoint VCs, so no VC carries both.
    assert split.groupby("vc")["tenant"].nunique().max() == 1


def test_one_row_per_channel_tenant_and_vc_named_as_in_links(run: RunResult) -> None:
    split = run.tables["links_by_tenant"]
    assert list(split.columns) == COLUMNS
    assert not split.duplicated(["link_id", "tenant", "vc"]).any()
    assert (split["messages"] > 0).all()
    names = run.tables["links"].set_index("link_id")["name"]
    assert list(split["name"]) == list(names.reindex(split["link_id"]))
    assert list(split["tenant"].cat.categories) == ["A", "B"]


def test_undelivered_messages_are_left_out_and_routes_spread_over_their_channels() -> None:
    # Route 0 crosses channels 2 then 0; route 1 crosses channel 1 only.
    router = SimpleNamespace(
        routes=[SimpleNamespace(channels=(2, 0)), SimpleNamespace(channels=(1,))]
    )
    fabric = SimpleNamespace(channels=[SimpleNamespace(name=n) for n in ("a>s", "s>b", "b>s")])
    tenants = ["t0", "t1", "idle"]
    messages = pd.DataFrame(
        {
            "route": [0, 0, 0, 1, 1],
            "tenant": pd.Categorical.from_codes([0, 1, 0, 0, 1], categories=tenants),
            "vc": [0, 1, 2, 0, 1],
            "bytes": [100, 10, 7, 1000, 5],
            # The third message is still in flight: which channels it crossed is not known.
            "t_deliver_ns": [5.0, 6.0, np.nan, 7.0, 8.0],
        }
    )
    table = _links_by_tenant_table(messages, router, fabric)
    expected = pd.DataFrame(
        {
            "link_id": [0, 0, 1, 1, 2, 2],
            "name": ["a>s", "a>s", "s>b", "s>b", "b>s", "b>s"],
            "tenant": pd.Categorical(["t0", "t1", "t0", "t1", "t0", "t1"], categories=tenants),
            "vc": [0, 1, 0, 1, 0, 1],
            "messages": [1, 1, 1, 1, 1, 1],
            "bytes": [100, 10, 1000, 5, 100, 10],
        }
    )
    pd.testing.assert_frame_equal(table, expected, check_dtype=False)
    assert (table[["link_id", "vc", "messages", "bytes"]].dtypes == np.int64).all()


def test_no_message_gives_an_empty_table_with_the_columns() -> None:
    messages = pd.DataFrame(
        {
            "route": np.zeros(0, dtype=np.int64),
            "tenant": pd.Categorical.from_codes([], categories=["default"]),
            "vc": np.zeros(0, dtype=np.int64),
            "bytes": np.zeros(0, dtype=np.int64),
            "t_deliver_ns": np.zeros(0),
        }
    )
    table = _links_by_tenant_table(
        messages, SimpleNamespace(routes=[]), SimpleNamespace(channels=[])
    )
    assert list(table.columns) == COLUMNS
    assert len(table) == 0


def test_the_run_writes_it_as_parquet_and_leaves_the_report_alone(
    run: RunResult, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(TWO_TENANTS), "--out", str(out), "--no-figures"])
    assert result.exit_code == 0, result.output
    on_disk = pd.read_parquet(out / "links_by_tenant.parquet")
    pd.testing.assert_frame_equal(
        on_disk, run.tables["links_by_tenant"], check_dtype=False, check_categorical=False
    )
    assert "links_by_tenant" not in (out / "report.json").read_text(encoding="utf-8")
    assert "links_by_tenant" not in json.loads((out / "report.json").read_text())["metrics"]

"""Bad ``kind: tenant_requests`` workloads and ``switch.vc_quota`` dealing: one located line,
exit 2, no traceback (``tests/located_errors.assert_located``). The line each case must
name is marked ``# <-`` in its scenario text."""

from __future__ import annotations

from pathlib import Path

import pytest
from located_errors import MARK, assert_located
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.errors import InputError
from sitssim.scenario import load_scenario

HEAD = """\
version: 1
name: bad_tenant_requests
duration: 2us
topology:
  kind: graph
  nodes:
    - {id: g0, kind: gpu}
    - {id: g1, kind: gpu}
    - {id: sw, kind: switch}
  edges:
    - {a: g0, b: sw}
    - {a: g1, b: sw}
links:
  default: {rate: 64GT/s, lanes: 16}
tenants:
  - {name: a}
  - {name: b}
"""


def workload(*lines: str) -> str:
    return HEAD + "workloads:\n  - kind: tenant_requests\n" + "".join(f"    {x}\n" for x in lines)


CASES = {
    "unknown tenant": (
        workload("interval: 100ns", f"tenants: [a, c]  {MARK}"),
        "workloads[0].tenants[1]",
        "unknown tenant 'c'",
    ),
    "unknown source GPU": (
        workload("interval: 100ns", f"sources: [g0, g9]  {MARK}"),
        "workloads[0].sources[1]",
        "unknown node 'g9'",
    ),
    "unknown target GPU": (
        workload("interval: 100ns", f"targets: [g7]  {MARK}"),
        "workloads[0].targets[0]",
        "unknown node 'g7'",
    ),
    "a switch as target": (
        workload("interval: 100ns", f"targets: [g1, sw]  {MARK}"),
        "workloads[0].targets[1]",
        "'sw' is a switch, not a GPU",
    ),
    "a switch as source": (
        workload("interval: 100ns", f"sources: [sw]  {MARK}"),
        "workloads[0].sources[0]",
        "not a GPU",
    ),
    "no target but the requester": (
        workload("interval: 100ns", "sources: [g0]", f"targets: [g0]  {MARK}"),
        "workloads[0].targets",
        "no target other than the requester",
    ),
    "stop before start": (
        workload("interval: 100ns", "start: 1us", f"stop: 500ns  {MARK}"),
        "workloads[0].stop",
        "'stop' must come after 'start'",
    ),
    "stop at start": (
        workload("interval: 100ns", "start: 1us", f"stop: 1us  {MARK}"),
        "workloads[0].stop",
        "'stop' must come after 'start'",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_bad_workload_is_refused_on_its_line(tmp_path: Path, case: str) -> None:
    text, field, expect = CASES[case]
    assert_located(tmp_path, text, field, expect)


def mark_kind(text: str) -> str:
    """``text`` with the workload's ``kind:`` line marked: a rule across the workload's
    fields is reported at the workload."""
    return text.replace("  - kind: tenant_requests\n", f"  - kind: tenant_requests  {MARK}\n")


@pytest.mark.parametrize(
    "lines",
    [("load: 0.5", "interval: 100ns"), ("turnaround: 100ns",)],
    ids=["both", "neither"],
)
def test_load_and_interval_both_or_neither_is_refused(tmp_path: Path, lines: tuple[str]) -> None:
    assert_located(
        tmp_path, mark_kind(workload(*lines)), "workloads[0]", "exactly one of 'load' or 'interval'"
    )


def quota(*lines: str, vcs_per_port: int = 4) -> str:
    return (
        HEAD
        + f"switch:\n  vcs_per_port: {vcs_per_port}\n  vc_quota:\n"
        + "".join(f"    {x}\n" for x in lines)
        + "workloads:\n  - {kind: tenant_requests, interval: 100ns}\n"
    )


def test_vcs_per_tenant_beside_an_explicit_table_is_refused(tmp_path: Path) -> None:
    text = quota("table: {a: [8, 8], b: [8, 8]}", f"vcs_per_tenant: 1  {MARK}")
    assert_located(tmp_path, text, "switch.vc_quota.vcs_per_tenant", "deals a table round robin")


def test_slots_beside_an_explicit_table_is_refused(tmp_path: Path) -> None:
    text = quota("table: {a: [8, 8], b: [8, 8]}", f"slots: 32  {MARK}")
    assert_located(tmp_path, text, "switch.vc_quota.slots", "deals a table round robin")


def test_vcs_per_tenant_above_the_ports_vcs_is_refused(tmp_path: Path) -> None:
    text = quota(f"vcs_per_tenant: 6  {MARK}", vcs_per_port=4)
    assert_located(tmp_path, text, "switch.vc_quota.vcs_per_tenant", "at most the port's 4 VCs")


def test_the_good_scenarios_behind_the_cases_are_accepted(tmp_path: Path) -> None:
    """Each case breaks one thing: the scenario it was made from validates."""
    for k, text in enumerate(
        [workload("interval: 100ns", "tenants: [a, b]"), quota("vcs_per_tenant: 2")]
    ):
        path = tmp_path / f"good{k}.yaml"
        path.write_text(text, encoding="utf-8")
        result = CliRunner().invoke(app, ["validate", str(path)])
        assert result.exit_code == 0, result.output


COUNTED = HEAD.replace("tenants:\n  - {name: a}\n  - {name: b}\n", "tenants: COUNT\n") + (
    "workloads:\n  - {kind: tenant_requests, interval: 100ns, tenants: [t0, t2]}\n"
)


def test_a_tenant_count_names_that_many_tenants_t0_up(tmp_path: Path) -> None:
    path = tmp_path / "counted.yaml"
    path.write_text(COUNTED.replace("COUNT", "3"), encoding="utf-8")
    assert [t.name for t in load_scenario(path).tenants] == ["t0", "t1", "t2"]
    # Only t0 and t1 exist with two: the workload's t2 is unknown, on its own line.
    path.write_text(COUNTED.replace("COUNT", "2"), encoding="utf-8")
    with pytest.raises(InputError, match="unknown tenant 't2'"):
        load_scenario(path)


@pytest.mark.parametrize("count", ["0", "1025", "-3"])
def test_a_tenant_count_out_of_range_is_refused_on_its_line(tmp_path: Path, count: str) -> None:
    text = COUNTED.replace("COUNT", f"{count}  {MARK}")
    assert_located(tmp_path, text, "tenants", "a tenant count from 1 to 1024")

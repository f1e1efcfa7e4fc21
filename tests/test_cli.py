"""End-to-end runs of the shipped scenarios through the CLI, in-process."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from sitssim.cli import app, main
from sitssim.spec.registry import CLAUSES

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def fat_tree_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    out = tmp_path_factory.mktemp("fat") / "out"
    return run("run", SCENARIOS / "fat_tree_8gpu.yaml", "--out", out), out


def verdicts(out: Path) -> dict[str, dict]:
    report = json.loads((out / "report.json").read_text())
    return {c["id"]: c for c in report["clauses"]}


def test_fat_tree_passes_and_writes_every_output(fat_tree_out: tuple) -> None:
    result, out = fat_tree_out
    assert result.exit_code == 0, result.output
    for name in (
        "report.json",
        "run_info.json",
        "messages.parquet",
        "links.parquet",
        "probes.parquet",
        "nodes.parquet",
        "figures/latency_cdf.png",
        "figures/link_utilisation.png",
    ):
        assert (out / name).stat().st_size > 0, name
    by_id = verdicts(out)
    assert list(by_id) == list(CLAUSES)
    assert by_id["fabric.hop_limit"]["verdict"] == "pass"
    assert by_id["fabric.tso_window"]["verdict"] == "pass"
    assert by_id["fabric.topology_limits"]["verdict"] == "pass"
    assert "fabric.tso_window" in result.output and "Headline metrics" in result.output


def test_tables_on_disk_match_the_issue_columns(fat_tree_out: tuple) -> None:
    _, out = fat_tree_out
    messages = pd.read_parquet(out / "messages.parquet")
    for column in (
        "msg_id",
        "src",
        "dst",
        "bytes",
        "tenant",
        "t_inject_ns",
        "t_deliver_ns",
        "hops",
        "path",
    ):
        assert column in messages
    links = pd.read_parquet(out / "links.parquet")
    for column in ("link_id", "src", "dst", "rate_gts", "lanes", "bytes", "utilisation"):
        assert column in links
    probes = pd.read_parquet(out / "probes.parquet")
    for column in ("src", "dst", "t_issue_ns", "rtt_ns"):
        assert column in probes
    assert (probes["rtt_ns"] > 0).all()


def test_report_is_deterministic_and_seed_overrides(tmp_path: Path, fat_tree_out: tuple) -> None:
    _, first = fat_tree_out
    again = tmp_path / "again"
    assert (
        run("run", SCENARIOS / "fat_tree_8gpu.yaml", "--out", again, "--no-figures").exit_code == 0
    )
    assert (first / "report.json").read_bytes() == (again / "report.json").read_bytes()
    other = tmp_path / "other"
    assert (
        run(
            "run", SCENARIOS / "fat_tree_8gpu.yaml", "--out", other, "--seed", "99", "--no-figures"
        ).exit_code
        == 0
    )
    report = json.loads((other / "report.json").read_text())
    assert report["seed"] == 99
    assert (first / "report.json").read_bytes() != (other / "report.json").read_bytes()


@pytest.mark.parametrize(
    ("scenario", "clause", "table"),
    [
        ("violations/chain_9hop.yaml", "fabric.hop_limit", "messages"),
        ("violations/tso_loaded.yaml", "fabric.tso_window", "probes"),
    ],
)
def test_violation_scenarios_fail_their_clause_with_evidence(
    tmp_path: Path, scenario: str, clause: str, table: str
) -> None:
    out = tmp_path / "out"
    result = run("run", SCENARIOS / scenario, "--out", out, "--no-figures")
    assert result.exit_code == 1, result.output
    verdict = verdicts(out)[clause]
    assert verdict["verdict"] == "fail"
    assert verdict["basis"] == "measured"
    assert verdict["evidence"][0]["table"] == table and verdict["evidence"][0]["rows"]
    assert f"FAIL {clause}" in result.output
    assert f"evidence: {table} rows" in result.output
    failed = [c for c in verdicts(out).values() if c["verdict"] == "fail"]
    assert [c["id"] for c in failed] == [clause]


def test_the_host_io_example_exercises_replay_credits_and_ordering(tmp_path: Path) -> None:
    out = tmp_path / "o"
    result = run("run", SCENARIOS / "direct_rc_host_io.yaml", "--out", out, "--no-figures")
    assert result.exit_code == 0, result.output
    link_layer = json.loads((out / "report.json").read_text())["metrics"]["link_layer"]
    assert link_layer["replays"] > 0 and link_layer["credit_stalls"] > 0
    # The headline says so too.
    assert "flit replays / Recoveries" in result.output
    assert f"{link_layer['replays']} (" in result.output
    assert "credit stalls (count / total µs)" in result.output
    assert f"{link_layer['credit_stalls']} / " in result.output
    stalls = pd.read_parquet(out / "credits.parquet")
    # Reads wait for NP credit towards the GPUs, completions for Cpl credit back.
    assert {"P", "NP", "Cpl"} <= set(stalls["fc_class"].astype(str))


def test_default_output_folder_is_named_after_the_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run("run", SCENARIOS / "violations" / "chain_9hop.yaml", "--no-figures")
    assert result.exit_code == 1
    assert (tmp_path / "out" / "chain_9hop" / "report.json").exists()


def test_a_pipe_gets_the_clause_table_whole(
    fat_tree_out: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off a terminal the console takes 120 columns, not rich's 80, which cut the unit and
    basis columns to "measu…"; a terminal or COLUMNS still decides for itself."""
    from sitssim.cli import _width_off_terminal

    class Pipe(io.StringIO):
        def isatty(self) -> bool:
            return False

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    result, _ = fat_tree_out
    if int(os.environ.get("COLUMNS", "120")) >= 100:
        (row,) = [line for line in result.output.splitlines() if "fabric.hop_limit" in line]
        assert "hops" in row and "measured" in row
    monkeypatch.delenv("COLUMNS", raising=False)
    assert _width_off_terminal(Pipe()) == 120
    assert _width_off_terminal(Tty()) is None
    monkeypatch.setenv("COLUMNS", "60")
    assert _width_off_terminal(Pipe()) is None


def test_clauses_lists_every_clause() -> None:
    result = run("clauses")
    assert result.exit_code == 0
    for clause_id in CLAUSES:
        assert clause_id in result.output


def test_clauses_matrix_prints_each_clause_row_with_its_witnesses_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Off a terminal every row's witnesses and property tests come out whole, on the
    clause's row: a path cut in two could not be run."""
    from sitssim.spec.conformance import matrix

    monkeypatch.delenv("COLUMNS", raising=False)
    result = run("clauses", "--matrix")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for row in matrix():
        first = next(i for i, line in enumerate(lines) if f"│ {row.clause} " in line)
        # A row spans the lines up to the next clause's (or the table's end).
        end = next(i for i in range(first + 1, len(lines)) if not lines[i].startswith("│    "))
        cells = [[c.strip() for c in line.split("│")[1:-1]] for line in lines[first:end]]
        columns = [[line[k] for line in cells if line[k]] for k in range(len(cells[0]))]
        assert columns[3:] == [
            [row.basis],
            list(row.kinds),
            list(row.property_tests),
            [p.removeprefix("scenarios/") for p in row.passing],
            row.cells("\n")[-1].splitlines(),
        ]
    assert "scenarios/violations/faulty_phy.yaml fails phy.training_sequence (" in result.output


def test_validate_describes_the_fabric() -> None:
    result = run("validate", SCENARIOS / "nvswitch_8gpu.yaml")
    assert result.exit_code == 0
    assert "8 GPUs" in result.output and "4 switches" in result.output


def test_validate_at_flow_fidelity_refuses_what_run_at_flow_fidelity_refuses(
    tmp_path: Path,
) -> None:
    """A tenant_requests workload is fine at packet level and refused at flow level, by
    validate and run alike, on the workload's line; run writes nothing."""
    path = SCENARIOS / "nvswitch_multitenant.yaml"
    assert run("validate", path).exit_code == 0
    checked = run("validate", path, "--fidelity", "flow")
    ran = run("run", path, "--fidelity", "flow", "--out", tmp_path / "out")
    for result in (checked, ran):
        assert result.exit_code == 2, result.output
        assert "workloads[0].kind: a tenant_requests workload needs fidelity: packet" in (
            result.output
        )
    assert checked.output == ran.output
    assert not (tmp_path / "out").exists()


def test_an_unknown_fidelity_is_a_usage_error() -> None:
    result = run("validate", SCENARIOS / "nvswitch_8gpu.yaml", "--fidelity", "fluid")
    assert result.exit_code == 2
    assert "--fidelity: expected one of packet, flow, got 'fluid'" in result.output


def test_messages_stay_on_one_line_under_a_long_path(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    copy = deep / "nvswitch_8gpu.yaml"
    copy.write_text((SCENARIOS / "nvswitch_8gpu.yaml").read_text())
    result = run("validate", copy)
    assert result.exit_code == 0
    assert result.output.count("\n") == 1
    assert "8 GPUs, 4 switches" in result.output


def test_internal_error_is_one_line_and_a_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("model exploded\n" + "and said so at length " * 100)

    monkeypatch.setattr("sitssim.simulation.simulate", broken)
    out = tmp_path / "out"
    result = run("run", SCENARIOS / "fat_tree_8gpu.yaml", "--out", out)
    assert result.exit_code == 3
    assert "internal error: RuntimeError: model exploded" in result.output
    (line,) = result.output.strip().splitlines()
    assert len(line) < 400
    assert "Traceback" not in result.output
    log = result.output.split("log: ")[1].split(")")[0].strip()
    assert "Traceback" in Path(log).read_text()
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["run", str(SCENARIOS / "fat_tree_8gpu.yaml"), "--seed", str(2**63)], "'--seed'"),
        (["runn", "x.yaml"], "No such command 'runn'"),
        (["run"], "Missing argument"),
    ],
)
def test_a_usage_error_is_one_line_with_exit_2(
    argv: list[str], says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(sys, "argv", ["sitssim", *argv])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("error: ") and says in line

"""``sitssim sweep`` on the command line: its summary line and its exit codes (0 every
clause passed, 1 a clause failed in some run, 2 bad input on one located line with
nothing written, 3 a point raised)."""

from __future__ import annotations

from pathlib import Path

import pytest
from located_errors import marked_line
from sweeps.sweep_helpers import CHAIN_9HOP, DIRECT_RC, Spy, write_study
from typer.testing import CliRunner, Result

from sitssim.cli import app

runner = CliRunner()


def sweep(study: Path, out: Path, *more: str) -> Result:
    return runner.invoke(app, ["sweep", str(study), "--out", str(out), "--no-figures", *more])


def passing(tmp_path: Path) -> Path:
    return write_study(
        tmp_path / "ok.yaml",
        f"base: {DIRECT_RC}\n"
        "parameters:\n"
        "  duration: [1us]\n"
        "  workloads.0.load: [0.1, 0.2]\n"
        "metrics: [messages]\n",
    )


def assert_refused(result: Result, out: Path) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and "Traceback" not in result.output
    assert not out.exists()
    return line


def test_a_passing_study_exits_0_with_its_summary_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = sweep(passing(tmp_path), out, "--workers", "1")
    assert result.exit_code == 0, result.output
    first, results = result.stdout.splitlines()
    assert first.startswith("2 points (2 parameter combinations x 1 replications) in ")
    assert first.endswith(" s wall; 0 raised")
    assert results == f"results: {out}/points/, {out}/summary.parquet, {out}/figures/"
    assert len(list((out / "points").glob("*.parquet"))) == 2
    assert (out / "summary.parquet").is_file()
    assert not (out / "figures").exists() or not any((out / "figures").iterdir())


def test_a_clause_failing_in_some_run_exits_1_and_names_it(tmp_path: Path) -> None:
    study = write_study(
        tmp_path / "chain.yaml",
        f"base: {CHAIN_9HOP}\nparameters:\n  duration: [1us]\nmetrics: [messages]\n",
    )
    result = sweep(study, tmp_path / "out", "--workers", "1")
    assert result.exit_code == 1, result.output
    assert "clauses failing in some run: fabric.hop_limit" in result.stdout


def test_a_point_that_raises_exits_3_and_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(monkeypatch)
    spy.fail = {(0.2, 1)}
    result = sweep(passing(tmp_path), tmp_path / "out", "--workers", "1")
    assert result.exit_code == 3, result.output
    assert "; 1 raised" in result.stdout
    assert "ERROR point 1 seed 1: RuntimeError: boom at load 0.2 seed 1" in result.stdout


def test_a_bad_parameter_path_exits_2_on_one_located_line_with_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = f"base: {DIRECT_RC}\nparameters:\n  duration: [1us]\n  workloads.0.lood: [0.1]  # <-\n"
    study = write_study(tmp_path / "bad.yaml", text)
    spy = Spy(monkeypatch)
    out = tmp_path / "out"
    line = assert_refused(sweep(study, out), out)
    assert line.startswith(f"error: {study}:{marked_line(text)}: parameters.workloads.0.lood: ")
    assert "did you mean 'load'?" in line
    assert spy.calls == []


def test_a_bad_study_key_exits_2_on_one_located_line(tmp_path: Path) -> None:
    text = f"base: {DIRECT_RC}\nreplication: 2  # <-\n"
    study = write_study(tmp_path / "bad.yaml", text)
    out = tmp_path / "out"
    line = assert_refused(sweep(study, out), out)
    assert line.startswith(f"error: {study}:{marked_line(text)}: replication: unknown key")
    assert "did you mean 'replications'?" in line


@pytest.mark.parametrize(
    ("options", "field"),
    [
        (["--scheduler", "tcp://127.0.0.1:8786"], "--scheduler"),
        (["--backend", "local", "--scheduler", "tcp://127.0.0.1:8786"], "--scheduler"),
        (["--backend", "slurm"], "--backend"),
    ],
    ids=["scheduler-alone", "scheduler-with-local", "unknown-backend"],
)
def test_backend_options_that_do_not_fit_exit_2(
    tmp_path: Path, options: list[str], field: str
) -> None:
    out = tmp_path / "out"
    line = assert_refused(sweep(passing(tmp_path), out, *options), out)
    assert f": {field}: " in line, line

"""``validate`` sees what ``run`` sees: the scenarios ``run`` used to refuse or crash on alone.

Each case is a shipped scenario with one change, found by mutating the shipped scenarios and
comparing the two commands' exit codes. Both commands must give the same exit code and the
same one-line error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.preflight import CHECKS, preflight
from sitssim.scenario import scenario_from_data

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
runner = CliRunner()


def shipped(name: str, duration: str = "5us") -> dict[str, Any]:
    data = YAML(typ="safe").load((SCENARIOS / name).read_text())
    data["duration"] = duration
    return data


def _sync_flops_without_cdc(d: dict) -> None:
    d["faults"] = [{"kind": "synchronizer_flops", "device": "gpu0", "peer": "rc0", "flops": 3}]


def _sync_flops_unlinked_peer(d: dict) -> None:
    d["link_layer"] = {"cdc": {}}
    d["faults"] = [{"kind": "synchronizer_flops", "device": "gpu0", "peer": "gpu1", "flops": 3}]


def _cdc_too_fast(d: dict) -> None:
    d["link_layer"] = {"cdc": {}}
    d["links"]["default"]["rate"] = "128GT/s"


def _flit_errors_that_never_pass(d: dict) -> None:
    d["link_layer"] = {"flit": {"pre_fec_ber": 1e-2}}


REFUSED: dict[str, tuple[str, Callable[[dict], None], str]] = {
    "synchronizer_flops without cdc": (
        "direct_rc_4gpu.yaml",
        _sync_flops_without_cdc,
        "faults[0].kind: a synchronizer_flops fault needs the CDC FIFO evaluated",
    ),
    "synchronizer_flops peer not linked": (
        "direct_rc_4gpu.yaml",
        _sync_flops_unlinked_peer,
        "faults[0].peer: 'gpu0' has no link from 'gpu1'",
    ),
    "lane rate above the cdc write clock": (
        "direct_rc_4gpu.yaml",
        _cdc_too_fast,
        "links.default.rate: 128 GT/s is more than the CDC FIFO's write clock carries",
    ),
    "flit errors that never let a flit through": (
        "direct_rc_4gpu.yaml",
        _flit_errors_that_never_pass,
        "link_layer.flit.pre_fec_ber: this run needs about",
    ),
}


def _write(tmp_path: Path, name: str, data: dict) -> Path:
    path = tmp_path / f"{name.replace(' ', '_')}.yaml"
    with path.open("w") as f:
        YAML(typ="safe").dump(data, f)
    return path


def _invoke(*args: object) -> Any:
    return runner.invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("case", list(REFUSED))
def test_validate_refuses_what_run_refuses_with_the_same_line(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The machine's free memory moves between two commands; a refusal quotes it.
    monkeypatch.setenv("SITSSIM_MEMORY_LIMIT", "16GB")
    base, mutate, expected = REFUSED[case]
    data = shipped(base)
    mutate(data)
    path = _write(tmp_path, case, data)
    checked = _invoke("validate", path)
    ran = _invoke("run", path, "--out", tmp_path / "out", "--no-figures")
    assert checked.exit_code == ran.exit_code == 2, (checked.output, ran.output)
    line = checked.output.strip()
    assert line.count("\n") == 0 and expected in line
    assert ran.output.strip() == line
    assert not (tmp_path / "out").exists()


def test_flit_errors_on_three_lanes_run_and_are_costlier_than_on_two(tmp_path: Path) -> None:
    # The shipped HGX profile: 3-lane flit256 links. Flit-mode BER used to crash the run.
    data = shipped("hgx_h100.yaml", "2us")
    data["link_layer"] = {"flit": {"pre_fec_ber": 1e-5}}
    data["workloads"][0]["sweep"] = {"min": "1KiB", "max": "64KiB", "factor": 8}
    path = _write(tmp_path, "hgx_ber", data)
    assert _invoke("validate", path).exit_code == 0
    ran = _invoke("run", path, "--out", tmp_path / "out", "--no-figures")
    assert ran.exit_code in (0, 1), ran.output
    three = json.loads((tmp_path / "out" / "report.json").read_text())["metrics"]["link_layer"]
    data["links"]["nvlink4"]["lanes"] = 2
    path2 = _write(tmp_path, "hgx_ber_x2", data)
    assert _invoke("run", path2, "--out", tmp_path / "out2", "--no-figures").exit_code in (0, 1)
    two = json.loads((tmp_path / "out2" / "report.json").read_text())["metrics"]["link_layer"]
    # x3 puts every byte of a lane into one ECC group: far weaker than x2's interleave.
    assert three["p_replay_per_flit"] > 20 * two["p_replay_per_flit"] > 0
    assert three["flits_replayed"] > 0


def test_every_check_runs_before_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    import sitssim.preflight as pf
    from sitssim.estimate import estimate

    seen: list[str] = []

    def spy(fn: Callable, name: str) -> Callable:
        def wrapped(*args: Any) -> Any:
            seen.append(name)
            return fn(*args)

        return wrapped

    names = [s.checker.__name__ for s in CHECKS]
    spied = [replace(s, checker=spy(s.checker, s.checker.__name__)) for s in CHECKS]
    monkeypatch.setattr(pf, "CHECKS", spied)
    monkeypatch.setattr(pf, "estimate", spy(estimate, "estimate"))
    preflight(scenario_from_data(shipped("fat_tree_8gpu.yaml")))
    assert seen == [*names, "estimate"]
    assert {"check_cdc", "check_schedule_workloads", "check_clock_references"} <= set(seen)

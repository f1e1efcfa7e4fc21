"""The shipped L1 scenarios: nominal, lossy, faulty devices, drift; their outputs."""

from __future__ import annotations

import copy
from pathlib import Path
from types import ModuleType

import pytest
from ruamel.yaml import YAML
from typer.testing import CliRunner
from vcd_reading import vcd_changes

from sitssim.cli import app
from sitssim.results.vcd import write_vcd
from sitssim.scenario import load_scenario
from sitssim.simulation import simulate

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _plain_yaml(path: Path) -> dict:
    return YAML(typ="safe").load(path.read_text())


def test_lossy_links_differs_from_the_nominal_fat_tree_only_in_its_channels() -> None:
    nominal = _plain_yaml(SCENARIOS / "fat_tree_8gpu.yaml")
    lossy = _plain_yaml(SCENARIOS / "violations" / "lossy_links.yaml")
    assert any("channel" in p for p in lossy["links"].values())
    stripped = copy.deepcopy(lossy)
    for data in (nominal, stripped):
        for key in ("name", "description"):
            data.pop(key)
        for profile in data["links"].values():
            profile.pop("channel", None)
    assert stripped == nominal


def _without(data: dict, *keys: str) -> dict:
    return {k: v for k, v in data.items() if k not in keys}


def test_the_32gt_witness_differs_from_the_direct_rc_fabric_only_in_its_rate() -> None:
    nominal = _plain_yaml(SCENARIOS / "direct_rc_4gpu.yaml")
    witness = _plain_yaml(SCENARIOS / "violations" / "symbol_rate_32gt.yaml")
    assert witness["links"]["default"].pop("rate") == "32GT/s"
    assert nominal["links"]["default"].pop("rate") == "64GT/s"
    assert _without(witness, "name", "description") == _without(nominal, "name", "description")


def test_the_32gt_witness_fails_the_symbol_rate_alone_on_what_receivers_counted() -> None:
    result = simulate(load_scenario(SCENARIOS / "violations" / "symbol_rate_32gt.yaml"))
    failed = {v.id: v for v in result.verdicts if v.verdict == "fail"}
    assert set(failed) == {"phy.symbol_rate"}
    verdict = failed["phy.symbol_rate"]
    timing = result.tables["symbol_timing"]
    assert verdict.basis == "measured" and verdict.measured == pytest.approx(16.0)
    assert set(timing["symbols"]) == {65_536} and set(timing["gate_ns"]) == {4096.0}
    assert verdict.evidence[0].total == len(timing) == 8


def test_the_256_symbol_witness_differs_from_the_direct_rc_fabric_only_in_its_fault() -> None:
    nominal = _plain_yaml(SCENARIOS / "direct_rc_4gpu.yaml")
    witness = _plain_yaml(SCENARIOS / "violations" / "training_set_256.yaml")
    assert witness.pop("faults") == [
        {"kind": "training_symbols", "link": "gpu1-rc0", "symbols": 256}
    ]
    assert _without(witness, "name", "description") == _without(nominal, "name", "description")


def test_the_256_symbol_witness_is_caught_by_the_framers_of_that_link_alone() -> None:
    result = simulate(load_scenario(SCENARIOS / "violations" / "training_set_256.yaml"))
    failed = {v.id: v for v in result.verdicts if v.verdict == "fail"}
    assert set(failed) == {"phy.training_sequence"}
    sets = result.tables["training_sets"]
    faulty = sets["link"] == "gpu1-rc0"
    assert set(sets.loc[faulty, "symbols_per_set"]) == {256}
    assert set(sets.loc[~faulty, "symbols_per_set"]) == {512}
    # The sequences themselves are good PRBS31: the length is what the framer caught.
    assert (sets["detected_order"] == 31).all() and (sets["errors"] == 0).all()
    assert sorted(failed["phy.training_sequence"].evidence[0].rows) == sorted(
        sets.loc[faulty, "check_id"]
    )


def test_the_nominal_fat_tree_passes_every_l1_clause(phy: ModuleType) -> None:
    verdicts = phy.phy_verdicts(load_scenario(SCENARIOS / "fat_tree_8gpu.yaml"))
    for clause_id, verdict in verdicts.items():
        expected = "n/a" if clause_id == "phy.retrain_trigger" else "pass"
        assert verdict.verdict == expected, (clause_id, verdict.detail)
    assert verdicts["phy.reset_to_l0"].measured < 150


def test_lossy_links_miss_200_us_with_names_and_times(phy: ModuleType) -> None:
    scenario = load_scenario(SCENARIOS / "violations" / "lossy_links.yaml")
    stage = phy.phy_run(scenario)
    verdict = phy.phy_verdicts(scenario, stage)["phy.reset_to_l0"]
    assert verdict.verdict == "fail"
    late = sorted((t for t in stage.traces if t.first_l0_ns > 200e3), key=lambda t: -t.first_l0_ns)
    assert late
    # The latest first, as many as the detail shows, then how many more.
    named = "; ".join(f"{t.link.name} at {t.first_l0_ns / 1e3:.1f} µs" for t in late[:6])
    more = f" (+{len(late) - 6} more)" if len(late) > 6 else ""
    assert verdict.detail.endswith(f"after 200 µs: {named}{more}")
    assert verdict.detail.startswith(f"{len(late)} of {len(stage.traces)} links")
    assert verdict.measured == pytest.approx(late[0].first_l0_ns / 1e3)
    assert verdict.evidence[0].total == len(late)


def test_faulty_phy_fails_exactly_the_three_device_clauses(phy: ModuleType) -> None:
    verdicts = phy.phy_verdicts(load_scenario(SCENARIOS / "violations" / "faulty_phy.yaml"))
    failed = {c for c, v in verdicts.items() if v.verdict == "fail"}
    assert failed == {"phy.eq_level3", "phy.retrain_trigger", "phy.training_sequence"}
    assert "gpu1-sw1.0" in verdicts["phy.eq_level3"].detail
    assert "gpu0-sw1.0" in verdicts["phy.retrain_trigger"].detail
    sequence = verdicts["phy.training_sequence"].detail
    assert "gpu2-sw1.0" in sequence and "gpu3-sw1.0" in sequence


def test_ber_drift_retrains_the_drifted_link_and_the_waves_show_it(
    phy: ModuleType, tmp_path: Path
) -> None:
    scenario = load_scenario(SCENARIOS / "violations" / "ber_drift.yaml")
    stage = phy.phy_run(scenario)
    verdicts = phy.phy_verdicts(scenario, stage)
    assert verdicts["phy.retrain_trigger"].verdict == "pass"
    states = stage.tables()["link_states"]
    retrains = states[states["cause"] == "ber_retrain"]
    assert list(retrains["link"]) == ["gpu0-sw1.0"]
    assert write_vcd(stage.tables(), tmp_path / "waves.vcd")
    changes = vcd_changes(tmp_path / "waves.vcd")
    ltssm = changes[("links.gpu0-sw1_0", "ltssm")]
    t_ps = round(float(retrains["t_enter_ns"].iloc[0]) * 1000)
    assert (t_ps, "Recovery.RcvrLock") in ltssm
    assert ltssm[-1][1] == "L0" and ltssm[-1][0] > t_ps
    phases = [v for t, v in changes[("links.gpu0-sw1_0", "eq_phase")] if t > t_ps]
    assert phases[:5] == ["0", "1", "10", "11", "x"]
    assert any(float(v) > 1e-6 for _, v in changes[("links.gpu0-sw1_0", "ber")])


@pytest.fixture(scope="module")
def drift_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("drift")
    scenario = folder / "drift.yaml"
    scenario.write_text(
        "version: 1\nname: star_drift\nduration: 5ms\n"
        "topology:\n  kind: graph\n  nodes:\n    - {id: s0, kind: switch}\n"
        "    - {id: gpu0, kind: gpu}\n    - {id: gpu1, kind: gpu}\n"
        "  edges:\n    - {a: gpu0, b: s0}\n    - {a: gpu1, b: s0}\n"
        "drift:\n  - {link: gpu0-s0, start: 1ms, snr_db: 20dB}\n"
    )
    result = CliRunner().invoke(app, ["run", str(scenario), "--out", str(folder / "out")])
    assert result.exit_code == 0, result.output
    return folder / "out"


def test_a_run_writes_waves_and_the_phy_figures(drift_run: Path) -> None:
    for name in ("waves.vcd", "figures/training_gantt.png", "figures/eye_diagrams.png"):
        assert (drift_run / name).stat().st_size > 0, name
    for table in ("link_states", "eq", "ber_windows", "cdr", "training_sets", "symbol_timing"):
        assert (drift_run / f"{table}.parquet").exists(), table
    ltssm = vcd_changes(drift_run / "waves.vcd")[("links.gpu0-s0", "ltssm")]
    assert [v for _, v in ltssm].count("L0") == 2

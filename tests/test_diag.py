"""``sitssim diag reset``: per-link reset-to-L0 table, exit 1 when a link is late."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from sitssim.cli import app

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
runner = CliRunner()
ROW = re.compile(r"│ (\S+)\s+│\s+([\d.]+|never) │\s+(\d+) │\s+(\d+) │ (pass|FAIL)\s+│")


def rows(output: str) -> dict[str, tuple[float, int, int, str]]:
    return {
        m[1]: (float("inf") if m[2] == "never" else float(m[2]), int(m[3]), int(m[4]), m[5])
        for m in ROW.finditer(output)
    }


def test_nominal_fabric_resets_every_link_within_200_us() -> None:
    result = runner.invoke(app, ["diag", "reset", str(SCENARIOS / "fat_tree_8gpu.yaml")])
    assert result.exit_code == 0, result.output
    table = rows(result.output)
    assert len(table) == 17 and "gpu0-sw1.0" in table and "rc0-sw2.0" in table
    for l0_us, iterations, presets, verdict in table.values():
        assert 0 < l0_us <= 200 and iterations > 0 and presets > 0 and verdict == "pass"


def test_a_threshold_below_the_measured_times_fails_the_late_links() -> None:
    first = rows(
        runner.invoke(app, ["diag", "reset", str(SCENARIOS / "fat_tree_8gpu.yaml")]).output
    )
    times = [t for t, *_ in first.values()]
    cut = (min(times) + max(times)) / 2
    result = runner.invoke(
        app,
        [
            "diag",
            "reset",
            str(SCENARIOS / "fat_tree_8gpu.yaml"),
            "--latency-threshold",
            f"{cut:.3f}us",
        ],
    )
    assert result.exit_code == 1
    table = rows(result.output)
    # The table rounds to 10 ns; links that close to the cut may go either way.
    for l0_us, *_, verdict in table.values():
        if abs(l0_us - cut) > 0.01:
            assert verdict == ("pass" if l0_us < cut else "FAIL")
    assert any(v == "FAIL" for *_, v in table.values())


def test_lossy_links_are_named_with_their_late_l0_times() -> None:
    result = runner.invoke(
        app, ["diag", "reset", str(SCENARIOS / "violations" / "lossy_links.yaml")]
    )
    assert result.exit_code == 1
    table = rows(result.output)
    late = {link for link, (t, *_) in table.items() if t > 200}
    assert late and late == {link for link, (*_, v) in table.items() if v == "FAIL"}


def test_links_option_resets_only_the_chosen_links_in_either_order() -> None:
    result = runner.invoke(
        app,
        [
            "diag",
            "reset",
            str(SCENARIOS / "fat_tree_8gpu.yaml"),
            "--links",
            "sw1.0-gpu0, rc0-sw2.0",
        ],
    )
    assert result.exit_code == 0, result.output
    assert sorted(rows(result.output)) == ["gpu0-sw1.0", "rc0-sw2.0"]


def test_bad_options_exit_2_naming_the_option() -> None:
    scenario = str(SCENARIOS / "fat_tree_8gpu.yaml")
    for option, value in (("--links", "gpu9-sw1.0"), ("--latency-threshold", "200")):
        result = runner.invoke(app, ["diag", "reset", scenario, option, value])
        assert result.exit_code == 2
        assert f"{option}:" in result.stderr and "Traceback" not in result.output

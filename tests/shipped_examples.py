"""What the tests of the shipped scenarios share: where they are, their golden reports, and
the every-example check (``tests/test_shipped_scenarios.py``, ``tests/test_shipped_sweeps.py``).

The golden reports (``tests/golden/``) guard behaviour: a change that moves any figure of
any shipped scenario fails its test. Regenerate them with ``pytest tests/test_shipped_*.py
--update-golden`` only for a change meant to move figures, and say which and why in the
commit. The package version is the one field not compared.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ruamel.yaml import YAML
from typer.testing import CliRunner

from sitssim.cli import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "scenarios").glob("*.yaml"))
VIOLATIONS = sorted((ROOT / "scenarios" / "violations").glob("*.yaml"))
# Reference benches (a switch model against a published result) are not spec examples:
# each states in its header the verdicts it expects, some of them failures.
REFERENCES = sorted((ROOT / "scenarios" / "reference").glob("*.yaml"))
GOLDEN = Path(__file__).resolve().parent / "golden"


def sweeps_collectives(path: Path) -> bool:
    """Whether the scenario sweeps collectives over sizes (the calibration boards: the
    longest runs of the suite, given a test file of their own so that they run beside the
    other examples rather than after them)."""
    data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    return any(wl.get("kind") == "collective" and "sweep" in wl for wl in data.get("workloads", []))


SWEEPS = [p for p in EXAMPLES if sweeps_collectives(p)]


def golden_path(scenario: Path) -> Path:
    return GOLDEN / scenario.relative_to(ROOT / "scenarios").with_suffix(".json")


def without_version(text: str) -> str:
    """The report with the package version blanked: a release alone moves no figure."""
    return re.sub(r'^  "sitssim": "[^"]*",$', '  "sitssim": "",', text, count=1, flags=re.M)


def check_golden(scenario: Path, report: str, update: bool) -> None:
    path = golden_path(scenario)
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(without_version(report), encoding="utf-8")
    assert path.exists(), f"no golden report for {scenario.name}: run with --update-golden"
    expected = path.read_text(encoding="utf-8")
    # Compared as text (byte identity is the contract); the assert names the first
    # difference through pytest's diff of the parsed reports.
    if without_version(report) != expected:
        assert json.loads(without_version(report)) == json.loads(expected)
        raise AssertionError(f"{scenario.name}: same values, different bytes (formatting)")


def check_example(path: Path, out: Path, update: bool) -> None:
    """Run a shipped example through the CLI as the README says, hold its report to its
    golden copy, and check that it passes every clause it models."""
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "report.json").read_text(encoding="utf-8")
    check_golden(path, text, update)
    report = json.loads(text)
    verdicts = {c["id"]: c["verdict"] for c in report["clauses"]}
    assert "fail" not in verdicts.values(), verdicts
    assert verdicts["fabric.hop_limit"] == verdicts["fabric.topology_limits"] == "pass"
    # A clause the run cannot judge says why.
    assert all(c["detail"] for c in report["clauses"] if c["verdict"] == "n/a")

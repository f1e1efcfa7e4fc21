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


SWEEP_TOP = "128MiB"
"""Where the suite stops the shipped sweeps (they go to 2 GiB): the sizes above take three
quarters of a sweep's time, and NCCL chooses no algorithm or protocol there that it does
not choose up to here (H100: LL rings and NVLS; A100: LL, LL128 and Simple rings).
``benchmarks/bench_calibration_sweep.py`` times the whole sweeps; the calibration notebook
compares them with measurements."""


def golden_path(scenario: Path) -> Path:
    """A scenario's golden report; a sweep's is that of its run to ``SWEEP_TOP``."""
    path = GOLDEN / scenario.relative_to(ROOT / "scenarios").with_suffix(".json")
    if scenario in SWEEPS:
        return path.with_name(f"{scenario.stem}.to_{SWEEP_TOP}.json")
    return path


def reduced_sweep(scenario: Path, folder: Path) -> Path:
    """A copy of a shipped sweep in ``folder`` that stops at ``SWEEP_TOP``: the same file
    but for that one value, so that its golden report guards the same scenario."""
    text = scenario.read_text(encoding="utf-8")
    full = re.findall(r"sweep: \{min: (\S+), max: (\S+), factor: 2\}", text)
    assert len(full) == 1, f"{scenario.name}: expected one sweep line, found {full}"
    low, top = full[0]
    reduced = text.replace(
        f"sweep: {{min: {low}, max: {top}, factor: 2}}",
        f"sweep: {{min: {low}, max: {SWEEP_TOP}, factor: 2}}",
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / scenario.name
    path.write_text(reduced, encoding="utf-8")
    return path


def without_version(text: str) -> str:
    """The report with the package version blanked: a release alone moves no figure."""
    return re.sub(r'^  "sitssim": "[^"]*",$', '  "sitssim": "",', text, count=1, flags=re.M)


def check_golden(scenario: Path, report: str, update: bool, golden: Path | None = None) -> None:
    path = golden or golden_path(scenario)
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


def check_example(path: Path, out: Path, update: bool, golden: Path | None = None) -> None:
    """Run a shipped example through the CLI as the README says, hold its report to its
    golden copy (``golden``, else the one named after ``path``), and check that it passes
    every clause it models."""
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "report.json").read_text(encoding="utf-8")
    check_golden(path, text, update, golden)
    report = json.loads(text)
    verdicts = {c["id"]: c["verdict"] for c in report["clauses"]}
    assert "fail" not in verdicts.values(), verdicts
    assert verdicts["fabric.hop_limit"] == verdicts["fabric.topology_limits"] == "pass"
    # A clause the run cannot judge says why.
    assert all(c["detail"] for c in report["clauses"] if c["verdict"] == "n/a")

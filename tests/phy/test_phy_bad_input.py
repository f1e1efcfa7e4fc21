"""Bad PHY input: exit 2 with one message naming file, line and field; nothing written.

Each snippet marks the line the message must name with a trailing ``# <-``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sitssim.cli import app

MARK = "# <-"
BASE = """\
version: 1
name: bad_phy
duration: 20us
topology:
  kind: graph
  nodes:
    - {id: s0, kind: switch}
    - {id: gpu0, kind: gpu}
    - {id: gpu1, kind: gpu}
  edges:
    - {a: gpu0, b: s0}
    - {a: gpu1, b: s0}
"""

CASES = [
    ("phy:\n  initial_preset: Q11  # <-\n", "phy.initial_preset", "unknown Tx preset 'Q11'"),
    ("phy:\n  train_ctrl: 4  # <-\n", "phy.train_ctrl", "expected at most 3, got 4"),
    (
        "links:\n  default:\n    channel:\n      loss_db: -1dB  # <-\n",
        "links.default.channel.loss_db",
        "0 or more",
    ),
    (
        "links:\n  default:\n    channel:\n      snr_db: -3dB  # <-\n",
        "links.default.channel.snr_db",
        "positive",
    ),
    # Python's float() reads Arabic-Indic digits ('٥' is 5); a scenario must write 5.
    (
        "links:\n  default:\n    channel:\n      loss_db: ٥dB  # <-\n",
        "links.default.channel.loss_db",
        "expected a number of dB like '6dB', got '٥dB'",
    ),
    (
        "links:\n  default:\n    channel:\n      rj_ui: 0.0١UI  # <-\n",
        "links.default.channel.rj_ui",
        "expected a number of UI",
    ),
    (
        "links:\n  default:\n    channel:\n      loss_db: " + "9" * 3000 + "dx  # <-\n",
        "links.default.channel.loss_db",
        "…' (3002 chars)",
    ),
    (
        "phy:\n  initial_preset: " + "Q" * 3000 + "  # <-\n",
        "phy.initial_preset",
        "…' (3000 chars)",
    ),
    (
        "links:\n  default:\n    channel:\n      loss_db: 6dB\n      loss_spread_db: 7dB  # <-\n",
        "links.default.channel.loss_spread_db",
        "negative loss",
    ),
    ("phy:\n  training_cycle_bits: -1e9  # <-\n", "phy.training_cycle_bits", "at least 1"),
    ("phy:\n  retrain_threshold: 1.5  # <-\n", "phy.retrain_threshold", "at most 1"),
    (
        "faults:\n  - kind: retrain_threshold\n    link: gpu0-s0\n    ber: -0.1  # <-\n",
        "faults[0].ber",
        "0 or more",
    ),
    (
        "faults:\n  - kind: training_symbols\n    link: gpu0-s0\n    symbols: 250  # <-\n",
        "faults[0].symbols",
        "multiple of 16",
    ),
    (
        "faults:\n  - kind: skip_eq_phase3\n    link: gpu0-gpu1  # <-\n",
        "faults[0].link",
        "unknown link 'gpu0-gpu1'",
    ),
    # A PHY fault is named by its index among all faults, not among the PHY's own.
    (
        "faults:\n  - {kind: synchronizer_flops, device: gpu0, peer: s0, flops: 3}\n"
        "  - kind: skip_eq_phase3\n    link: gpu0-gpu1  # <-\n",
        "faults[1].link",
        "unknown link 'gpu0-gpu1'",
    ),
    (
        "drift:\n  - link: gpu7-s0  # <-\n    start: 1us\n    snr_db: 20\n",
        "drift[0].link",
        "unknown link",
    ),
    (
        "drift:\n  - link: gpu0-s0\n    start: 30us  # <-\n    snr_db: 20\n",
        "drift[0].start",
        "not before the run ends",
    ),
    (
        "drift:\n  - link: gpu0-s0\n    kind: ramp\n    start: 1us\n    end: 25us  # <-\n"
        "    loss_db: 20\n",
        "drift[0].end",
        "not before the run ends",
    ),
    (
        "drift:\n  - link: gpu0-s0\n    start: 1us\n    end: 9us\n    snr_db: 20\n"
        "  - link: s0-gpu0\n    start: 5us  # <-\n    snr_db: 25\n",
        "drift[1].start",
        "overlaps drift entry 0",
    ),
]


@pytest.mark.parametrize(("snippet", "field", "says"), CASES, ids=[c[1] for c in CASES])
def test_bad_phy_input_is_located(tmp_path: Path, snippet: str, field: str, says: str) -> None:
    text = BASE + snippet
    line = next(n for n, t in enumerate(text.splitlines(), 1) if t.rstrip().endswith(MARK))
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (message,) = result.stderr.strip().splitlines()
    assert message.startswith(f"error: {path}:{line}: {field}: "), message
    assert says in message
    assert not out.exists()


def test_validate_checks_the_phy_references_too(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BASE + "faults:\n  - kind: skip_eq_phase3\n    link: gpu5-s0\n")
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2 and "faults[0].link" in result.stderr

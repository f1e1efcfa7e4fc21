"""The bad-input contract, checked through the CLI: exit 2 and one ``error:`` line naming
the file, the line marked in the scenario text with a trailing ``# <-``, and the field;
no traceback, and nothing written."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from sitssim.cli import app

MARK = "# <-"


def marked_line(text: str) -> int:
    """The one line of ``text`` that ends with :data:`MARK` (1-based)."""
    (line,) = [n for n, t in enumerate(text.splitlines(), 1) if t.rstrip().endswith(MARK)]
    return line


def assert_located(tmp_path: Path, text: str, field: str, expect: str, command: str = "run") -> str:
    """Run (or ``validate``) ``text`` from a file in ``tmp_path``; assert it is refused on
    one located line that says ``expect``, and return that line."""
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    args = ["run", str(path), "--out", str(out)] if command == "run" else ["validate", str(path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert "Traceback" not in result.output and len(message.splitlines()) == 1, result.output
    assert message.startswith(f"error: {path}:{marked_line(text)}: {field}: "), message
    assert expect in message, message
    assert not out.exists()
    return message

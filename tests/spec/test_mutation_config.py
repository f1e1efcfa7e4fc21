"""Mutation testing of the judges is set up as docs/conformance.md says, and stays local.

mutmut runs on a developer's machine (docs/conformance.md, "Mutation testing"), never in
CI. These checks hold its configuration to the page without running it: it mutates
``sitssim/spec/`` only, runs every judge-table test file and nothing that simulates, its
text patterns exclude no line that carries a verdict's figures, it is no dependency of the
project, and the page says how to run it, what it leaves out and what it scored.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MUTMUT = PYPROJECT["tool"]["mutmut"]
PATTERNS = [re.compile(p) for p in MUTMUT["do_not_mutate_patterns"]]
SPEC = sorted((ROOT / "sitssim" / "spec").glob("*.py"))
# What a line passes that is more than text: a verdict's figures, basis, rows or outcome.
FIGURES = re.compile(r'\b(measured|basis|evidence|limit|value|op|parts)=|"(pass|fail)"')


def _section() -> str:
    doc = (ROOT / "docs" / "conformance.md").read_text()
    return doc[doc.index("## Mutation testing") :]


def test_only_the_spec_package_is_mutated() -> None:
    assert MUTMUT["source_paths"] == ["sitssim/"]
    assert MUTMUT["only_mutate"] == ["sitssim/spec/*"]


def test_every_judge_table_test_runs_and_nothing_that_simulates() -> None:
    selected = MUTMUT["pytest_add_cli_args_test_selection"]
    assert all((ROOT / path).is_file() for path in selected), selected
    judge_tables = {
        p.relative_to(ROOT).as_posix() for p in ROOT.glob("tests/spec/test_judges_on_tables_*.py")
    }
    assert judge_tables and judge_tables <= set(selected)
    for path in selected:
        text = (ROOT / path).read_text()
        assert "sitssim.simulation" not in text and "sitssim.cli" not in text, path


def test_no_line_left_out_as_text_carries_a_verdict_s_figures() -> None:
    """A line a pattern matches has no mutant at all: it must be text only."""
    left_out = 0
    for path in SPEC:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if any(p.search(line) for p in PATTERNS):
                left_out += 1
                assert not FIGURES.search(line), f"{path.name}:{number}: {line.strip()}"
    assert left_out > 0


def test_every_text_pattern_leaves_something_out() -> None:
    lines = [line for path in SPEC for line in path.read_text().splitlines()]
    for pattern in PATTERNS:
        assert any(pattern.search(line) for line in lines), pattern.pattern


def test_mutmut_is_no_dependency_and_never_runs_in_ci() -> None:
    project = PYPROJECT["project"]
    declared = [*project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        declared += extra
    assert not [d for d in declared if d.lower().startswith(("mutmut", "cosmic"))]
    for path in ("constraints.txt", ".ci/run"):
        assert "mutmut" not in (ROOT / path).read_text()
    assert "/mutants/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_page_says_how_to_run_it_what_it_leaves_out_and_what_it_scored() -> None:
    section = _section()
    assert "pip install mutmut==3.8.1" in section and "mutmut run" in section
    for pattern in MUTMUT["do_not_mutate_patterns"]:
        assert f"`{pattern}`" in section, pattern
    score = re.search(r"mutation score (\d+(?:\.\d+)?) %", section)
    assert score and float(score.group(1)) >= 90

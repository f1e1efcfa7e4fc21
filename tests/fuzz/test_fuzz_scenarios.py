"""Fuzzed scenarios: every shipped scenario, mutated, must load or be refused cleanly.

Each example is one shipped scenario after a few mutations (``mutations.py``),
checked in process by the loader and by ``validate`` through typer's ``CliRunner``
(``oracle.py``). About one run in twenty of a fast base has its duration set to
2 us, and when it is valid it also goes through ``run``. A handful go through a
real ``python -m sitssim`` process.

Determinism: under the project's ``ci`` profile Hypothesis is derandomised, so CI
checks the same documents every run and a red CI reproduces on any machine. New
ground is covered by running this module outside CI under the ``dev`` profile with
``--hypothesis-seed`` and ``SITSSIM_FUZZ_EXAMPLES``; every failure found that way
is minimised into ``corpus/`` (``test_fuzz_corpus.py``).

The last test checks the tallies: at least ``FUZZ_EXAMPLES`` documents, at least a
quarter of them valid (a fuzz that only hits the schema's first refusal never
reaches the builders), and runs that really happened.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from fuzz.mutations import SCENARIOS, Case, fuzzed_documents
from fuzz.oracle import PropertyFailure, check_document, check_run, python_m_validate, warm_up
from hypothesis import HealthCheck, given, settings

FUZZ_EXAMPLES = int(os.environ.get("SITSSIM_FUZZ_EXAMPLES", "1000"))
SUBPROCESS_EXAMPLES = 5
MIN_VALID_SHARE = 0.25

TALLY: Counter[str] = Counter()

FUZZ_SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for the fuzzed file, with the shipped traces beside it, as in scenarios/."""
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "traces").symlink_to(SCENARIOS / "traces", target_is_directory=True)
    warm_up(folder)
    return folder


def _fail(exc: PropertyFailure, case: Case) -> AssertionError:
    return AssertionError(f"{exc}\n    document: {case!r}")


@FUZZ_SETTINGS
@given(case=fuzzed_documents())
def test_fuzzed_scenario_loads_or_is_refused_in_one_located_line(workdir: Path, case: Case) -> None:
    path = workdir / "fuzzed.yaml"
    try:
        outcome = check_document(path, case.data)
    except PropertyFailure as exc:
        raise _fail(exc, case) from None
    TALLY["examples"] += 1
    TALLY["valid"] += outcome.valid
    if not (case.run and outcome.valid):
        return
    out = Path(tempfile.mkdtemp(dir=workdir))
    try:
        TALLY[f"run exit {check_run(path, out / 'results', outcome)}"] += 1
    except PropertyFailure as exc:
        raise _fail(exc, case) from None
    finally:
        shutil.rmtree(out)
    TALLY["runs"] += 1


@settings(FUZZ_SETTINGS, max_examples=SUBPROCESS_EXAMPLES)
@given(case=fuzzed_documents())
def test_fuzzed_scenario_through_python_m_sitssim(workdir: Path, case: Case) -> None:
    try:
        python_m_validate(workdir / "fuzzed_subprocess.yaml", case.data)
    except PropertyFailure as exc:
        raise _fail(exc, case) from None
    TALLY["subprocess"] += 1


def test_fuzz_tally_enough_examples_valid_share_and_runs() -> None:
    if not TALLY["examples"]:
        pytest.skip("the fuzz test did not run in this session")
    examples, valid = TALLY["examples"], TALLY["valid"]
    assert examples >= FUZZ_EXAMPLES, TALLY
    assert valid / examples >= MIN_VALID_SHARE, TALLY
    assert TALLY["runs"] >= 1, TALLY
    assert TALLY["subprocess"] <= 20, TALLY

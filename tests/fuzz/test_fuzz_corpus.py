"""Regression corpus: every document that ever broke the fuzz properties, kept for good.

Each ``corpus/*.yaml`` starts with a comment saying what it caught. It is held to
the fuzz test's two properties (``oracle.py``): the loader returns a ``Scenario``
or raises ``InputError``; ``validate`` exits 0 or 2 with one located line. A file
whose second line is ``# check: run`` is a scenario the schema accepts but whose
run once hung or crashed: ``run`` must then agree with ``validate``, both passing
(exit 0 or 1) or both refusing it with the same line.

These documents are known to be hostile, so each one is checked in a forked child
with a deadline: a stall inside one C call (a huge integer power) or a blow-up of
memory fails that case alone instead of the whole session.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz.oracle import PropertyFailure, check_file, check_run, isolated, warm_up

CORPUS = Path(__file__).parent / "corpus"
CASES = sorted(CORPUS.glob("*.yaml"))
RUN_MARK = b"# check: run"
CHECK_DEADLINE_S = 30.0
RUN_DEADLINE_S = 60.0


@pytest.fixture(scope="module", autouse=True)
def _warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Forked children inherit the imports; without them each child pays for its own.
    warm_up(tmp_path_factory.mktemp("warm"))


def _header(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n", 2)[:2]


def test_corpus_holds_the_issue_cases() -> None:
    names = {p.stem for p in CASES}
    expected = {
        "deep_lists_300",
        "time_1e999999us",
        "size_1e30B",
        "seed_5000_digits",
        "probe_interval_1e-30ns",
        "load_1e300",
        "inference_count_1e400",
        "spines_2_pow_31",
        "omap_tag",
        "fat_tree_levels_1e9",
        "nvswitch_planes_1e5",
        "direct_rc_1e6_gpus",
        "alias_bomb_9_levels",
        "fat_tree_2_pow_63_gpus",
        "synchronizer_flops_without_cdc",
        "flit_ber_3_lanes_hgx",
        "min_messages_1e9",
        "arabic_indic_digits",
    }
    assert expected <= names, sorted(expected - names)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_corpus_case(path: Path, tmp_path: Path) -> None:
    first = _header(path)[0]
    assert first.startswith(b"# ") and len(first) > 10, "first line must say what the case caught"
    failure = None
    try:
        outcome = isolated(lambda: check_file(path), CHECK_DEADLINE_S)
        if RUN_MARK in _header(path):
            isolated(lambda: check_run(path, tmp_path / "out", outcome), RUN_DEADLINE_S)
    except PropertyFailure as exc:
        failure = f"{path.name}: {exc}"
    if failure is not None:
        pytest.fail(failure, pytrace=False)

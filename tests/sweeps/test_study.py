"""Reading a study file: value ranges, zip groups, defaults, and every problem located at
the study file's line and field (``str(InputError)`` is ``file:line: field: message``)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from located_errors import marked_line
from sweeps.sweep_helpers import FAT_TREE, write_study

from sitssim.errors import InputError
from sitssim.spec.catalogue import CLAUSES
from sitssim.sweeps.points import expand
from sitssim.sweeps.study import HEADLINE_METRICS, load_study


def study_text(body: str, base: Path | str = FAT_TREE) -> str:
    return f"base: {base}\n{body}"


def values_of(tmp_path: Path, spec: str) -> tuple[list, bool]:
    """The values (and log flag) of one parameter ``x`` given as ``spec``."""
    path = write_study(tmp_path / "s.yaml", study_text(f"parameters:\n  x: {spec}\n"))
    (axis,) = load_study(path).axes
    assert axis.paths == ("x",)
    return [row[0] for row in axis.values], axis.log[0]


def test_a_step_range_includes_to_when_the_steps_reach_it(tmp_path: Path) -> None:
    values, log = values_of(tmp_path, "{from: 0.1, to: 0.9, step: 0.2}")
    # Exactly the decimals the user wrote, not 0.30000000000000004 or a missing 0.9.
    assert values == [0.1, 0.3, 0.5, 0.7, 0.9]
    assert not log


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # (to - from) / step is 2.9999999999999996 in floats: the range still reaches `to`.
        ("{from: 0.1, to: 0.7, step: 0.2}", [0.1, 0.3, 0.5, 0.7]),
        ("{from: 0, to: 0.3, step: 0.1}", [0.0, 0.1, 0.2, 0.3]),
    ],
)
def test_a_step_landing_on_to_within_rounding_reaches_it(
    tmp_path: Path, spec: str, expected: list[float]
) -> None:
    assert values_of(tmp_path, spec)[0] == expected


def test_a_step_range_stops_short_of_to_when_the_steps_miss_it(tmp_path: Path) -> None:
    values, _ = values_of(tmp_path, "{from: 0.1, to: 0.8, step: 0.2}")
    assert values == [0.1, 0.3, 0.5, 0.7]


def test_a_range_of_whole_numbers_stays_whole_numbers(tmp_path: Path) -> None:
    values, _ = values_of(tmp_path, "{from: 1, to: 10, step: 3}")
    assert values == [1, 4, 7, 10]
    assert all(type(v) is int for v in values)


def test_a_negative_step_counts_down(tmp_path: Path) -> None:
    values, _ = values_of(tmp_path, "{from: 10, to: 1, step: -3}")
    assert values == [10, 7, 4, 1]


def test_a_log_range_of_five_points_over_four_decades_is_the_decades(tmp_path: Path) -> None:
    values, log = values_of(tmp_path, "{from: 1e-8, to: 1e-4, points: 5, scale: log}")
    assert values == [1e-8, 1e-7, 1e-6, 1e-5, 1e-4]
    assert log


def test_a_linear_points_range_spaces_evenly_and_includes_both_ends(tmp_path: Path) -> None:
    values, log = values_of(tmp_path, "{from: 0, to: 1, points: 5}")
    assert values == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert not log
    explicit, _ = values_of(tmp_path, "{from: 0.2, to: 0.8, points: 4, scale: linear}")
    assert explicit == [0.2, 0.4, 0.6, 0.8]


def test_a_zip_group_is_one_axis_read_together(tmp_path: Path) -> None:
    path = write_study(
        tmp_path / "s.yaml",
        study_text(
            "parameters:\n"
            "  duration: [2us]\n"
            "zip:\n"
            "  - workloads.0.message_bytes: [256B, 4KiB]\n"
            "    workloads.0.load: [0.1, 0.3]\n"
        ),
    )
    study = load_study(path)
    assert [axis.paths for axis in study.axes] == [
        ("duration",),
        ("workloads.0.message_bytes", "workloads.0.load"),
    ]
    assert study.axes[1].values == (("256B", 0.1), ("4KiB", 0.3))
    assert study.axes[1].fields == ("zip.0.workloads.0.message_bytes", "zip.0.workloads.0.load")
    assert study.axes[1].lines == (5, 6)
    assert study.parameters == ("duration", "workloads.0.message_bytes", "workloads.0.load")


def test_defaults_collect_the_headline_metrics_every_clause_and_one_replication(
    tmp_path: Path,
) -> None:
    study = load_study(write_study(tmp_path / "plain.yaml", study_text("")))
    assert study.metrics == HEADLINE_METRICS
    assert study.clauses == tuple(CLAUSES)
    assert study.replications == 1
    assert study.axes == ()
    assert study.name == "plain"


BAD = [
    pytest.param(
        "zip:\n  - duration: [2us, 3us, 4us]\n    workloads.0.load: [0.1, 0.2]  # <-\n",
        "zip.0.workloads.0.load",
        "2 values where duration has 3",
        id="zip-unequal",
    ),
    pytest.param(
        "parameters:\n  duration: [2us]\nzip:\n  - duration: [3us]  # <-\n",
        "zip.0",
        "duration is varied twice (also at line 3)",
        id="varied-twice",
    ),
    pytest.param(
        "parameters:\n  seed: [1, 2]  # <-\n",
        "parameters.seed",
        "the seed is set by replications",
        id="seed-as-parameter",
    ),
    pytest.param(
        "parametres:  # <-\n  duration: [2us]\n",
        "parametres",
        "unknown key; did you mean 'parameters'?",
        id="unknown-key",
    ),
    pytest.param(
        "clauses: [fabric.tso_window, fabric.hop_limt]  # <-\n",
        "clauses.1",
        "unknown clause 'fabric.hop_limt'; did you mean 'fabric.hop_limit'?",
        id="unknown-clause",
    ),
    pytest.param(
        "replications: 0  # <-\n",
        "replications",
        "expected 1 to 10000 replications, got 0",
        id="no-replications",
    ),
    pytest.param(
        "parameters:\n  workloads.0.load: {from: 0.1, to: 0.9, stp: 0.2}  # <-\n",
        "parameters.workloads.0.load.stp",
        "did you mean 'step'?",
        id="range-typo",
    ),
    pytest.param(
        "parameters:\n  workloads.0.load: {from: 0.9, to: 0.1, step: 0.2}  # <-\n",
        "parameters.workloads.0.load.step",
        "a step of 0.2 never goes from 0.9 to 0.1",
        id="step-away-from-to",
    ),
    pytest.param(
        "parameters:\n  x: {from: 0, to: 1, points: 3, scale: log}  # <-\n",
        "parameters.x",
        "a log range runs between positive numbers",
        id="log-through-zero",
    ),
    pytest.param(
        "parameters:\n  duration: []  # <-\n",
        "parameters.duration",
        "expected at least one value",
        id="no-values",
    ),
]


@pytest.mark.parametrize(("body", "field", "expect"), BAD)
def test_a_bad_study_is_one_error_at_its_line_and_field(
    tmp_path: Path, body: str, field: str, expect: str
) -> None:
    text = study_text(body)
    path = write_study(tmp_path / "bad.yaml", text)
    with pytest.raises(InputError) as err:
        load_study(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{marked_line(text)}: {field}: "), message
    assert expect in message, message
    assert "\n" not in message


def test_a_missing_base_is_refused_at_the_study(tmp_path: Path) -> None:
    path = write_study(tmp_path / "nobase.yaml", "parameters:\n  duration: [2us]\n")
    with pytest.raises(InputError) as err:
        load_study(path)
    assert err.value.file == str(path)
    assert err.value.field == "base"
    assert "required" in err.value.message


def test_a_relative_base_is_read_from_the_study_files_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    text = FAT_TREE.read_text(encoding="utf-8").replace("seed: 1\n", "seed: 40\n")
    (scenarios / "mine.yaml").write_text(text, encoding="utf-8")
    path = write_study(
        tmp_path / "studies" / "s.yaml",
        "base: ../scenarios/mine.yaml\nparameters:\n  duration: [2us]\n",
    )
    # Run from elsewhere, next to a decoy that ../scenarios/mine.yaml names from there:
    # the base is read from the study file's folder, not from the working folder.
    elsewhere = tmp_path / "a" / "b"
    elsewhere.mkdir(parents=True)
    (tmp_path / "a" / "scenarios").mkdir()
    decoy = text.replace("seed: 40\n", "seed: 41\n")
    (tmp_path / "a" / "scenarios" / "mine.yaml").write_text(decoy, encoding="utf-8")
    monkeypatch.chdir(elsewhere)
    study = load_study(os.path.relpath(path, elsewhere))
    assert study.base.resolve() == (scenarios / "mine.yaml").resolve()
    (point,) = expand(study)
    assert point.seed == 40  # the seed of the base beside the study, not the decoy's 41


def test_a_restricted_study_keeps_points_of_the_full_one_with_their_keys(tmp_path: Path) -> None:
    path = write_study(
        tmp_path / "s.yaml",
        study_text(
            "parameters:\n"
            "  workloads.0.load: [0.2, 0.4, 0.6]\n"
            "zip:\n"
            "  - duration: [2us, 3us]\n"
            "    workloads.0.message_bytes: [256B, 4KiB]\n"
            "replications: 3\n"
        ),
    )
    full = load_study(path)
    quick = full.restricted(
        replications=1, keep={"workloads.0.load": [0.6, 0.2], "duration": ["3us"]}
    )
    # The kept values stay in the study's order; a zip group keeps whole rows.
    assert [row for axis in quick.axes for row in axis.values] == [
        (0.2,),
        (0.6,),
        ("3us", "4KiB"),
    ]
    quick_points = expand(quick)
    assert [p.seed for p in quick_points] == [1, 1]
    by_values = {(tuple(p.values.items()), p.seed): p.key for p in expand(full)}
    assert all(by_values[(tuple(p.values.items()), p.seed)] == p.key for p in quick_points)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"keep": {"workloads.0.lod": [0.2]}}, "no parameter 'workloads.0.lod'"),
        ({"keep": {"workloads.0.load": [0.9]}}, "no value of workloads.0.load is kept"),
        ({"replications": 4}, "expected 1 to 3 replications"),
    ],
)
def test_restricting_to_what_the_study_does_not_have_is_refused(
    tmp_path: Path, kwargs: dict, message: str
) -> None:
    path = write_study(
        tmp_path / "s.yaml",
        study_text("parameters:\n  workloads.0.load: [0.2, 0.4]\nreplications: 3\n"),
    )
    with pytest.raises(ValueError, match=message):
        load_study(path).restricted(**kwargs)


SHIPPED_STUDIES = sorted((Path(__file__).resolve().parents[2] / "studies").glob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED_STUDIES, ids=lambda p: p.stem)
def test_every_shipped_study_expands_into_points_each_preflighted(path: Path) -> None:
    study = load_study(path)
    points = expand(study)
    assert study.name == path.stem
    assert len(points) == study.replications * math.prod(len(a.values) for a in study.axes)
    assert len({p.key for p in points}) == len(points)

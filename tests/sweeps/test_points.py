"""A study's points: the grid's order, the seeds, the keys, and a parameter's problem
located at the study file's line (not the base scenario's)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from located_errors import marked_line
from sweeps.sweep_helpers import FAT_TREE, write_study

from sitssim.errors import InputError
from sitssim.scenario import load_scenario
from sitssim.sweeps.points import expand
from sitssim.sweeps.study import load_study

BASE_SEED = load_scenario(FAT_TREE).seed
WORKLOADS = len(load_scenario(FAT_TREE).workloads)

LOADS = [0.2, 0.4]
SIZES = ["1KiB", "2KiB", "4KiB"]


def study(tmp_path: Path, body: str, name: str = "s.yaml") -> Path:
    return write_study(tmp_path / name, f"base: {FAT_TREE}\n{body}")


def grid(tmp_path: Path) -> Path:
    return study(
        tmp_path,
        "parameters:\n"
        "  duration: [2us]\n"
        f"  workloads.0.load: [{', '.join(map(str, LOADS))}]\n"
        f"  workloads.0.message_bytes: [{', '.join(SIZES)}]\n"
        "replications: 2\n",
    )


def test_points_are_the_grid_first_axis_slowest_each_replicated_on_the_same_seeds(
    tmp_path: Path,
) -> None:
    points = expand(load_study(grid(tmp_path)))
    combinations = list(itertools.product(LOADS, SIZES))
    assert len(points) == len(combinations) * 2
    assert [(p.index, p.replication) for p in points] == [
        (i, r) for i in range(len(combinations)) for r in range(2)
    ]
    for point in points:
        load, size = combinations[point.index]
        assert point.values == {
            "duration": "2us",
            "workloads.0.load": load,
            "workloads.0.message_bytes": size,
        }
        # The values are applied to the scenario that runs, and the seed is the base's + r.
        assert point.seed == BASE_SEED + point.replication
        assert point.scenario.seed == point.seed
        assert point.scenario.workloads[0].load == load
        assert point.scenario.duration == 2000.0
    assert {p.seed for p in points if p.replication == 0} == {BASE_SEED}
    assert {p.seed for p in points if p.replication == 1} == {BASE_SEED + 1}


def test_keys_differ_between_points_and_replications_and_are_stable(tmp_path: Path) -> None:
    path = grid(tmp_path)
    first = expand(load_study(path))
    again = expand(load_study(path))
    assert len({p.key for p in first}) == len(first)
    assert [p.key for p in first] == [p.key for p in again]
    assert all(len(p.key) == 32 and int(p.key, 16) >= 0 for p in first)
    # One scenario per combination, shared by its replications.
    by_index = {}
    for p in first:
        by_index.setdefault(p.index, set()).add(p.scenario_sha256)
    assert all(len(hashes) == 1 for hashes in by_index.values())
    assert len({next(iter(h)) for h in by_index.values()}) == len(by_index)


def test_a_key_is_the_run_not_the_study_that_names_it(tmp_path: Path) -> None:
    """The same run reached from another study (a different grid, a zip) has the same key,
    which is what lets a sweep folder reuse it."""
    (one,) = expand(load_study(study(tmp_path, "parameters:\n  workloads.0.load: [0.4]\n")))
    other = study(
        tmp_path,
        "zip:\n  - workloads.0.load: [0.3, 0.4]\n    workloads.0.message_bytes: [4KiB, 4KiB]\n",
        name="other.yaml",
    )
    keys = [p.key for p in expand(load_study(other))]
    assert keys[1] == one.key and keys[0] != one.key


def test_a_study_without_parameters_is_the_base_scenario_replicated(tmp_path: Path) -> None:
    points = expand(load_study(study(tmp_path, "replications: 3\n")))
    base = load_scenario(FAT_TREE)
    assert [(p.index, p.replication, p.seed) for p in points] == [
        (0, r, BASE_SEED + r) for r in range(3)
    ]
    assert points[0].scenario.model_dump() == base.model_dump()
    assert all(p.values == {} for p in points)


def test_two_spellings_of_one_duration_are_the_same_run(tmp_path: Path) -> None:
    path = study(tmp_path, "parameters:\n  duration: [5us, 5000ns]\n")
    with pytest.raises(InputError) as err:
        expand(load_study(path))
    assert err.value.file == str(path)
    assert err.value.line is not None
    assert "'5000ns' is the same run as duration = '5us'" in err.value.message


BAD = [
    pytest.param(
        "parameters:\n  duration: [2us]\n  workloads.0.lod: [0.2]  # <-\n",
        "parameters.workloads.0.lod",
        ["unknown key; did you mean 'load'?"],
        id="unknown-key",
    ),
    pytest.param(
        "parameters:\n  duration: [2us]\n  workloads.5.load: [0.2]  # <-\n",
        "parameters.workloads.5.load",
        [f"workloads is a list of {WORKLOADS} item(s)", f"0 to {WORKLOADS - 1}", "'5'"],
        id="index-out-of-range",
    ),
    pytest.param(
        "parameters:\n  duration.unit: [ns]  # <-\n",
        "parameters.duration.unit",
        ["duration is a value ('200us') in the base scenario, not a mapping"],
        id="through-a-value",
    ),
    pytest.param(
        "parameters:\n  duration: [2us]\n  workloads.0.load: [0.2, -0.5]  # <-\n",
        "parameters.workloads.0.load",
        ["-0.5", "positive"],
        id="negative-load",
    ),
    pytest.param(
        "zip:\n  - duration: [2us, 3us]\n    workloads.0.load: [0.2, -0.5]  # <-\n",
        "zip.0.workloads.0.load",
        ["-0.5", "positive"],
        id="negative-load-in-a-zip",
    ),
]


@pytest.mark.parametrize(("body", "field", "expect"), BAD)
def test_a_parameters_problem_is_reported_at_its_line_in_the_study(
    tmp_path: Path, body: str, field: str, expect: list[str]
) -> None:
    path = study(tmp_path, body)
    text = path.read_text(encoding="utf-8")
    with pytest.raises(InputError) as err:
        expand(load_study(path))
    message = str(err.value)
    assert message.startswith(f"{path}:{marked_line(text)}: {field}: "), message
    for part in expect:
        assert part in message, message


def test_an_unknown_key_on_the_way_is_reported_at_that_parameters_line(tmp_path: Path) -> None:
    path = study(
        tmp_path, "parameters:\n  duration: [2us, 3us]\n  swtch.arbitration: [40ns]  # <-\n"
    )
    text = path.read_text(encoding="utf-8")
    with pytest.raises(InputError) as err:
        expand(load_study(path))
    message = str(err.value)
    assert message.startswith(f"{path}:{marked_line(text)}: parameters.swtch.arbitration: "), (
        message
    )
    assert "did you mean 'switch'?" in message


def test_a_zip_group_written_first_varies_slowest(tmp_path: Path) -> None:
    path = study(
        tmp_path,
        "zip:\n"
        "  - workloads.0.load: [0.1, 0.2]\n"
        "    workloads.0.message_bytes: [1KiB, 2KiB]\n"
        "parameters:\n"
        "  duration: [2us, 3us]\n",
    )
    points = expand(load_study(path))
    assert [(p.values["workloads.0.load"], p.values["duration"]) for p in points] == [
        (0.1, "2us"),
        (0.1, "3us"),
        (0.2, "2us"),
        (0.2, "3us"),
    ]

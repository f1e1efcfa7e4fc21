"""``sitssim.sweep`` into a folder: rows, summary, figures, reuse, errors, superseded
points, re-projection, folder safety, and the local pool against one process."""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from located_errors import marked_line
from scipy import stats
from sweeps.sweep_helpers import (
    FAT_TREE,
    TWO_LOADS_ON_DIRECT_RC,
    Spy,
    assert_same_rows,
    files,
    refuse_to_run,
    write_study,
)

import sitssim
from sitssim.errors import InputError
from sitssim.sweeps.points import expand
from sitssim.sweeps.study import load_study

METRICS = ["delivered_GBps", "data_latency_ns.p99"]
CLAUSES = ["fabric.hop_limit", "fabric.tso_window"]
LOADS = [0.2, 0.6]


def study_text(
    loads: list[float] = LOADS, metrics: list[str] = METRICS, replications: int = 2
) -> str:
    return (
        f"base: {FAT_TREE}\n"
        "parameters:\n"
        "  duration: [2us]\n"
        f"  workloads.0.load: [{', '.join(map(str, loads))}]\n"
        f"replications: {replications}\n"
        f"metrics: [{', '.join(metrics)}]\n"
        f"clauses: [{', '.join(CLAUSES)}]\n"
    )


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, pd.DataFrame]:
    """2 loads x 2 replications swept once into a folder: (study file, folder, rows)."""
    folder = tmp_path_factory.mktemp("first")
    path = write_study(folder / "load.yaml", study_text())
    out = folder / "out"
    return path, out, sitssim.sweep(path, out, workers=1)


@pytest.fixture
def copied(first: tuple[Path, Path, pd.DataFrame], tmp_path: Path) -> Path:
    """A copy of the first sweep's folder, for a test to sweep into again."""
    _, out, _ = first
    return Path(shutil.copytree(out, tmp_path / "out"))


def point_files(out: Path) -> list[Path]:
    return sorted((out / "points").glob("*.parquet"))


def test_rows_come_back_in_study_order_and_are_what_the_folder_holds(
    first: tuple[Path, Path, pd.DataFrame],
) -> None:
    path, out, frame = first
    assert [(r.point, r.replication) for r in frame.itertuples()] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]
    assert frame["seed"].tolist() == [1, 2, 1, 2]
    assert frame["workloads.0.load"].tolist() == [0.2, 0.2, 0.6, 0.6]
    assert frame["duration"].tolist() == ["2us"] * 4
    assert (frame["status"] == "ok").all() and (frame["error"] == "").all()
    assert frame["key"].tolist() == [p.key for p in expand(load_study(path))]
    assert frame["sitssim_version"].eq(sitssim.__version__).all()
    for name in METRICS:
        assert frame[f"metrics.{name}"].notna().all(), name
    for clause in CLAUSES:
        assert frame[f"clauses.{clause}.verdict"].isin(["pass", "n/a"]).all(), clause
    # The folder: one file per point, which read back as the very rows returned.
    assert sorted(p.stem for p in point_files(out)) == sorted(frame["key"])
    assert_same_rows(pd.read_parquet(out / "points"), frame)


def test_the_summary_is_the_mean_and_t_interval_over_replications(
    first: tuple[Path, Path, pd.DataFrame],
) -> None:
    path, out, frame = first
    summary = pd.read_parquet(out / "summary.parquet")
    assert summary["point"].tolist() == [0, 1]
    assert summary["workloads.0.load"].tolist() == LOADS
    assert summary["replications"].tolist() == [2, 2]
    assert summary["errors"].tolist() == [0, 0]
    for point, row in summary.set_index("point").iterrows():
        runs = frame[frame["point"] == point]
        for name in METRICS:
            values = runs[f"metrics.{name}"].to_numpy()
            assert values[0] != values[1], "replications on other seeds should differ"
            assert row[f"metrics.{name}.mean"] == pytest.approx(values.mean(), rel=1e-12)
            low, high = stats.t.interval(0.95, 1, loc=values.mean(), scale=stats.sem(values))
            assert row[f"metrics.{name}.ci"] == pytest.approx((high - low) / 2, rel=1e-9)
        for clause in CLAUSES:
            assert row[f"clauses.{clause}.fail_fraction"] == 0.0
    # sitssim.summarise is what the folder's summary was made with.
    again = sitssim.summarise(frame, sitssim.load_study(path))
    pd.testing.assert_frame_equal(again.reset_index(drop=True), summary, check_dtype=False)


def test_the_figures_folder_has_the_varied_parameters_figure(
    first: tuple[Path, Path, pd.DataFrame],
) -> None:
    _, out, _ = first
    figure = out / "figures" / "workloads.0.load.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert figure.stat().st_size > 10_000


def test_delivered_throughput_rises_with_load(first: tuple[Path, Path, pd.DataFrame]) -> None:
    _, _, frame = first
    delivered = frame.groupby("workloads.0.load")["metrics.delivered_GBps"]
    assert delivered.min()[0.6] > 1.5 * delivered.max()[0.2]


def test_a_second_sweep_reuses_every_point_without_running_it(
    first: tuple[Path, Path, pd.DataFrame], copied: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _, frame = first

    def stored() -> dict[str, tuple[int, bytes]]:
        return {p.name: (p.stat().st_ino, p.read_bytes()) for p in point_files(copied)}

    before = stored()
    spy = Spy(monkeypatch)
    again = sitssim.sweep(path, copied, workers=1, figures=False)
    assert spy.calls == []
    # Reused rows are the stored ones, wall time included, and the files are left alone
    # (not even replaced by the same bytes).
    pd.testing.assert_frame_equal(again, frame)
    assert stored() == before


def test_a_point_that_raises_is_an_error_row_and_only_it_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_study(tmp_path / "s.yaml", study_text())
    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        spy = Spy(patch)
        spy.fail = {(0.6, 2)}
        frame = sitssim.sweep(path, out, workers=1, figures=False)
    assert sorted(spy.calls) == [(0.2, 1), (0.2, 2), (0.6, 1), (0.6, 2)]
    failed = frame[frame["status"] == "error"]
    assert [(r.point, r.replication, r.seed) for r in failed.itertuples()] == [(1, 1, 2)]
    assert failed["error"].iloc[0] == "RuntimeError: boom at load 0.6 seed 2"
    assert failed[[f"metrics.{m}" for m in METRICS]].isna().all(axis=None)
    ok = frame[frame["status"] == "ok"]
    assert len(ok) == 3 and (ok["error"] == "").all()
    assert ok[[f"metrics.{m}" for m in METRICS]].notna().all(axis=None)
    summary = pd.read_parquet(out / "summary.parquet").set_index("point")
    assert summary.loc[1, "replications"] == 1 and summary.loc[1, "errors"] == 1
    assert summary.loc[1, "metrics.delivered_GBps.mean"] == pytest.approx(
        ok[ok["point"] == 1]["metrics.delivered_GBps"].iloc[0]
    )
    assert math.isnan(summary.loc[1, "metrics.delivered_GBps.ci"])
    # Again, without the fault: only that point runs, and its record is replaced.
    spy = Spy(monkeypatch)
    again = sitssim.sweep(path, out, workers=1, figures=False)
    assert spy.calls == [(0.6, 2)]
    assert (again["status"] == "ok").all()
    # The three that had finished are as they were (their wall time too: not re-run).
    assert_same_rows(again[again["key"] != failed["key"].iloc[0]], ok, drop=())
    assert len(point_files(out)) == 4
    stored = pd.read_parquet(out / "points")
    assert sorted(stored["key"]) == sorted(again["key"])
    assert (stored["status"] == "ok").all()


def test_a_value_dropped_from_the_study_moves_its_points_to_superseded(
    first: tuple[Path, Path, pd.DataFrame], copied: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, frame = first
    smaller = write_study(copied.parent / "smaller.yaml", study_text(loads=[0.2]))
    spy = Spy(monkeypatch)
    rows = sitssim.sweep(smaller, copied, workers=1, figures=False)
    assert spy.calls == []
    kept = frame[frame["workloads.0.load"] == 0.2]
    gone = frame[frame["workloads.0.load"] == 0.6]
    assert sorted(p.stem for p in point_files(copied)) == sorted(kept["key"])
    assert sorted(p.stem for p in (copied / "superseded").iterdir()) == sorted(gone["key"])
    assert_same_rows(pd.read_parquet(copied / "points"), rows)
    assert_same_rows(rows, kept)
    assert pd.read_parquet(copied / "summary.parquet")["workloads.0.load"].tolist() == [0.2]


def test_other_metrics_of_the_same_runs_are_projected_without_running_them(
    first: tuple[Path, Path, pd.DataFrame], copied: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, frame = first
    other = write_study(
        copied.parent / "other.yaml", study_text(metrics=["messages", "offered_GBps"])
    )
    spy = Spy(monkeypatch)
    rows = sitssim.sweep(other, copied, workers=1, figures=False)
    assert spy.calls == []
    assert rows["key"].tolist() == frame["key"].tolist()
    assert "metrics.delivered_GBps" not in rows
    for row in rows.to_dict("records"):
        recorded = json.loads(row["metrics_json"])
        assert row["metrics.messages"] == recorded["messages"] > 0
        assert row["metrics.offered_GBps"] == recorded["offered_GBps"] > 0
    # The stored points were re-projected too: the folder reads back as the new rows.
    assert_same_rows(pd.read_parquet(copied / "points"), rows)
    summary = pd.read_parquet(copied / "summary.parquet")
    assert summary["metrics.messages.mean"].notna().all()


@pytest.mark.parametrize("reused", [True, False], ids=["reused-points", "first-run"])
def test_a_metric_no_run_has_is_refused_with_what_it_may_mean(
    first: tuple[Path, Path, pd.DataFrame], tmp_path: Path, reused: bool
) -> None:
    text = study_text(metrics=["messages", "delivered_GBs"]).replace(
        "delivered_GBs]\n", "delivered_GBs]  # <-\n"
    )
    path = write_study(tmp_path / "typo.yaml", text)
    out = Path(shutil.copytree(first[1], tmp_path / "out")) if reused else None
    with pytest.raises(InputError) as err:
        sitssim.sweep(path, out, workers=1, figures=False)
    message = str(err.value)
    assert message.startswith(f"{path}:{marked_line(text)}: metrics.1: "), message
    assert "no metric 'delivered_GBs'" in message and "did you mean 'delivered_GBps'?" in message


# --- the folder -----------------------------------------------------------------------


def test_a_folder_sitssim_did_not_write_is_refused_and_left_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "mine"
    (out / "data").mkdir(parents=True)
    (out / "notes.txt").write_text("my notes\n", encoding="utf-8")
    (out / "data" / "x.parquet").write_bytes(b"not yours")
    before = files(out)
    spy = Spy(monkeypatch)
    with pytest.raises(InputError) as err:
        sitssim.sweep(write_study(tmp_path / "s.yaml", study_text()), out, workers=1)
    assert err.value.file == str(out) and err.value.field == "--out"
    assert "not empty" in err.value.message
    assert spy.calls == []
    assert files(out) == before
    assert sorted(p.name for p in out.iterdir()) == ["data", "notes.txt"]


def test_a_run_results_folder_is_refused_and_left_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / ".sitssim-results").write_text('{"files": []}\n', encoding="utf-8")
    (out / ".sitssim-sweep").write_text("{}\n", encoding="utf-8")  # even with both markers
    before = files(out)
    spy = Spy(monkeypatch)
    with pytest.raises(InputError) as err:
        sitssim.sweep(write_study(tmp_path / "s.yaml", study_text()), out, workers=1)
    assert err.value.field == "--out" and "results of a run" in err.value.message
    assert spy.calls == []
    assert files(out) == before


def test_stale_tmp_files_are_removed_and_the_users_files_are_not(
    first: tuple[Path, Path, pd.DataFrame], copied: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _, _ = first
    stale = copied / "points" / ".0123456789abcdef0123456789abcdef.1234.tmp"
    stale.write_bytes(b"half a parquet file")
    stale_summary = copied / ".summary.99.tmp"
    stale_summary.write_bytes(b"half a summary")
    notes = copied / "points" / "notes.txt"
    notes.write_text("keep me\n", encoding="utf-8")
    lookalike = copied / "points" / ".notes.1234.tmp"  # a dot file sitssim never writes
    lookalike.write_text("mine too\n", encoding="utf-8")
    spy = Spy(monkeypatch)
    sitssim.sweep(path, copied, workers=1, figures=False)
    assert spy.calls == []
    assert not stale.exists() and not stale_summary.exists()
    assert notes.read_text(encoding="utf-8") == "keep me\n"
    assert lookalike.read_text(encoding="utf-8") == "mine too\n"


def test_the_folders_own_copy_of_the_study_sweeps_into_it_again(
    first: tuple[Path, Path, pd.DataFrame], copied: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, _, frame = first
    spy = Spy(monkeypatch)
    again = sitssim.sweep(copied / "study.yaml", copied, workers=1, figures=False)
    assert spy.calls == []
    pd.testing.assert_frame_equal(again, frame)


# --- the local pool -------------------------------------------------------------------


def test_a_pool_of_two_workers_gives_the_rows_of_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_study(tmp_path / "pool.yaml", TWO_LOADS_ON_DIRECT_RC)
    alone = sitssim.sweep(path, None, workers=1)
    assert (alone["status"] == "ok").all()
    # Spawned workers import the real simulator; this process's would fail every point.
    refuse_to_run(monkeypatch)
    pooled = sitssim.sweep(path, None, workers=2)
    assert (pooled["status"] == "ok").all(), pooled["error"].tolist()
    assert pooled["key"].tolist() == alone["key"].tolist()
    assert_same_rows(pooled, alone)


def test_a_folder_another_sweep_has_just_locked_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The instant between a sweep's lock and its marker: the folder holds only the lock.
    out = tmp_path / "out"
    out.mkdir()
    held = os.open(out / ".sitssim-sweep.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.pwrite(held, b"4242\n", 0)
        spy = Spy(monkeypatch)
        with pytest.raises(InputError) as err:
            sitssim.sweep(write_study(tmp_path / "s.yaml", study_text()), out, workers=1)
    finally:
        os.close(held)
    assert err.value.field == "--out"
    assert "another sweep (PID 4242) is writing here" in err.value.message
    assert spy.calls == []
    assert sorted(p.name for p in out.iterdir()) == [".sitssim-sweep.lock"]

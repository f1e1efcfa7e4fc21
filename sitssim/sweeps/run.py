"""``sitssim.sweep``: a study's points run, stored as they finish, summarised and plotted.

The sweep expands and checks every point first (:mod:`sitssim.sweeps.points`), so bad
input stops it before anything runs. With a folder, finished points found there are
reused by key (re-projected onto this study's columns if it collects other metrics of
them), points that raised before are run again, points of earlier versions of the study
are moved to ``superseded/``, and each point finished now is written at once. The
metrics a study names are checked against the first run that finishes: a name no run
has stops the sweep (exit 2) with what it may have meant, before the others spend
their time.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from sitssim.sweeps.backends import Backend, run_points
from sitssim.sweeps.figures import write_figures
from sitssim.sweeps.points import Point, expand
from sitssim.sweeps.rows import STATUS_OK, project, schema, table
from sitssim.sweeps.store import SweepFolder
from sitssim.sweeps.study import Study, load_study
from sitssim.sweeps.summary import summarise

Progress = Callable[[int, int, int], None]
"""Called as points finish with (points done, of them failed, points in all)."""


def sweep(
    study: Study | str | Path,
    out: str | Path | None = None,
    *,
    workers: int | None = None,
    backend: Backend = "local",
    scheduler: str | None = None,
    figures: bool = True,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Run every point of ``study`` and return one row per point, in study order.

    ``out``: a folder to keep the points in (resumable; module docstring), with the
    summary and figures; ``None`` keeps nothing. ``workers`` defaults to every core.
    """
    if not isinstance(study, Study):
        study = load_study(study)
    points = expand(study)
    columns = schema(study)
    if out is None:
        rows = _run(points, study, columns, {}, None, workers, backend, scheduler, progress)
        return _frame(rows, columns)
    with SweepFolder(Path(out), study) as folder:
        stored = folder.records()
        rows = _run(points, study, columns, stored, folder, workers, backend, scheduler, progress)
        folder.supersede({p.key for p in points})
        frame = _frame(rows, columns)
        summary = summarise(frame, study)
        folder.write_summary(pa.Table.from_pandas(summary, preserve_index=False))
        if figures:
            with folder.figures() as written:
                written.extend(write_figures(summary, study, folder.out / "figures"))
    return frame


def _run(
    points: list[Point],
    study: Study,
    columns: pa.Schema,
    stored: dict[str, tuple[dict[str, Any], pa.Schema]],
    folder: SweepFolder | None,
    workers: int | None,
    backend: Backend,
    scheduler: str | None,
    progress: Progress | None,
) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    todo = []
    reused = [p for p in points if p.key in stored and stored[p.key][0]["status"] == STATUS_OK]
    checked = bool(reused)
    if checked:
        # Before anything is rewritten: bad input writes nothing.
        _check_metrics(study, stored[reused[0].key][0])
    for point in points:
        found = stored.get(point.key)
        if found is None or found[0]["status"] != STATUS_OK:
            todo.append(point)
            continue
        record, written_with = found
        rows[point.key] = row = project(record, point, study, columns)
        if folder is not None and not written_with.equals(columns):
            folder.write_point(point.key, table([row], columns))
    failed = 0
    if progress is not None:
        progress(len(rows), failed, len(points))
    for point, record in run_points(todo, backend, workers, scheduler):
        row = project(record, point, study, columns)
        if not checked and record["status"] == STATUS_OK:
            _check_metrics(study, record)
            checked = True
        if folder is not None:
            folder.write_point(point.key, table([row], columns))
        rows[point.key] = row
        failed += record["status"] != STATUS_OK
        if progress is not None:
            progress(len(rows), failed, len(points))
    return {p.key: rows[p.key] for p in points}


def _check_metrics(study: Study, record: dict[str, Any]) -> None:
    metrics = json.loads(record["metrics_json"])
    for i, name in enumerate(study.metrics):
        if name not in metrics:
            close = difflib.get_close_matches(name, list(metrics), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else " (report.json's metrics has them)"
            raise study.error(f"no metric {name!r} in the run's metrics{hint}", "metrics", i)
        value = metrics[name]
        if value is not None and not isinstance(value, int | float):
            raise study.error(
                f"metric {name!r} is {type(value).__name__}: a sweep collects numbers",
                "metrics",
                i,
            )


def _frame(rows: dict[str, dict[str, Any]], columns: pa.Schema) -> pd.DataFrame:
    return table(list(rows.values()), columns).to_pandas()

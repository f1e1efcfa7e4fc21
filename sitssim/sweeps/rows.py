"""One point run, and its row: what a run produced, as a study's typed columns.

A worker runs a point and returns its *record*: the point's identity, status, wall time
and, losslessly, the run's metrics (flattened to dotted names) and verdicts as JSON,
exactly as ``report.json`` has them. The row a study stores is a projection of the record
onto the study's columns (:func:`schema`): its parameters, the metrics it collects as
numbers and each clause it collects as verdict, measured value, limit and basis. Because the
record travels inside the row, a finished point is re-projected, never re-run, when a
study collects other metrics of the same runs.

A point that raises is recorded with status ``error`` and the exception in one line;
its metrics are missing (NaN) and its verdicts empty.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from sitssim import __version__
from sitssim.errors import one_line
from sitssim.results.report import report_dict
from sitssim.simulation import simulate
from sitssim.sweeps.points import Point
from sitssim.sweeps.study import Study

ERROR_CHARS = 400
STATUS_OK, STATUS_ERROR = "ok", "error"

IDENTITY = (
    ("key", pa.string()),
    ("point", pa.int64()),
    ("replication", pa.int64()),
    ("seed", pa.int64()),
)
PROVENANCE = (
    ("status", pa.string()),
    ("error", pa.string()),
    ("wall_s", pa.float64()),
    ("sitssim_version", pa.string()),
    ("scenario_sha256", pa.string()),
)
RECORD = (("metrics_json", pa.string()), ("clauses_json", pa.string()))
CLAUSE_PARTS = (
    ("verdict", pa.string()),
    ("measured", pa.float64()),
    ("limit", pa.float64()),
    ("basis", pa.string()),
)
RECORD_FIELDS = ("key", *(name for name, _ in PROVENANCE + RECORD))
"""What a record holds: the run's outcome, keyed. Which point it is (its index, seed and
values) comes from the study that reads it, since one run may serve several studies."""


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """The scalar leaves of nested metrics under dotted names (lists are left out)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        elif not isinstance(value, list | tuple):
            flat[name] = value
    return flat


def run_point(point: Point) -> dict[str, Any]:
    """Run ``point`` and return its record (module docstring). Pure: the same point gives
    the same record, but for ``wall_s``."""
    start = time.perf_counter()
    metrics: dict[str, Any] = {}
    clauses: dict[str, Any] = {}
    try:
        report = report_dict(simulate(point.scenario))
    except Exception as exc:
        status = STATUS_ERROR
        error = one_line(f"{type(exc).__name__}: {exc}", ERROR_CHARS)
    else:
        status, error = STATUS_OK, ""
        metrics = flatten(report["metrics"])
        clauses = {c["id"]: {part: c[part] for part, _ in CLAUSE_PARTS} for c in report["clauses"]}
    return {
        "key": point.key,
        "status": status,
        "error": error,
        "wall_s": time.perf_counter() - start,
        "sitssim_version": __version__,
        "scenario_sha256": point.scenario_sha256,
        "metrics_json": json.dumps(metrics, sort_keys=True),
        "clauses_json": json.dumps(clauses, sort_keys=True),
    }


def _parameter_type(values: Iterable[Any]) -> pa.DataType:
    values = list(values)
    if all(isinstance(v, bool) for v in values):
        return pa.bool_()
    if any(isinstance(v, bool) for v in values):
        return pa.string()
    if all(isinstance(v, int) for v in values):
        return pa.int64()
    if all(isinstance(v, int | float) for v in values):
        return pa.float64()
    return pa.string()


def metric_column(name: str) -> str:
    return f"metrics.{name}"


def clause_column(clause: str, part: str) -> str:
    return f"clauses.{clause}.{part}"


def schema(study: Study) -> pa.Schema:
    """The columns of every row of ``study``, the same for every point so that the points
    read back as one table whatever each run produced."""
    parameters = [
        (path, _parameter_type(row[k] for row in axis.values))
        for axis in study.axes
        for k, path in enumerate(axis.paths)
    ]
    metrics = [(metric_column(m), pa.float64()) for m in study.metrics]
    clauses = [(clause_column(c, part), kind) for c in study.clauses for part, kind in CLAUSE_PARTS]
    return pa.schema([*IDENTITY, *parameters, *PROVENANCE, *metrics, *clauses, *RECORD])


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def project(
    record: Mapping[str, Any], point: Point, study: Study, columns: pa.Schema
) -> dict[str, Any]:
    """``record``, the outcome of ``point``'s run, as a row of ``columns`` (``schema(study)``)."""
    metrics = json.loads(record["metrics_json"])
    clauses = json.loads(record["clauses_json"])
    row: dict[str, Any] = {name: record[name] for name in RECORD_FIELDS}
    row.update(point=point.index, replication=point.replication, seed=point.seed)
    for path in study.parameters:
        value = point.values[path]
        kind = columns.field(path).type
        row[path] = str(value) if kind == pa.string() and not isinstance(value, str) else value
    for name in study.metrics:
        row[metric_column(name)] = _number(metrics.get(name))
    for clause in study.clauses:
        verdict = clauses.get(clause, {})
        for part, kind in CLAUSE_PARTS:
            value = verdict.get(part)
            row[clause_column(clause, part)] = _number(value) if kind == pa.float64() else value
    return row


def table(rows: list[dict[str, Any]], columns: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=columns)

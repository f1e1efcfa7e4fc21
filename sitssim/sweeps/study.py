"""A study file: a base scenario, the parameters to vary, replications, what to collect.

::

    base: ../scenarios/fat_tree_8gpu.yaml   # relative to the study file, or absolute
    parameters:                             # a grid over dotted paths into the scenario
      duration: [5us]
      workloads.0.load: {from: 0.1, to: 0.9, step: 0.2}
    zip:                                    # lists varied together: one axis per group
      - workloads.0.size: [256B, 4KiB]
        duration: [5us, 20us]
    replications: 2                         # seeds per point: the base's seed, +1, ...
    metrics: [data_latency_ns.p99]          # default: the headline metrics
    clauses: [fabric.skew]                  # default: every clause

A parameter's values are a list, an arithmetic range ``{from, to, step}`` (``to``
included when the steps reach it) or ``{from, to, points, scale: linear | log}``. The
file is checked as strictly as a scenario: every problem is one located ``InputError``
naming the study file, its line and field. Whether a dotted path names a field of the
scenario is for :mod:`sitssim.sweeps.points` to say, which applies the values.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sitssim.errors import InputError, shown
from sitssim.files import read_regular_file
from sitssim.spec.catalogue import CLAUSES
from sitssim.yaml_bounds import MAX_FILE_BYTES, line_map, line_of, load_yaml, plain

MAX_VALUES = 10_000
"""Most values one parameter may take: a step of 1e-9 by mistake is refused, not run."""
MAX_REPLICATIONS = 10_000

HEADLINE_METRICS: tuple[str, ...] = (
    "messages",
    "data_latency_ns.mean",
    "data_latency_ns.p50",
    "data_latency_ns.p99",
    "data_latency_ns.p999",
    "data_zero_load_ns.mean",
    "probe_rtt_ns.p50",
    "probe_rtt_ns.p99",
    "offered_GBps",
    "delivered_GBps",
    "throughput_bound_GBps",
    "channel_headroom",
    "max_link_utilisation",
    "oracle_latency_violations",
    "link_layer.replays",
    "link_layer.replay_fraction",
    "link_layer.credit_stalls",
    "phy.traffic_start_ns",
    "phy.retrains",
)
"""What ``sitssim run`` prints as its headline, as numbers in ``report.json``'s metrics:
collected when a study names none."""

_FIELDS = ("name", "description", "base", "parameters", "zip", "replications", "metrics", "clauses")


@dataclass(frozen=True)
class Axis:
    """One way the points differ: one parameter, or one zip group of parameters whose
    lists are read together (``values[k]`` holds each path's ``k``-th value)."""

    paths: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]
    lines: tuple[int | None, ...]
    fields: tuple[str, ...]
    """Per path: where the study file sets it (``parameters.duration``, ``zip.0.duration``)."""
    log: tuple[bool, ...]
    """Per path: its values were a log range (its plots get a log axis)."""


@dataclass(frozen=True)
class Study:
    path: Path
    name: str
    description: str
    base: Path
    axes: tuple[Axis, ...]
    replications: int
    metrics: tuple[str, ...]
    clauses: tuple[str, ...]
    lines: dict[tuple, int]

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(p for axis in self.axes for p in axis.paths)

    def line_of(self, *loc: Any) -> int | None:
        """Line of ``loc`` or its deepest known prefix; else where the file's mapping starts."""
        return line_of(self.lines, loc) or self.lines.get(())

    def restricted(
        self, replications: int | None = None, keep: dict[str, list[Any]] | None = None
    ) -> Study:
        """This study with fewer replications, or fewer values: for each path of ``keep``,
        only the values listed (a zip group keeps the rows whose value it lists). A quick
        look at a study: the points kept are points of the full study, with the same keys,
        so a later full sweep into the same folder reuses them."""
        keep = keep or {}
        unknown = set(keep) - set(self.parameters)
        if unknown:
            raise ValueError(f"no parameter {sorted(unknown)[0]!r} in study {self.name!r}")
        axes = []
        for axis in self.axes:
            rows = [
                row
                for row in axis.values
                if all(row[k] in keep[p] for k, p in enumerate(axis.paths) if p in keep)
            ]
            if not rows:
                raise ValueError(f"no value of {', '.join(axis.paths)} is kept")
            axes.append(replace(axis, values=tuple(rows)))
        if replications is not None and not 1 <= replications <= self.replications:
            raise ValueError(f"expected 1 to {self.replications} replications")
        return replace(self, axes=tuple(axes), replications=replications or self.replications)

    def error(self, message: str, *loc: Any) -> InputError:
        """A located error in this study file at ``loc`` (keys and indices)."""
        field = ".".join(str(p) for p in loc) or None
        return InputError(message, file=str(self.path), line=self.line_of(*loc), field=field)


def load_study(path: str | Path) -> Study:
    """Read and check a study file (its base scenario is checked by the points)."""
    name = str(path)
    raw = read_regular_file(
        name, MAX_FILE_BYTES, "study", ": studies are a few lines; is this the right file?"
    )
    data = load_yaml(raw, name, what="study")
    if data is None:
        raise InputError(
            "empty file: expected a mapping with at least `base:`", file=name, line=None
        )
    lines = line_map(data)
    data = plain(data)
    where = Study(Path(name), "", "", Path(), (), 1, (), (), lines)
    if not isinstance(data, dict):
        raise where.error(f"expected a mapping of study fields, got {_kind(data)}")
    for key in data:
        if key not in _FIELDS:
            close = difflib.get_close_matches(key, _FIELDS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise where.error(f"unknown key{hint} (valid keys: {', '.join(_FIELDS)})", key)
    if "base" not in data:
        raise where.error("required field is missing: the base scenario file", "base")
    base = data["base"]
    if not isinstance(base, str) or not base.strip():
        raise where.error(f"expected the path of a scenario file, got {_kind(base)}", "base")
    base_path = Path(base) if Path(base).is_absolute() else Path(name).parent / base
    study_name = data.get("name", Path(name).stem)
    if not isinstance(study_name, str) or not study_name:
        raise where.error(f"expected a non-empty name, got {_kind(study_name)}", "name")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise where.error(f"expected text, got {_kind(description)}", "description")
    # The axes cross in file order: whichever of parameters and zip comes first varies slowest.
    axes = [
        axis
        for key in data
        if key in ("parameters", "zip")
        for axis in (_grid(where, data[key]) if key == "parameters" else _zips(where, data[key]))
    ]
    seen: dict[str, tuple] = {}
    for axis, loc in zip(axes, _axis_locs(data), strict=True):
        for path in axis.paths:
            if path in seen:
                raise where.error(
                    f"{path} is varied twice (also at {_at(where, seen[path])})", *loc
                )
            seen[path] = loc
    replications = data.get("replications", 1)
    if isinstance(replications, bool) or not isinstance(replications, int):
        raise where.error(
            f"expected a whole number of seeds, got {_kind(replications)}", "replications"
        )
    if not 1 <= replications <= MAX_REPLICATIONS:
        raise where.error(
            f"expected 1 to {MAX_REPLICATIONS} replications, got {replications}", "replications"
        )
    metrics = _names(where, data, "metrics", HEADLINE_METRICS)
    clauses = _names(where, data, "clauses", tuple(CLAUSES))
    for i, clause in enumerate(clauses):
        if clause not in CLAUSES:
            close = difflib.get_close_matches(clause, list(CLAUSES), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else " (sitssim clauses lists them)"
            raise where.error(f"unknown clause {shown(clause)}{hint}", "clauses", i)
    return Study(
        path=Path(name),
        name=study_name,
        description=description,
        base=base_path,
        axes=tuple(axes),
        replications=replications,
        metrics=metrics,
        clauses=clauses,
        lines=lines,
    )


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing"
    return shown(value)


def _at(study: Study, loc: tuple) -> str:
    line = study.line_of(*loc)
    return f"line {line}" if line is not None else ".".join(map(str, loc))


def _axis_locs(data: dict) -> list[tuple]:
    locs: list[tuple] = []
    for key in data:
        if key == "parameters":
            locs += [("parameters", p) for p in data[key]]
        elif key == "zip":
            locs += [("zip", i) for i in range(len(data[key]))]
    return locs


def _check_path(study: Study, path: Any, *loc: Any) -> str:
    if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
        raise study.error(
            f"expected a dotted path into the scenario (like workloads.0.load), got {_kind(path)}",
            *loc,
        )
    if path == "seed" or path.startswith("seed."):
        raise study.error("the seed is set by replications, not varied as a parameter", *loc)
    return path


def _grid(study: Study, parameters: Any) -> list[Axis]:
    if not isinstance(parameters, dict):
        raise study.error(
            f"expected a mapping of dotted paths to values, got {_kind(parameters)}", "parameters"
        )
    axes = []
    for path, spec in parameters.items():
        _check_path(study, path, "parameters", path)
        values, log = _values(study, spec, "parameters", path)
        axes.append(
            Axis(
                paths=(path,),
                values=tuple((v,) for v in values),
                lines=(study.line_of("parameters", path),),
                fields=(f"parameters.{path}",),
                log=(log,),
            )
        )
    return axes


def _zips(study: Study, groups: Any) -> list[Axis]:
    if not isinstance(groups, list):
        raise study.error(
            f"expected a list of mappings of paths to lists, got {_kind(groups)}", "zip"
        )
    axes = []
    for i, group in enumerate(groups):
        if not isinstance(group, dict) or not group:
            raise study.error(
                f"expected a mapping of dotted paths to equally long lists, got {_kind(group)}",
                "zip",
                i,
            )
        columns = []
        logs = []
        for path, spec in group.items():
            _check_path(study, path, "zip", i, path)
            values, log = _values(study, spec, "zip", i, path)
            if columns and len(values) != len(columns[0]):
                first = next(iter(group))
                raise study.error(
                    f"{len(values)} values where {first} has {len(columns[0])}: "
                    "the lists of a zip group are read together and must be equally long",
                    "zip",
                    i,
                    path,
                )
            columns.append(values)
            logs.append(log)
        axes.append(
            Axis(
                paths=tuple(group),
                values=tuple(zip(*columns, strict=True)),
                lines=tuple(study.line_of("zip", i, p) for p in group),
                fields=tuple(f"zip.{i}.{p}" for p in group),
                log=tuple(logs),
            )
        )
    return axes


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _values(study: Study, spec: Any, *loc: Any) -> tuple[list[Any], bool]:
    """A parameter's values and whether they were a log range."""
    if isinstance(spec, list):
        if not spec:
            raise study.error("expected at least one value", *loc)
        for k, value in enumerate(spec):
            if not _scalar(value):
                raise study.error(
                    f"expected a value (a number, a quantity like 5us, a name), got {_kind(value)}",
                    *loc,
                    k,
                )
        return list(spec), False
    if isinstance(spec, dict):
        return _range(study, spec, *loc)
    raise study.error(
        "expected a list of values, {from, to, step} or {from, to, points, scale}, "
        f"got {_kind(spec)}",
        *loc,
    )


def _range(study: Study, spec: dict, *loc: Any) -> tuple[list[Any], bool]:
    allowed = ("from", "to", "step", "points", "scale")
    for key in spec:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise study.error(f"unknown key{hint} (a range has: {', '.join(allowed)})", *loc, key)
    for key in ("from", "to"):
        if key not in spec:
            raise study.error(f"a range needs `{key}:`", *loc)
        value = spec[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise study.error(f"expected a finite number, got {_kind(value)}", *loc, key)
    start, stop = spec["from"], spec["to"]
    if ("step" in spec) == ("points" in spec):
        raise study.error("a range takes either `step:` or `points:` (with `scale:`)", *loc)
    if "step" in spec:
        if "scale" in spec:
            raise study.error("`scale:` goes with `points:`; a step range is linear", *loc, "scale")
        step = spec["step"]
        if isinstance(step, bool) or not isinstance(step, int | float) or not math.isfinite(step):
            raise study.error(f"expected a finite number, got {_kind(step)}", *loc, "step")
        if step == 0 or (stop - start) * step < 0:
            raise study.error(f"a step of {step} never goes from {start} to {stop}", *loc, "step")
        # A step that lands on ``to`` within rounding reaches it (0.1 to 0.9 by 0.2).
        n = math.floor((stop - start) / step + 1e-9) + 1
        if n > MAX_VALUES:
            raise study.error(f"{n} values (at most {MAX_VALUES} per parameter)", *loc, "step")
        if all(isinstance(v, int) for v in (start, stop, step)):
            return [start + k * step for k in range(n)], False
        return [_tidy(start + k * step) for k in range(n)], False
    points = spec["points"]
    if isinstance(points, bool) or not isinstance(points, int) or not 1 <= points <= MAX_VALUES:
        raise study.error(f"expected 1 to {MAX_VALUES} points, got {_kind(points)}", *loc, "points")
    scale = spec.get("scale", "linear")
    if scale not in ("linear", "log"):
        raise study.error(f"expected linear or log, got {_kind(scale)}", *loc, "scale")
    if points == 1:
        return [start], scale == "log"
    if scale == "linear":
        return [_tidy(start + (stop - start) * k / (points - 1)) for k in range(points)], False
    if start <= 0 or stop <= 0:
        raise study.error("a log range runs between positive numbers", *loc)
    ratio = math.log(stop / start)
    return [_tidy(start * math.exp(ratio * k / (points - 1))) for k in range(points)], True


def _tidy(value: float) -> float:
    """``value`` to 12 significant digits: 0.30000000000000004 is 0.3, as the user meant."""
    return float(f"{value:.12g}")


def _names(study: Study, data: dict, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    if key not in data:
        return default
    names = data[key]
    if not isinstance(names, list) or not names:
        raise study.error(f"expected a non-empty list of names, got {_kind(names)}", key)
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise study.error(f"expected a name, got {_kind(name)}", key, i)
        if name in names[:i]:
            raise study.error(f"{name} is listed twice", key, i)
    return tuple(names)

"""A sweep's figures: each collected metric against each varied parameter, with error bars.

One figure per varied parameter (``<parameter>.png``), one panel per collected metric:
the metric's mean per point with its 95 % interval (``summary``), against the parameter;
where other parameters vary too, one line per combination of theirs (a zip partner of the
parameter moves with it, so it draws no line of its own). Beside it,
``<parameter>.clauses.png`` plots the failure fraction (Wilson bounds) of every clause that
failed in some run, and ``<parameter>.clause_values.png`` each clause's measured value
against its limit (dashed). Quantities written as text (``5us``, ``4KiB``) are plotted as the
numbers they stand for (ns, bytes); other text as categories, in study order. A log range
gets a log axis, and so do positive values listed across three decades or more. Figures
are drawn on ``matplotlib.figure.Figure`` objects, never through pyplot, so that a
notebook's backend is left alone. One figure per parameter, not per metric: a figure costs
about a third of a second to draw, and a study collects twenty metrics by default.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from sitssim.sweeps.rows import clause_column, metric_column
from sitssim.sweeps.study import Study
from sitssim.units import UnitError, parse_size_bytes, parse_time_ns

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_PARSERS: tuple[tuple[str, Callable[[object], float]], ...] = (
    ("ns", parse_time_ns),
    ("bytes", parse_size_bytes),
)
_PANEL_COLUMNS = 4


def _as_numbers(values: pd.Series) -> tuple[pd.Series, str]:
    """``values`` as numbers and their unit: ``""`` for plain numbers, ``"category"``
    (positions in study order) for text that is no quantity."""
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        return values.astype(float), ""
    for unit, parse in _PARSERS:
        try:
            return values.map(lambda v, parse=parse: float(parse(v))), unit
        except (UnitError, ValueError, TypeError):
            continue
    order = list(dict.fromkeys(values))
    return values.map(order.index).astype(float), "category"


def file_name(parameter: str, what: str = "") -> str:
    return f"{_UNSAFE.sub('_', parameter)}{what}.png"


LOG_AXIS_SPAN = 1000.0
"""Listed values from ``x`` to at least this many times ``x`` are drawn on a log axis: on a
linear one all but the largest would sit on top of each other."""


class _Curves:
    """The points of ``summary`` as curves against ``parameter``: one per combination
    of the other varied parameters."""

    def __init__(self, summary: pd.DataFrame, study: Study, parameter: str) -> None:
        self.summary = summary
        self.parameter = parameter
        self.x, self.unit = _as_numbers(summary[parameter])
        # A zip partner moves with the parameter: it is the same axis, not another curve.
        partners = {p for axis in study.axes if parameter in axis.paths for p in axis.paths}
        self.others = [
            p for p in study.parameters if p not in partners and summary[p].nunique() > 1
        ]
        logs = {p: log for axis in study.axes for p, log in zip(axis.paths, axis.log, strict=True)}
        positive = bool(len(self.x)) and bool((self.x > 0).all())
        self.log = positive and (
            bool(logs.get(parameter)) or self.x.max() >= LOG_AXIS_SPAN * self.x.min()
        )

    def __iter__(self) -> Iterator[tuple[str | None, pd.Index]]:
        if not self.others:
            yield None, self.summary.index
            return
        for label, group in self.summary.groupby(self.others, sort=False):
            values = label if isinstance(label, tuple) else (label,)
            yield (
                ", ".join(f"{p}={v}" for p, v in zip(self.others, values, strict=True)),
                group.index,
            )

    def dress(self, ax: Axes) -> None:
        if self.unit == "category":
            ticks = list(dict.fromkeys(self.summary[self.parameter]))
            ax.set_xticks(range(len(ticks)), [str(t) for t in ticks], fontsize="x-small")
        elif self.log:
            ax.set_xscale("log")
        unit = f" ({self.unit})" if self.unit not in ("", "category") else ""
        ax.set_xlabel(f"{self.parameter}{unit}", fontsize="small")
        ax.grid(True, which="both", alpha=0.3)


def write_figures(summary: pd.DataFrame, study: Study, folder: Path) -> list[str]:
    """Write the study's figures into ``folder``; return the file names."""
    written: list[str] = []
    for parameter in study.parameters:
        if summary[parameter].nunique() < 2:
            continue
        curves = _Curves(summary, study, parameter)
        metrics = [m for m in study.metrics if summary[f"{metric_column(m)}.mean"].notna().any()]
        if metrics:
            written.append(_panels(summary, study, curves, metrics, folder))
        failing = [
            c
            for c in study.clauses
            if (summary[clause_column(c, "fail_fraction")].fillna(0.0) > 0).any()
        ]
        if failing:
            written.append(_clauses_figure(summary, study, curves, failing, folder))
        measured = [
            c for c in study.clauses if summary[clause_column(c, "measured.mean")].notna().any()
        ]
        if measured:
            written.append(_panels(summary, study, curves, measured, folder, clause_values=True))
    return written


def _panels(
    summary: pd.DataFrame,
    study: Study,
    curves: _Curves,
    names: list[str],
    folder: Path,
    clause_values: bool = False,
) -> str:
    """One panel per metric (or per clause: its measured value, its limit dashed)."""
    columns = min(_PANEL_COLUMNS, len(names))
    rows = math.ceil(len(names) / columns)
    fig = Figure(figsize=(3.6 * columns, 2.8 * rows))
    axes = fig.subplots(rows, columns, squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        column = clause_column(name, "measured") if clause_values else metric_column(name)
        mean = summary[f"{column}.mean"]
        ci = summary[f"{column}.ci"].fillna(0.0)
        for label, index in curves:
            ax.errorbar(
                curves.x[index],
                mean[index],
                yerr=ci[index],
                marker="o",
                ms=3,
                capsize=2,
                label=label,
            )
            if clause_values:
                limit = summary[clause_column(name, "limit.mean")]
                ax.plot(curves.x[index], limit[index], "k--", lw=1)
        curves.dress(ax)
        ax.set_title(
            f"{name} (measured; limit dashed)" if clause_values else name, fontsize="small"
        )
        ax.tick_params(labelsize="x-small")
    for ax in axes.flat[len(names) :]:
        ax.set_visible(False)
    if curves.others:
        axes.flat[0].legend(fontsize="xx-small")
    what = "clause values" if clause_values else "mean"
    fig.suptitle(f"{study.name}: {what} and 95 % interval per point", fontsize="medium")
    fig.tight_layout()
    name = file_name(curves.parameter, ".clause_values" if clause_values else "")
    fig.savefig(folder / name, dpi=90)
    return name


def _clauses_figure(
    summary: pd.DataFrame, study: Study, curves: _Curves, clauses: list[str], folder: Path
) -> str:
    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    for clause in clauses:
        fraction = summary[clause_column(clause, "fail_fraction")]
        low = fraction - summary[clause_column(clause, "fail_low")]
        high = summary[clause_column(clause, "fail_high")] - fraction
        for label, index in curves:
            name = clause if label is None else f"{clause} ({label})"
            ax.errorbar(
                curves.x[index],
                fraction[index],
                yerr=[low[index].fillna(0.0), high[index].fillna(0.0)],
                marker="o",
                ms=3,
                capsize=2,
                label=name,
            )
    curves.dress(ax)
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("fraction of runs failing")
    ax.set_title(f"{study.name}: clauses that failed (95 % Wilson bounds)", fontsize="medium")
    ax.legend(fontsize="x-small")
    fig.tight_layout()
    name = file_name(curves.parameter, ".clauses")
    fig.savefig(folder / name, dpi=90)
    return name

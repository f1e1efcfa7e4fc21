"""The ``sitssim`` command line: run, validate, clauses, sweep.

Exit codes: 0 every clause passed or was n/a; 1 a clause failed; 2 bad input
or usage; 3 an internal error (one line, plus the path of a log with the
traceback); 130 interrupted (Ctrl-C: one line, no partial results).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer
from rich.console import Console, Group
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from sitssim.errors import InputError, one_line
from sitssim.quantities import MAX_SEED

if TYPE_CHECKING:
    from sitssim.results.outdir import ResultsFolder
    from sitssim.scenario import Scenario

EXIT_OK, EXIT_CLAUSE_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
PROGRESS_AFTER_S = 1.0
MATRIX_WIDTH = 240

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Simulate a SITS2026 fabric and judge it clause by clause.",
)


def _width_off_terminal(stream: TextIO | None) -> int | None:
    """A pipe or a log has no width of its own: 120 columns keep the clause table whole,
    where rich would assume 80 (a terminal, or COLUMNS, decides for itself)."""
    isatty = getattr(stream, "isatty", None)
    if (isatty is not None and isatty()) or "COLUMNS" in os.environ:
        return None
    return 120


# soft_wrap: a message line must survive long paths and narrow terminals intact
# (tests and scripts grep it); only tables are laid out to the terminal width.
console = Console(highlight=False, soft_wrap=True, width=_width_off_terminal(sys.stdout))
err_console = Console(
    stderr=True, highlight=False, soft_wrap=True, width=_width_off_terminal(sys.stderr)
)


def _guarded(fn: Callable[..., int]) -> Callable[..., None]:
    """Map outcomes to exit codes; never let a traceback reach the user."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            code = fn(*args, **kwargs)
        except InputError as exc:
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
            raise typer.Exit(EXIT_BAD_INPUT) from None
        except typer.Exit:
            raise
        except KeyboardInterrupt as exc:
            # One line; typer would otherwise exit 130 silently (older versions: "Aborted!", 1).
            err_console.print(f"[bold red]interrupted:[/] {escape(str(exc) or 'nothing written')}")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:
            with tempfile.NamedTemporaryFile(
                "w", prefix="sitssim-crash-", suffix=".log", delete=False
            ) as log:
                traceback.print_exc(file=log)
            err_console.print(
                f"[bold red]internal error:[/] {type(exc).__name__}: "
                f"{escape(one_line(str(exc), 240))} "
                f"(log: {log.name})",
            )
            raise typer.Exit(EXIT_INTERNAL) from None
        raise typer.Exit(code)

    return wrapper


class _LazyProgress:
    """A progress bar that appears only for runs longer than a second, on a terminal."""

    def __init__(self) -> None:
        self._start = time.perf_counter()
        self._bar: Progress | None = None
        self._task = None

    def __call__(self, now_ns: float, horizon_ns: float) -> None:
        if self._bar is None:
            if time.perf_counter() - self._start < PROGRESS_AFTER_S:
                return
            if not err_console.is_terminal:
                return
            self._bar = Progress(
                TextColumn("simulating"),
                BarColumn(),
                TextColumn("{task.fields[t]}"),
                TimeElapsedColumn(),
                console=err_console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("sim", total=horizon_ns, t="")
        self._bar.update(
            self._task,
            total=horizon_ns,
            completed=min(now_ns, horizon_ns),
            t=f"{now_ns / 1e3:.1f} µs",
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.6g}"


_STYLE = {"pass": "green", "fail": "bold red", "n/a": "dim"}


def _clause_table(verdicts: list) -> Table:
    table = Table(title="SITS2026 clauses", title_justify="left")
    for column in ("clause", "verdict", "measured", "", "limit", "unit", "basis"):
        # The verdict and the figures it rests on never fold; the prose columns give way,
        # folding rather than cutting words (a log or a pipe gets 80 columns).
        table.add_column(column, no_wrap=column not in ("unit", "basis"), overflow="fold")
    for v in verdicts:
        table.add_row(
            v.id,
            f"[{_STYLE[v.verdict]}]{v.verdict}[/]",
            _fmt(v.measured),
            v.op if v.measured is not None else "",
            _fmt(v.limit),
            v.unit,
            v.basis if v.basis != "none" else "",
        )
    return table


def _headline(metrics: dict) -> Table:
    table = Table(title="Headline metrics", title_justify="left", show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    lat = metrics["data_latency_ns"]
    rtt = metrics["probe_rtt_ns"]
    rows = [
        ("messages delivered", f"{metrics['messages']}"),
        ("data latency mean / p99 (ns)", f"{_fmt(lat['mean'])} / {_fmt(lat['p99'])}"),
        ("zero-load bound mean (ns)", _fmt(metrics["data_zero_load_ns"]["mean"])),
        ("probe RTT p50 / p99 (ns)", f"{_fmt(rtt['p50'])} / {_fmt(rtt['p99'])}"),
        (
            "offered / delivered (GB/s)",
            f"{_fmt(metrics['offered_GBps'])} / {_fmt(metrics['delivered_GBps'])}",
        ),
        (
            "throughput bound (GB/s)",
            f"{_fmt(metrics['throughput_bound_GBps'])} ({metrics['throughput_bound_method']})",
        ),
        (
            "channel headroom",
            f"{_fmt(metrics['channel_headroom'])} ({metrics['bottleneck_channel'] or '-'})",
        ),
        ("max link utilisation", _fmt(metrics["max_link_utilisation"])),
        ("oracle latency violations", f"{metrics['oracle_latency_violations']}"),
        ("simulated time (µs)", _fmt(metrics["simulated_ns"] / 1e3)),
    ]
    link_layer = metrics.get("link_layer") or {}
    if link_layer.get("links_with_errors"):
        rows.append(
            (
                "flit replays / Recoveries",
                f"{link_layer['replays']} ({link_layer['replay_fraction']:.2%} of flits "
                f"re-sent) / {(metrics.get('phy') or {}).get('replay_recoveries', 0)}",
            )
        )
    if link_layer.get("credit_links"):
        rows.append(
            (
                "credit stalls (count / total µs)",
                f"{link_layer['credit_stalls']} / {_fmt(link_layer['credit_stall_ns'] / 1e3)}",
            )
        )
    for name, wl in metrics.get("inference", {}).items():
        ttft, tpot = (wl[k]["p50"] for k in ("ttft_ns", "tpot_ns"))
        us = [None if v is None else v / 1e3 for v in (ttft, tpot)]
        rows.append((f"{name}: TTFT / TPOT p50 (µs)", f"{_fmt(us[0])} / {_fmt(us[1])}"))
        rows.append((f"{name}: fabric share of decode", _fmt(wl["fabric_share_of_decode"])))
        rows.append(
            (
                f"{name}: launch share of decode ({wl['launch']['decode']})",
                _fmt(wl["launch_share_of_decode"]),
            )
        )
    for row in rows:
        table.add_row(*row)
    return table


@contextlib.contextmanager
def _interruptible(folder: ResultsFolder) -> Iterator[ResultsFolder]:
    """Hold ``folder`` for a command; on Ctrl-C, say what became of the results."""
    try:
        with folder:
            yield folder
    except KeyboardInterrupt:
        if folder.committed:
            note = f"results were written to {folder.out} before the interrupt"
        elif folder.had_results:
            note = f"no results written (the earlier results at {folder.out} are intact)"
        else:
            note = f"no results written to {folder.out}"
        raise KeyboardInterrupt(note) from None


ScenarioArg = Annotated[Path, typer.Argument(help="scenario YAML file", show_default=False)]
FidelityOption = Annotated[
    str | None,
    typer.Option(
        "--fidelity",
        help="packet or flow: override the scenario's fidelity (flow: max-min fair "
        "fluid flows, faster on light traffic, approximate)",
    ),
]


def _load_at(path: Path, fidelity: str | None) -> Scenario:
    """The scenario at ``path``, at ``--fidelity`` if given: ``validate`` and ``run`` check
    the same run (a flow-level one refuses workloads a packet-level one accepts)."""
    from sitssim.scenario import FIDELITIES, load_scenario

    if fidelity is not None and fidelity not in FIDELITIES:
        raise InputError(
            f"expected one of {', '.join(FIDELITIES)}, got {fidelity!r}", field="--fidelity"
        )
    loaded = load_scenario(path)
    return loaded if fidelity is None else loaded.updated(fidelity=fidelity)


@app.command()
@_guarded
def run(
    scenario: ScenarioArg,
    out: Annotated[
        Path | None, typer.Option("--out", help="output folder [default: out/<scenario name>]")
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", min=0, max=MAX_SEED, help="override the scenario's seed")
    ] = None,
    figures: Annotated[bool, typer.Option(help="write PNG figures")] = True,
    fidelity: FidelityOption = None,
) -> int:
    """Simulate SCENARIO, print every clause's verdict and write results to --out."""
    # Here and in every command: load first, then import the model, so bad input is
    # refused without paying a second or more for pandas, scipy, networkx and SimPy.
    loaded = _load_at(scenario, fidelity)
    from sitssim.results.outdir import ResultsFolder
    from sitssim.results.report import write_outputs
    from sitssim.simulation import simulate

    target = out if out is not None else Path("out") / loaded.name
    # The folder is checked and locked before simulating: no result is computed to be lost.
    with _interruptible(ResultsFolder(target, scenario)) as folder:
        progress = _LazyProgress()
        start = time.perf_counter()
        try:
            result = simulate(loaded, seed=seed, progress=progress)
        finally:
            progress.close()
        wall = time.perf_counter() - start
        write_outputs(result, folder.stage(), wall, figures=figures)
        folder.commit()
    console.print(_clause_table(result.verdicts))
    for v in result.failed:
        console.print(f"[bold red]FAIL[/] {v.id}: {v.detail}")
        for ev in v.evidence:
            if ev.rows:
                rows = ", ".join(map(str, ev.rows))
                more = f" (+{ev.total - len(ev.rows)} more)" if ev.total > len(ev.rows) else ""
                console.print(f"    evidence: {ev.table} rows {rows}{more}")
    console.print(_headline(result.metrics))
    if loaded.fidelity == "flow":
        console.print(
            "flow-level run: messages were max-min fair fluid flows; the clauses that need "
            "packet-level facts are n/a"
        )
    console.print(f"results: {target}/ (report.json, *.parquet, figures/) in {wall:.2f} s wall")
    return EXIT_CLAUSE_FAILED if result.failed else EXIT_OK


@app.command()
@_guarded
def validate(scenario: ScenarioArg, fidelity: FidelityOption = None) -> int:
    """Check SCENARIO as ``run`` would before simulating (schema, references, resources)."""
    loaded = _load_at(scenario, fidelity)
    from sitssim.preflight import preflight

    console.print(f"{scenario}: {preflight(loaded).summary()}")
    return EXIT_OK


@app.command()
@_guarded
def clauses(
    matrix: Annotated[
        bool,
        typer.Option(
            "--matrix",
            help="the conformance matrix: each clause's basis, witnesses and property tests",
        ),
    ] = False,
) -> int:
    """List every SITS2026 clause: ID, layer, whether it is modelled yet, and its text
    (with --matrix: its basis, witness scenarios and property tests)."""
    if matrix:
        # Off a terminal the matrix keeps whole rows (a witness's path on one line), where
        # the 120 columns that keep the clause table whole would fold every path.
        wide = _width_off_terminal(sys.stdout) is not None
        Console(highlight=False, soft_wrap=True, width=MATRIX_WIDTH if wide else None).print(
            _conformance_matrix()
        )
        return EXIT_OK
    from sitssim.spec.registry import CLAUSES

    table = Table(title="SITS2026 v1.2 clauses", title_justify="left")
    for column in ("clause", "layer", "§", "modelled", "rule"):
        table.add_column(column, no_wrap=column in ("clause", "§"))
    for c in CLAUSES.values():
        # The registry refused to import unless every modelled clause has its judge.
        table.add_row(c.id, c.layer, c.section, "yes" if c.modelled else "no", c.text)
    console.print(table)
    return EXIT_OK


def _conformance_matrix() -> Group:
    """The matrix, then why each witness that fails several clauses fails each."""
    from sitssim.spec.conformance import MATRIX_COLUMNS, matrix, multi_clause_witnesses

    table = Table(
        title="SITS2026 conformance matrix (witnesses under scenarios/, property tests "
        "under tests/properties/)",
        title_justify="left",
    )
    for column in MATRIX_COLUMNS:
        # The rule takes the width the other columns leave; a path or a test's name is
        # folded only on a terminal too narrow for it, never shortened to an ellipsis.
        table.add_column(column, overflow="fold", ratio=1 if column == "rule" else None)
    for row in matrix():
        table.add_row(*(escape(cell) for cell in row.cells("\n")))
    reasons = [
        f"{escape(path)} fails "
        + "; ".join(f"{clause} ({escape(why)})" for clause, why in fails.items())
        for path, fails in multi_clause_witnesses().items()
    ]
    return Group(table, "", *reasons)


diag_app = typer.Typer(no_args_is_help=True, help="Diagnostics that exercise one mechanism.")
app.add_typer(diag_app, name="diag")


@diag_app.command("reset")
@_guarded
def diag_reset(
    scenario: ScenarioArg,
    latency_threshold: Annotated[
        str, typer.Option("--latency-threshold", help="reset-to-L0 budget per link")
    ] = "200us",
    links: Annotated[
        str, typer.Option("--links", help="'all' or link names, e.g. gpu0-sw1.0,rc0-sw2.0")
    ] = "all",
) -> int:
    """Reset the chosen links of SCENARIO and report each one's time to L0 (exit 1 if late)."""
    from sitssim.scenario import load_scenario

    loaded = load_scenario(scenario)
    from sitssim.phy.diag import parse_threshold
    from sitssim.stages.reset import reset_links

    threshold_ns = parse_threshold(latency_threshold)
    rows = reset_links(loaded, threshold_ns, links)
    table = Table(title=f"Reset to L0 (budget {latency_threshold})", title_justify="left")
    for column in ("link", "L0 entry (µs)", "EQ iterations", "presets tried", "result"):
        table.add_column(column, justify="left" if column in ("link", "result") else "right")
    for r in rows:
        table.add_row(
            r.link,
            f"{r.l0_us:.2f}" if r.l0_us != float("inf") else "never",
            str(r.eq_iterations),
            str(r.presets_tried),
            "[green]pass[/]" if r.passed else "[bold red]FAIL[/]",
        )
    console.print(table)
    failed = [r for r in rows if not r.passed]
    console.print(f"{len(rows) - len(failed)} of {len(rows)} links reached L0 within budget")
    return EXIT_CLAUSE_FAILED if failed else EXIT_OK


class _SweepProgress:
    """Points done, failures and the time left, on a terminal."""

    def __init__(self) -> None:
        self._bar: Progress | None = None
        self._task = None

    def __call__(self, done: int, failed: int, total: int) -> None:
        if self._bar is None:
            if not err_console.is_terminal:
                return
            self._bar = Progress(
                TextColumn("points"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[failed]} failed"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=err_console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("sweep", total=total, failed=0)
        self._bar.update(self._task, total=total, completed=done, failed=failed)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


@app.command()
@_guarded
def sweep(
    study: Annotated[Path, typer.Argument(help="study YAML file", show_default=False)],
    out: Annotated[
        Path | None, typer.Option("--out", help="sweep folder [default: out/<study name>]")
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="processes [default: every core]")
    ] = None,
    backend: Annotated[str, typer.Option("--backend", help="local or dask")] = "local",
    scheduler: Annotated[
        str | None,
        typer.Option("--scheduler", help="a Dask scheduler's address (tcp://host:8786)"),
    ] = None,
    figures: Annotated[bool, typer.Option(help="write PNG figures")] = True,
) -> int:
    """Run every point of STUDY, keep each as it finishes in --out, summarise and plot.

    Re-running the same study reuses the finished points and runs the rest. Exit 0 when
    every clause passed in every run, 1 when a clause failed in some run, 3 when a point
    raised (recorded in its row, with the error).
    """
    from sitssim.sweeps.backends import BACKENDS
    from sitssim.sweeps.study import load_study

    if backend not in BACKENDS:
        raise InputError(
            f"expected one of {', '.join(BACKENDS)}, got {backend!r}", field="--backend"
        )
    if scheduler is not None and backend != "dask":
        raise InputError(
            "--scheduler names a Dask cluster: add --backend dask", field="--scheduler"
        )
    loaded = load_study(study)
    target = out if out is not None else Path("out") / loaded.name
    return _sweep_and_report(loaded, target, workers, backend, scheduler, figures)


def _sweep_and_report(
    loaded: Any,
    target: Path,
    workers: int | None,
    backend: str,
    scheduler: str | None,
    figures: bool,
) -> int:
    """Sweep a loaded study into ``target`` with a progress bar; say what ran and failed."""
    from sitssim.sweeps.rows import STATUS_OK
    from sitssim.sweeps.run import sweep as run_sweep

    progress = _SweepProgress()
    start = time.perf_counter()
    try:
        points = run_sweep(
            loaded,
            target,
            workers=workers,
            backend=backend,  # type: ignore[arg-type]
            scheduler=scheduler,
            figures=figures,
            progress=progress,
        )
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"the points finished so far are kept in {target}/points/; run again to go on"
        ) from None
    finally:
        progress.close()
    wall = time.perf_counter() - start
    errors = points[points["status"] != STATUS_OK]
    verdicts = points[[c for c in points.columns if c.endswith(".verdict")]]
    failing = sorted(
        c.removeprefix("clauses.").removesuffix(".verdict")
        for c in verdicts.columns
        if (verdicts[c] == "fail").any()
    )
    console.print(
        f"{len(points)} points ({points['point'].nunique()} parameter combinations x "
        f"{loaded.replications} replications) in {wall:.1f} s wall; {len(errors)} raised"
    )
    for row in errors.itertuples():
        console.print(f"[bold red]ERROR[/] point {row.point} seed {row.seed}: {escape(row.error)}")
    if failing:
        console.print(f"clauses failing in some run: {', '.join(failing)}")
    console.print(f"results: {target}/points/, {target}/summary.parquet, {target}/figures/")
    if len(errors):
        return EXIT_INTERNAL
    return EXIT_CLAUSE_FAILED if failing else EXIT_OK


study_app = typer.Typer(no_args_is_help=True, help="What-if studies over one scenario.")
app.add_typer(study_app, name="study")


@study_app.command("ber-latency")
@_guarded
def study_ber_latency(
    scenario: ScenarioArg,
    out: Annotated[
        Path | None, typer.Option("--out", help="sweep folder [default: out/<name>-ber]")
    ] = None,
    ber: Annotated[
        str, typer.Option("--ber", help="comma-separated pre-FEC BERs")
    ] = "1e-8,1e-7,1e-6,1e-5,1e-4",
    min_replays: Annotated[
        int, typer.Option("--min-replays", min=1, help="replays a point must expect")
    ] = 100,
    max_duration: Annotated[
        str | None, typer.Option("--max-duration", help="longest run per point [16 x duration]")
    ] = None,
    replications: Annotated[
        int, typer.Option("--replications", min=1, max=1000, help="seeds per BER")
    ] = 3,
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="processes [default: every core]")
    ] = None,
    figures: Annotated[bool, typer.Option(help="write PNG figures")] = True,
) -> int:
    """Latency percentiles (means and 95 % intervals over seeds) against every flit link's
    pre-FEC BER, each run sized to expect --min-replays replays, swept as a study."""
    from sitssim.scenario import load_scenario
    from sitssim.units import UnitError, parse_time_ns

    try:
        bers = tuple(float(b) for b in ber.split(","))
        cap = parse_time_ns(max_duration) if max_duration is not None else None
    except (ValueError, UnitError) as exc:
        raise InputError(
            f"expected BERs like 1e-6,1e-5 and a time like 2ms: {exc}", field="--ber/--max-duration"
        ) from None
    if not all(0 < b <= 1 for b in bers):
        raise InputError("every BER must lie in (0, 1]", field="--ber")
    if len(set(bers)) != len(bers):
        raise InputError("every BER must be given once", field="--ber")
    loaded = load_scenario(scenario)
    from sitssim.studies.ber_latency import size_points, study_text
    from sitssim.sweeps.study import load_study

    sized = size_points(loaded, bers, min_replays=min_replays, max_duration_ns=cap)
    name = f"{loaded.name}-ber"
    target = out if out is not None else Path("out") / name
    view = Table(title=f"Run length per pre-FEC BER ({min_replays} replays expected)")
    for column in ("BER", "run (µs)", "replays expected", "note"):
        view.add_column(column, justify="right")
    for point in sized:
        view.add_row(
            f"{point.pre_fec_ber:.0e}",
            f"{point.duration_ns / 1e3:.0f}",
            f"{point.expected_replays:.3g}",
            point.status,
        )
    console.print(view)
    with tempfile.TemporaryDirectory(prefix="sitssim-ber-") as tmp:
        path = Path(tmp) / f"{name}.yaml"
        path.write_text(
            study_text(scenario, name, sized, replications, min_replays), encoding="utf-8"
        )
        study = load_study(path)
        return _sweep_and_report(study, target, workers, "local", None, figures)


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except typer.TyperException as exc:
        # A usage error (unknown option, --seed out of range): one line like every other
        # exit 2, where typer would draw a multi-line panel. No message: help was shown.
        if message := exc.format_message():
            err_console.print(f"error: {escape(one_line(message, 240))} (sitssim --help for usage)")
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(EXIT_CLAUSE_FAILED)
    except KeyboardInterrupt:
        # Only reached before a command starts (commands report their own interrupts).
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(code if isinstance(code, int) else EXIT_OK)

"""Where points run: this process, a local process pool, or a Dask cluster.

Every backend takes the points to run and yields ``(point, record)`` as each finishes,
in whatever order they finish; the caller stores each at once. A point is a pure
function of its scenario and seed (``rows.run_point``), so the backends differ only in
where that function runs, never in what a record holds.

* ``local`` with one worker runs the points here, one after another.
* ``local`` with more: a ``ProcessPoolExecutor`` of spawned processes (a notebook
  kernel's threads make fork unsafe), each with one BLAS thread, so that N workers use N
  cores and no more. A worker that dies (killed, out of memory) breaks the pool: the
  points that were running are run again, each alone in a new pool, and one that breaks
  that pool too is recorded as an error rather than tried forever.
* ``dask``: a ``distributed.LocalCluster`` of ``workers`` single-threaded worker
  processes, or the cluster at ``scheduler`` (its workers need sitssim installed). Dask
  reruns the tasks of a lost worker itself and gives up on a task that kills several
  (``KilledWorker``), which is recorded as that point's error.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Literal

from sitssim import __version__
from sitssim.errors import InputError, one_line
from sitssim.sweeps.points import Point
from sitssim.sweeps.rows import ERROR_CHARS, STATUS_ERROR, run_point

Backend = Literal["local", "dask"]
BACKENDS: tuple[Backend, ...] = ("local", "dask")
_BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

Finished = Iterator[tuple[Point, dict[str, Any]]]


def error_record(point: Point, error: str) -> dict[str, Any]:
    """The record of a point that did not finish (its worker died, its task was lost)."""
    return {
        "key": point.key,
        "status": STATUS_ERROR,
        "error": one_line(error, ERROR_CHARS),
        "wall_s": float("nan"),
        "sitssim_version": __version__,
        "scenario_sha256": point.scenario_sha256,
        "metrics_json": "{}",
        "clauses_json": "{}",
    }


def run_points(
    points: Sequence[Point],
    backend: Backend = "local",
    workers: int | None = None,
    scheduler: str | None = None,
) -> Finished:
    """Run ``points`` (module docstring); ``workers`` defaults to every core."""
    n = workers if workers is not None else (os.cpu_count() or 1)
    if backend == "dask":
        yield from _dask(points, n, scheduler)
    elif scheduler is not None:
        raise InputError("--scheduler is the address of a Dask cluster", field="--backend")
    elif n <= 1 or len(points) <= 1:
        for point in points:
            yield point, run_point(point)
    else:
        yield from _pool(points, n)


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Workers spawned inside inherit one BLAS thread each (a pool sized to the cores
    would otherwise run cores-squared threads)."""
    saved = {name: os.environ.get(name) for name in _BLAS_THREADS}
    for name in _BLAS_THREADS:
        os.environ[name] = "1"
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _pool(points: Sequence[Point], workers: int) -> Finished:
    queue = deque(points)
    suspects: deque[Point] = deque()
    context = multiprocessing.get_context("spawn")
    while queue or suspects:
        with _one_blas_thread():
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
        try:
            if suspects:
                # Run alone, a point that breaks the pool is the one that kills its worker.
                point = suspects.popleft()
                try:
                    record = pool.submit(run_point, point).result()
                except BrokenProcessPool:
                    record = error_record(point, "its worker process died while it ran alone")
                yield point, record
                continue
            # As many points in flight as workers, so that a breakage suspects only the
            # points that were running.
            running: dict[Future, Point] = {}
            while queue or running:
                while queue and len(running) < workers:
                    point = queue.popleft()
                    running[pool.submit(run_point, point)] = point
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                broken = False
                for future in sorted(done, key=lambda f: _order(running[f])):
                    point = running.pop(future)
                    try:
                        record = future.result()
                    except BrokenProcessPool:
                        suspects.append(point)
                        broken = True
                        continue
                    yield point, record
                if broken:
                    suspects.extend(sorted(running.values(), key=_order))
                    break
        finally:
            # On an early exit (an interrupt, a caller that stops reading) nothing queued
            # is started; what runs is left to finish in its process.
            pool.shutdown(wait=False, cancel_futures=True)


def _order(point: Point) -> tuple[int, int]:
    return point.index, point.replication


def _dask(points: Sequence[Point], workers: int, scheduler: str | None) -> Finished:
    from distributed import Client, LocalCluster, as_completed

    with contextlib.ExitStack() as stack:
        if scheduler is None:
            cluster = stack.enter_context(
                LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
            )
            client = stack.enter_context(Client(cluster))
        else:
            try:
                client = stack.enter_context(Client(scheduler, timeout="10s"))
            except (OSError, TimeoutError, ValueError) as exc:
                raise InputError(
                    f"no Dask scheduler answered at {scheduler}: {exc}", field="--scheduler"
                ) from None
        futures = {
            client.submit(run_point, p, key=f"sitssim-point-{p.key}", pure=False): p for p in points
        }
        for future in as_completed(futures):
            point = futures[future]
            try:
                record = future.result()
            except Exception as exc:
                yield point, error_record(point, f"{type(exc).__name__}: {exc}")
                continue
            yield point, record

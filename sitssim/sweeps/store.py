"""A sweep's folder: finished points kept one file each, so that no finished work is lost.

Theory of operation. ``--out DIR`` of a sweep grows as points finish and is read again
by the next sweep of the same study, so unlike a run's results folder it is never
replaced whole. It holds::

    .sitssim-sweep          the marker: written first, names the study; its presence
                            is what lets a later sweep write here
    .sitssim-sweep.lock     an exclusive flock while a sweep writes (its PID inside)
    study.yaml              a copy of the study file the points came from
    points/<key>.parquet    one finished point each: pandas.read_parquet(DIR / "points")
    superseded/             points of earlier versions of the study, moved out of points/
    summary.parquet, figures/

A point file is written under a dot name in ``points/`` (``.<key>.<pid>.tmp``, which
parquet readers skip) and renamed over its final name in one ``os.replace``: a kill at
any instant leaves the point finished whole or not at all, and the tmp file is removed
by the next sweep, which holds the lock, so no writer can own it. Only the parent process
writes; workers return records. A folder that exists, holds more than a lock and has no
marker, or holds a run's results, is refused: sitssim never writes into what it did not
make, and deletes only its own tmp files and the figures its marker lists.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from sitssim import __version__
from sitssim.errors import InputError
from sitssim.sweeps.rows import RECORD_FIELDS
from sitssim.sweeps.study import Study

MARKER = ".sitssim-sweep"
LOCK = ".sitssim-sweep.lock"
RUN_MARKER = ".sitssim-results"
POINTS, SUPERSEDED, FIGURES = "points", "superseded", "figures"
SUMMARY = "summary.parquet"
_POINT = re.compile(r"[0-9a-f]{32}\.parquet")
_TMP = re.compile(r"\.([0-9a-f]{32}|summary|sitssim-sweep)\.\d+\.tmp")


def _replace(final: Path, write: Callable[[Path], object]) -> None:
    """``write`` a file under its dot-named tmp name beside ``final`` (``.<stem>.<pid>.tmp``,
    which ``_TMP`` knows), then rename it over ``final`` in one step."""
    tmp = final.with_name(f".{final.stem.lstrip('.')}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, final)


def _refuse(out: Path, message: str) -> InputError:
    return InputError(message, file=str(out), field="--out")


class SweepFolder:
    """``out`` held for one sweep of ``study`` (module docstring)."""

    def __init__(self, out: Path, study: Study) -> None:
        self.out = out
        self.study = study
        self._lock: int | None = None

    # --- holding the folder ------------------------------------------------------

    def __enter__(self) -> SweepFolder:
        out = self.out
        if out.is_symlink() or (out.exists() and not out.is_dir()):
            raise _refuse(out, "exists and is not a folder: expected a folder for the sweep")
        if out.exists():
            if (out / RUN_MARKER).exists():
                raise _refuse(out, "holds the results of a run, not a sweep: choose another --out")
            # A sweep takes the lock before it writes the marker, so a folder holding
            # only the lock is one being started: the flock below names its owner.
            if not (out / MARKER).is_file() and any(e.name != LOCK for e in out.iterdir()):
                raise _refuse(
                    out, "is not empty and no sweep wrote it: choose an empty or new folder"
                )
        try:
            out.mkdir(parents=True, exist_ok=True)
            fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _refuse(out, f"cannot be written: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise _refuse(out, f"another sweep (PID {owner}) is writing here") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock = fd
        if not (out / MARKER).is_file():
            self._write_marker([])
        (out / POINTS).mkdir(exist_ok=True)
        for folder in (out / POINTS, out):
            for entry in folder.iterdir():
                if _TMP.fullmatch(entry.name):
                    entry.unlink()
        copy = out / "study.yaml"
        if not (copy.exists() and os.path.samefile(self.study.path, copy)):
            shutil.copyfile(self.study.path, copy)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def _marker(self) -> dict[str, Any]:
        try:
            data = json.loads((self.out / MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write_marker(self, figures: list[str]) -> None:
        marker = {
            "sitssim": __version__,
            "study": self.study.name,
            "study_file": str(self.study.path),
            "figures": figures,
        }
        text = json.dumps(marker, indent=2) + "\n"
        _replace(self.out / MARKER, lambda tmp: tmp.write_text(text, encoding="utf-8"))

    # --- points ------------------------------------------------------------------

    def records(self) -> dict[str, tuple[dict[str, Any], pa.Schema]]:
        """Every point file's record (``rows.RECORD_FIELDS``) and the columns it was
        written with, by key."""
        found = {}
        for entry in sorted((self.out / POINTS).iterdir()):
            if not _POINT.fullmatch(entry.name):
                continue
            try:
                stored = pq.read_table(entry)
                row = stored.slice(0, 1).to_pylist()[0]
                record = {name: row[name] for name in RECORD_FIELDS}
            except (OSError, pa.ArrowException, KeyError, IndexError):
                # Not a point sitssim finished (every finished one is whole): run it again.
                continue
            found[entry.stem] = (record, stored.schema)
        return found

    def write_point(self, key: str, row: pa.Table) -> None:
        """Store one finished point atomically (module docstring)."""
        _replace(self.out / POINTS / f"{key}.parquet", lambda tmp: pq.write_table(row, tmp))

    def supersede(self, keep: set[str]) -> int:
        """Move the point files whose keys are not in ``keep`` out of ``points/``, so that
        ``points/`` holds exactly the current study; return how many moved."""
        moved = 0
        for entry in sorted((self.out / POINTS).iterdir()):
            if _POINT.fullmatch(entry.name) and entry.stem not in keep:
                (self.out / SUPERSEDED).mkdir(exist_ok=True)
                os.replace(entry, self.out / SUPERSEDED / entry.name)
                moved += 1
        return moved

    # --- what is made from the points ---------------------------------------------

    def write_summary(self, summary: pa.Table) -> None:
        _replace(self.out / SUMMARY, lambda tmp: pq.write_table(summary, tmp))

    @contextlib.contextmanager
    def figures(self) -> Iterator[list[str]]:
        """The figures folder, for a list of the file names written there: the ones the
        previous sweep listed and this one did not write are removed after."""
        folder = self.out / FIGURES
        folder.mkdir(exist_ok=True)
        written: list[str] = []
        yield written
        old = self._marker().get("figures", [])
        for name in old if isinstance(old, list) else []:
            if isinstance(name, str) and name not in written and "/" not in name:
                with contextlib.suppress(FileNotFoundError):
                    (folder / name).unlink()
        self._write_marker(sorted(written))

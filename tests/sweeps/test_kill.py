"""``sitssim sweep`` SIGKILLed mid-sweep, in a real process: every point file left is a
whole table, a second sweep is refused while the first holds the folder, and a re-run
finishes the rest, every point exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from sweeps.sweep_helpers import DIRECT_RC, write_study
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.errors import InputError
from sitssim.sweeps.points import expand
from sitssim.sweeps.store import SweepFolder
from sitssim.sweeps.study import load_study

LOADS = [0.1, 0.2, 0.3, 0.4]
REPLICATIONS = 2
# A point of 100 us on this base runs in about a third of a second: the six left when
# the kill lands are seconds of work, against a poll every 10 ms.
DURATION = "100us"
SERIAL = ("--workers", "1", "--no-figures")


def wait_for(condition, proc: subprocess.Popen[str], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the sweep ended (exit {proc.returncode}) before {what}: {out}{err}")
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


def as_stored(paths: list[Path]) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_ino, p.read_bytes()) for p in paths}


def test_a_sweep_killed_mid_way_leaves_whole_points_and_a_rerun_completes_it(
    tmp_path: Path,
) -> None:
    path = write_study(
        tmp_path / "kill.yaml",
        f"base: {DIRECT_RC}\n"
        "parameters:\n"
        f"  duration: [{DURATION}]\n"
        f"  workloads.0.load: [{', '.join(map(str, LOADS))}]\n"
        f"replications: {REPLICATIONS}\n"
        "metrics: [messages, delivered_GBps]\n",
    )
    out = tmp_path / "out"
    points_dir = out / "points"
    study = load_study(path)
    keys = {p.key for p in expand(study)}
    assert len(keys) == len(LOADS) * REPLICATIONS
    proc = subprocess.Popen(
        [sys.executable, "-m", "sitssim", "sweep", str(path), "--out", str(out), *SERIAL],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    try:
        lock = out / ".sitssim-sweep.lock"

        def holds_lock() -> bool:
            try:
                return lock.read_text().strip() == str(proc.pid)
            except FileNotFoundError:
                return False

        wait_for(holds_lock, proc, "it took the folder's lock")
        # While it runs, a second sweep cannot hold the folder: refused at once, naming it.
        with pytest.raises(InputError) as err, SweepFolder(out, study):
            pass
        assert err.value.field == "--out"
        assert f"another sweep (PID {proc.pid}) is writing here" in err.value.message

        wait_for(lambda: len(list(points_dir.glob("*.parquet"))) >= 2, proc, "2 points were done")
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    # What the kill left: whole point files under their final names, at most a dot-named
    # tmp file besides them, and fewer than all the points.
    left = sorted(p for p in points_dir.iterdir() if not p.name.startswith("."))
    assert 2 <= len(left) < len(keys)
    for entry in left:
        assert entry.suffix == ".parquet" and entry.stem in keys, entry.name
        row = pq.read_table(entry).to_pylist()
        assert len(row) == 1 and row[0]["key"] == entry.stem and row[0]["status"] == "ok"
    assert all(p.name.endswith(".tmp") for p in points_dir.iterdir() if p.name.startswith("."))
    finished = as_stored(left)

    rerun = CliRunner().invoke(app, ["sweep", str(path), "--out", str(out), *SERIAL])
    assert rerun.exit_code in (0, 1), rerun.output
    assert f"{len(keys)} points ({len(LOADS)} parameter combinations x 2" in rerun.stdout
    entries = sorted(points_dir.iterdir())
    assert len(entries) == len(keys), [p.name for p in entries]  # and no tmp file left
    assert {p.stem for p in entries} == keys
    stored = pd.read_parquet(points_dir)
    pairs = list(zip(stored["point"], stored["replication"], strict=True))
    assert len(set(pairs)) == len(pairs)
    assert set(pairs) == {(i, r) for i in range(len(LOADS)) for r in range(REPLICATIONS)}
    assert (stored["status"] == "ok").all()
    # The points finished before the kill were reused as they were, not run again.
    assert as_stored([points_dir / name for name in finished]) == finished

"""``--out`` in real processes: Ctrl-C, SIGKILL while results are replaced, two runs at once.

Each test starts ``python -m sitssim`` (or a small driver of ``write_results``) as a separate
process, so the signals, the ``flock`` and the dead-owner checks are the real ones.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.results.outdir import MARKER

ROOT = Path(__file__).resolve().parents[1]
BASE = (ROOT / "scenarios" / "direct_rc_4gpu.yaml").read_text(encoding="utf-8")
runner = CliRunner()


def scenario(folder: Path, duration: str) -> Path:
    path = folder / f"direct_{duration}.yaml"
    path.write_text(BASE.replace("duration: 200us", f"duration: {duration}"), encoding="utf-8")
    return path


def files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def earlier(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A results folder from an earlier, complete run, and its bytes."""
    out = tmp_path / "results" / "out"
    result = runner.invoke(
        app, ["run", str(scenario(tmp_path, "2us")), "--out", str(out), "--no-figures"]
    )
    assert result.exit_code == 0, result.output
    return out, files(out)


def start_long_run(tmp_path: Path, out: Path) -> subprocess.Popen[str]:
    """A run that simulates for several seconds, returned once it holds the lock on ``out``."""
    long = scenario(tmp_path, "20ms")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sitssim", "run", str(long), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lock = out.with_name(f".{out.name}.sitssim-lock")
    deadline = time.monotonic() + 60
    while not (lock.exists() and lock.read_text().strip() == str(proc.pid)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never took the lock"
        time.sleep(0.02)
    return proc


def test_ctrl_c_exits_130_with_one_line_and_the_earlier_results_intact(
    tmp_path: Path, earlier: tuple[Path, dict[str, bytes]]
) -> None:
    out, before = earlier
    proc = start_long_run(tmp_path, out)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert stdout == ""
    assert stderr.splitlines() == [
        f"interrupted: no results written (the earlier results at {out} are intact)"
    ]
    assert files(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"]


def test_a_second_run_to_the_same_folder_exits_2_at_once_naming_the_first(
    tmp_path: Path, earlier: tuple[Path, dict[str, bytes]]
) -> None:
    out, before = earlier
    first = start_long_run(tmp_path, out)
    try:
        start = time.perf_counter()
        second = runner.invoke(
            app, ["run", str(scenario(tmp_path, "2us")), "--out", str(out), "--no-figures"]
        )
        waited = time.perf_counter() - start
    finally:
        first.kill()
        first.communicate(timeout=30)
    assert second.exit_code == 2, second.output
    assert second.stderr.strip() == (
        f"error: {out}: --out: another sitssim run (pid {first.pid}) is writing here"
    )
    assert waited < 5
    assert files(out) == before
    # The killed run left at most its lock file; the next run takes over and tidies up.
    again = runner.invoke(
        app, ["run", str(scenario(tmp_path, "2us")), "--out", str(out), "--no-figures"]
    )
    assert again.exit_code == 0, again.output
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"]


# The driver simulates two seeds once, then forks a child per write (the parent never writes
# parquet itself, so no Arrow threads exist at the fork) and SIGKILLs it after a random delay
# spread over two writes' time. After each kill it reports what ``out`` holds.
DRIVER = r"""
import json, os, random, signal, sys, time
from pathlib import Path
from sitssim.results.report import write_results
from sitssim.scenario import load_scenario
from sitssim.simulation import simulate
import pyarrow.parquet, sitssim.results.trace, sitssim.results.vcd  # imported once, not per child

scenario, out, kills = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
loaded = load_scenario(scenario)
results = {seed: simulate(loaded, seed=seed) for seed in (1, 2)}

def write(seed, delay=None):
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            write_results(results[seed], out, 1.0, figures=False)
            code = 0
        finally:
            os._exit(code)
    if delay is not None:
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
    status = os.waitpid(pid, 0)[1]
    assert delay is not None or status == 0, status
    return time.perf_counter() - start

def state():
    if not out.is_dir():
        return {"whole": False, "seed": None}
    present = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    marker = json.loads((out / ".sitssim-results").read_text())
    seed = json.loads((out / "report.json").read_text())["seed"]
    whole = sorted(marker["files"] + [".sitssim-results"]) == present and len(present) > 10
    return {"whole": whole, "seed": seed}

write(1)
span = write(1)  # the first write pays one-off costs; the second is a typical one
rng = random.Random(20260)
# One random instant in each of `kills` equal slices of two writes, so some land after the swap.
delays = [2.0 * span * (i + rng.random()) / kills for i in range(kills)]
rng.shuffle(delays)
current = 1
for delay in delays:
    target = 2 if current == 1 else 1
    write(target, delay)
    now = state()
    print(json.dumps({"delay": delay, "span": span, "before": current, "target": target, **now}))
    current = now["seed"] if now["seed"] is not None else current
write(current)
print(json.dumps({"final": sorted(p.name for p in out.parent.iterdir())}))
"""


def test_sigkill_at_random_instants_while_replacing_leaves_old_or_new_whole(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results" / "out"
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(scenario(tmp_path, "2us")), str(out), "8"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert proc.returncode == 0, proc.stderr
    *kills, final = (json.loads(line) for line in proc.stdout.splitlines())
    assert len(kills) == 8
    for kill in kills:
        assert kill["whole"], kill
        assert kill["seed"] in (kill["before"], kill["target"]), kill
    replaced = sum(kill["seed"] == kill["target"] for kill in kills)
    assert 0 < replaced < len(kills), kills
    assert final == {"final": ["out"]}
    assert (out / MARKER).is_file()

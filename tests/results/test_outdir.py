"""The results folder's lifecycle (``sitssim.results.outdir``): refusals, lock, recovery, commit.

The crash tests fork a child that replaces old results and dies (``os._exit``, no cleanup, as
under SIGKILL) before or after each filesystem step in turn; the parent then checks that the
target holds the old or the new results whole, and that the next run leaves it whole and tidy.
The children only move small files, so forking the test process is safe.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sitssim.errors import InputError
from sitssim.results import outdir
from sitssim.results.outdir import (
    MARKER,
    ResultsFolder,
    check_out_target,
    foreign_entry,
    interrupts_deferred,
    owner_alive,
    recover,
)

OLD = {"report.json": '{"run": "old"}\n', "a.parquet": "old-a", "figures/x.png": "old-x"}
NEW = {"report.json": '{"run": "new"}\n', "b.parquet": "new-b", "figures/y.png": "new-y"}


def commit(out: Path, files: dict[str, str]) -> None:
    """A complete run to ``out`` that writes ``files``."""
    with ResultsFolder(out) as folder:
        staging = folder.stage()
        for name, text in files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_text(text)
        folder.commit()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def whole(folder: Path) -> str | None:
    """'old' or 'new' if ``folder`` holds exactly that run's files and its marker, else None."""
    if not folder.is_dir():
        return None
    files = snapshot(folder)
    marker = json.loads(files.pop(MARKER, b"null"))
    for label, expected in (("old", OLD), ("new", NEW)):
        wanted = {k: v.encode() for k, v in expected.items()}
        if files == wanted and marker is not None and sorted(marker["files"]) == sorted(wanted):
            return label
    return None


def siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name != out.name)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def refused(out: Path, scenario: Path | None = None) -> str:
    with pytest.raises(InputError) as info:
        check_out_target(out, scenario)
    assert info.value.field == "--out"
    return str(info.value)


# --- check_out_target: what is refused ----------------------------------------------------------


@pytest.mark.parametrize("given", [".", "..", ""], ids=["dot", "dotdot", "empty"])
def test_current_folder_and_parent_spellings_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.yaml").write_text("mine")
    monkeypatch.chdir(work)
    message = refused(Path(given))
    assert "current folder or its parents" in message
    assert snapshot(tmp_path) == {"work/keep.yaml": b"mine"}


def test_cwd_and_any_folder_above_it_are_refused_however_spelt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    for spelling in (deep, tmp_path / "a", tmp_path, Path("../b"), Path("/")):
        assert "current folder or its parents" in refused(spelling)


def test_the_scenarios_folder_and_folders_holding_it_are_refused(tmp_path: Path) -> None:
    scenario = tmp_path / "project" / "scenarios" / "s.yaml"
    scenario.parent.mkdir(parents=True)
    scenario.write_text("x")
    for out in (scenario.parent, tmp_path / "project"):
        assert f"folder that holds {scenario}" in refused(out, scenario)
    check_out_target(tmp_path / "project" / "results", scenario)


def test_a_folder_of_someone_elses_files_is_refused_and_left_byte_identical(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "thesis.tex").write_bytes(b"\x00precious\xff")
    (data / "sub" / "report.json").write_text('{"not": "sitssim"}')
    before = snapshot(data)
    assert "not a sitssim results folder" in refused(data)
    with pytest.raises(InputError):
        commit(data, NEW)
    assert snapshot(data) == before
    assert siblings(data) == []


def test_results_with_an_extra_file_or_a_broken_marker_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    commit(out, OLD)
    assert foreign_entry(out) is None
    (out / "figures" / "notes.txt").write_text("mine")
    assert "holds figures/notes.txt, which sitssim did not write" in refused(out)
    (out / "figures" / "notes.txt").unlink()
    check_out_target(out)
    (out / MARKER).write_text("not json")
    assert "not a sitssim results folder" in refused(out)


def test_a_file_a_symlink_and_a_dangling_symlink_are_refused(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("precious")
    assert "exists and is not a directory" in refused(file)
    assert file.read_text() == "precious"
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    assert "dangling symbolic link" in refused(dangling)
    assert "dangling symbolic link" in refused(dangling / "out")
    assert not (tmp_path / "nowhere").exists()
    results = tmp_path / "results"
    commit(results, OLD)
    link = tmp_path / "link"
    link.symlink_to(results)
    assert "is a symbolic link" in refused(link)


@pytest.mark.parametrize("length", [300, 220], ids=["over-NAME_MAX", "no-room-for-staging"])
def test_a_name_too_long_for_itself_or_its_staging_folder_is_refused(
    tmp_path: Path, length: int
) -> None:
    message = refused(tmp_path / ("r" * length))
    assert "name is longer than" in message
    assert list(tmp_path.iterdir()) == []
    check_out_target(tmp_path / ("r" * (255 - outdir.SIBLING_EXTRA)))


def test_a_missing_parent_with_a_name_over_name_max_is_refused(tmp_path: Path) -> None:
    assert "longer than" in refused(tmp_path / ("d" * 300) / "out")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_a_read_only_parent_is_refused_before_anything_runs(tmp_path: Path) -> None:
    parent = tmp_path / "ro"
    parent.mkdir(mode=0o500)
    assert "cannot write to" in refused(parent / "out")


def test_a_parent_that_cannot_take_files_is_refused_when_claimed() -> None:
    with (
        pytest.raises(InputError, match="cannot write to /proc"),
        ResultsFolder(Path("/proc/sitssim-out")),
    ):
        pass


@pytest.mark.parametrize("state", ["missing", "empty", "results", "missing-parents"])
def test_new_empty_and_results_folders_are_accepted(tmp_path: Path, state: str) -> None:
    out = tmp_path / "out"
    if state == "empty":
        out.mkdir()
    elif state == "results":
        commit(out, OLD)
    elif state == "missing-parents":
        out = tmp_path / "a" / "b" / "out"
    check_out_target(out)
    commit(out, NEW)
    assert whole(out) == "new"
    assert siblings(out) == []


# --- commit, permissions, failure cleanup -------------------------------------------------------


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o755), (0o027, 0o750), (0o002, 0o775)])
def test_results_and_created_parents_follow_the_umask(
    tmp_path: Path, umask: int, mode: int
) -> None:
    previous = os.umask(umask)
    try:
        commit(tmp_path / "new" / "out", NEW)
    finally:
        os.umask(previous)
    out = tmp_path / "new" / "out"
    for folder in (out.parent, out, out / "figures"):
        assert folder.stat().st_mode & 0o777 == mode, folder


def test_a_failed_run_leaves_the_old_results_and_no_trace(tmp_path: Path) -> None:
    out = tmp_path / "out"
    commit(out, OLD)
    with pytest.raises(RuntimeError), ResultsFolder(out) as folder:
        (folder.stage() / "report.json").write_text("partial")
        raise RuntimeError("simulation failed")
    assert whole(out) == "old"
    assert siblings(out) == []


def test_a_failed_first_run_removes_the_parents_it_created(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "out"
    with pytest.raises(KeyboardInterrupt), ResultsFolder(out) as folder:
        assert folder.had_results is False
        folder.stage()
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_commit_refuses_a_folder_someone_wrote_into_during_the_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    commit(out, OLD)
    with pytest.raises(InputError, match="changed during the run"), ResultsFolder(out) as folder:
        (folder.stage() / "report.json").write_text("{}")
        (out / "added.txt").write_text("theirs")
        folder.commit()
    assert (out / "added.txt").read_text() == "theirs"
    assert siblings(out) == []


def test_replacing_without_the_atomic_swap_gives_the_same_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outdir, "exchange", lambda a, b: False)
    out = tmp_path / "out"
    commit(out, OLD)
    commit(out, NEW)
    assert whole(out) == "new"
    assert siblings(out) == []


def test_an_interrupt_during_a_deferred_block_arrives_after_it() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), interrupts_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        done.append(True)
    assert done == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# --- the lock -----------------------------------------------------------------------------------


def test_a_second_claim_is_refused_at_once_naming_the_first_pid(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with ResultsFolder(out):
        lock = tmp_path / ".out.sitssim-lock"
        assert lock.read_text() == f"{os.getpid()}\n"
        with pytest.raises(InputError) as info, ResultsFolder(out):
            pass
        assert f"another sitssim run (pid {os.getpid()}) is writing here" in str(info.value)
    assert not lock.exists()
    commit(out, NEW)
    assert whole(out) == "new"


def test_a_lock_left_by_a_killed_run_does_not_block(tmp_path: Path) -> None:
    (tmp_path / ".out.sitssim-lock").write_text(f"{dead_pid()}\n")
    commit(tmp_path / "out", NEW)
    assert whole(tmp_path / "out") == "new"
    assert siblings(tmp_path / "out") == []


# --- owners and stale folders -------------------------------------------------------------------


def test_owner_alive_tells_dead_reused_and_zombie_pids_from_live_ones() -> None:
    me = os.getpid()
    start = outdir._start_time(me)
    assert start is not None
    assert owner_alive(me, start)
    assert not owner_alive(me, start + 1)
    assert not owner_alive(dead_pid(), 0)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        while not outdir._zombie(zombie.pid):
            os.sched_yield()
        assert not owner_alive(zombie.pid, 0)
    finally:
        zombie.wait()


def test_recover_removes_only_dead_runs_folders_for_this_target(tmp_path: Path) -> None:
    out = tmp_path / "out"
    commit(out, NEW)
    gone, me = dead_pid(), os.getpid()
    start = outdir._start_time(me)
    names = {
        f".out.sitssim-tmp-{gone}.0-0badf00d": "dead",
        f".out.sitssim-tmp-{me}.{start}-0badf00d": "live",
        f".out.sitssim-tmp-{me}.{start + 1}-0badf00d": "reused pid",
        f".out.sitssim-old-{gone}.0": "dead old, out present",
        ".out.sitssim-tmp-unrecorded": "no owner record",
        f".other.sitssim-tmp-{gone}.0-0badf00d": "another target",
        f".out.sitssim-tmp-{gone}.0-0badf00dx": "not our pattern",
    }
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_text("x")
    recover(out)
    assert siblings(out) == sorted(
        [
            f".out.sitssim-tmp-{me}.{start}-0badf00d",
            ".out.sitssim-tmp-unrecorded",
            f".other.sitssim-tmp-{gone}.0-0badf00d",
            f".out.sitssim-tmp-{gone}.0-0badf00dx",
        ]
    )
    assert whole(out) == "new"


def test_recover_restores_old_results_a_dead_run_moved_aside(tmp_path: Path) -> None:
    out = tmp_path / "out"
    commit(out, OLD)
    gone = dead_pid()
    os.rename(out, tmp_path / f".out.sitssim-old-{gone}.0")
    (tmp_path / f".out.sitssim-tmp-{gone}.0-12345678").mkdir()
    recover(out)
    assert whole(out) == "old"
    assert siblings(out) == []


# --- a crash at every step ----------------------------------------------------------------------


def _die_at(step: int) -> Callable[[Callable], Callable]:
    """Wrap a filesystem call so that the process dies just before or just after step ``step``."""
    count = [0]

    def wrap(fn: Callable) -> Callable:
        def wrapped(*args: object, **kwargs: object) -> object:
            count[0] += 1
            if count[0] == step:
                os._exit(137)
            value = fn(*args, **kwargs)
            count[0] += 1
            if count[0] == step:
                os._exit(137)
            return value

        return wrapped

    return wrap


def _replace_in_child(out: Path, step: int, swap: bool) -> int:
    """Replace ``out`` with NEW in a forked child that dies at ``step``; its exit status."""
    pid = os.fork()
    if pid == 0:
        try:
            wrap = _die_at(step)
            outdir.exchange = wrap(outdir.exchange if swap else lambda a, b: False)
            for name in ("rename", "mkdir", "rmdir", "unlink"):
                setattr(os, name, wrap(getattr(os, name)))
            shutil.rmtree = wrap(shutil.rmtree)
            commit(out, NEW)
        finally:
            os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.parametrize("swap", [True, False], ids=["renameat2-exchange", "two-renames"])
def test_a_crash_at_any_step_leaves_old_or_new_results_whole(tmp_path: Path, swap: bool) -> None:
    outcomes = []
    for step in range(1, 200):
        out = tmp_path / str(step) / "out"
        commit(out, OLD)
        code = _replace_in_child(out, step, swap)
        state = whole(out)
        if state is None:
            # Only between the two fallback renames: the old results wait whole beside it.
            assert not swap and not out.exists(), (step, siblings(out))
            aside = [n for n in siblings(out) if ".sitssim-old-" in n]
            assert len(aside) == 1 and whole(out.parent / aside[0]) == "old", step
        with ResultsFolder(out):
            pass
        after = whole(out)
        assert after in ("old", "new"), (step, siblings(out))
        assert siblings(out) == [], (step, siblings(out))
        outcomes.append(after)
        if code == 0:
            break
    assert code == 0 and outcomes[-1] == "new"
    assert outcomes[0] == "old" and len(outcomes) > 8

"""The results folder's lifecycle: check, lock, stage, replace atomically, recover.

Theory of operation. ``--out DIR`` is checked before anything is simulated
(:func:`check_out_target`): sitssim only ever replaces a folder it wrote
itself, recognised by the marker file every run writes last, which also lists
every file of the run, so a folder with anything else in it is refused. A
:class:`ResultsFolder` then takes an exclusive ``flock`` on ``.DIR.sitssim-lock``
beside the target, so a second run to the same folder stops at once, naming
the first one's PID. Results are written into a staging folder beside the
target, named ``.DIR.sitssim-tmp-<pid>.<start>-<random>``: the name records the
owner's PID and its start time (``/proc/<pid>/stat``, so a reused PID is not
mistaken for the owner), and is created in one ``mkdir``, so no staging folder
ever lacks its owner's record.

Replacing old results is a swap of the staging folder with the target
(``renameat2(RENAME_EXCHANGE)``, one atomic step on Linux), after which the
staging name holds the old results and is deleted. Where the swap is not
available it takes two renames: target to ``.DIR.sitssim-old-<pid>.<start>``,
staging to target. A kill between them leaves no target but a whole ``-old-``
folder, which the next run (under the lock, and only once its owner is dead)
renames back. Folders are deleted only under a ``-tmp-`` name, never an
``-old-`` one, so a half-deleted folder is never restored. At every instant the
target therefore holds the old or the new results whole, or (between the two
fallback renames only) the old results wait whole to be renamed back.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

from sitssim import __version__
from sitssim.errors import InputError

MARKER = ".sitssim-results"
_TMP, _OLD, _LOCK = ".sitssim-tmp-", ".sitssim-old-", ".sitssim-lock"
# Longest name sitssim puts beside DIR beyond DIR's own name: "." + ".sitssim-tmp-" + a 7-digit
# PID + "." + a 20-digit start time + "-" + 8 hex digits.
SIBLING_EXTRA = 1 + len(_TMP) + 7 + 1 + 20 + 1 + 8
# Room for the longest path of a file inside a results folder (figures/<workload>_....png).
INSIDE_RESERVE = 128
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _where(out: Path) -> str:
    return str(out) if str(out) not in ("", ".") else f"{out} (the current folder)"


def _refuse(out: Path, message: str) -> InputError:
    return InputError(message, file=_where(out), field="--out")


def _marker_files(folder: Path) -> set[str] | None:
    """The files the run that wrote ``folder`` listed in its marker; None if it is not one."""
    marker = folder / MARKER
    if marker.is_symlink() or not marker.is_file():
        return None
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict) or "sitssim" not in data:
        return None
    files = data.get("files")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return set(files)


def _listing(folder: Path) -> list[str]:
    """Every file and folder under ``folder``, relative and sorted; links are not followed."""
    found = []
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        found += [(rel / name).as_posix() for name in (*dirs, *files)]
    return sorted(found)


def foreign_entry(folder: Path) -> str | None:
    """The first thing in ``folder`` sitssim did not write, or None if all of it is a run's."""
    listed = _marker_files(folder)
    if listed is None:
        return MARKER
    allowed = {MARKER, *listed}
    allowed |= {parent.as_posix() for f in listed for parent in Path(f).parents}
    return next((entry for entry in _listing(folder) if entry not in allowed), None)


def _nearest_existing(path: Path) -> Path:
    while not os.path.lexists(path):
        path = path.parent
    return path


def check_out_target(out: Path, scenario: Path | None = None) -> None:
    """Refuse, before anything is simulated, an ``--out`` that could not or must not be replaced.

    Refused: the current folder or any folder above it, the scenario's folder or any folder
    holding it, a file, a symbolic link, a folder holding anything sitssim did not write, a
    name that leaves no room for the staging folder beside it, and a parent that cannot be
    written. Nothing is created, changed or deleted here.
    """
    if str(out) in ("", ".", "..") or out.name in ("", ".", ".."):
        raise _refuse(out, "refusing to write results over the current folder or its parents")
    absolute = Path(os.path.abspath(out))
    # First: a name over NAME_MAX makes every later stat fail with ENAMETOOLONG.
    _check_lengths(out, absolute)
    for path in (absolute, *absolute.parents):
        if path.is_symlink() and not path.exists():
            raise _refuse(out, f"{path} is a dangling symbolic link")
    resolved = absolute.resolve()
    if Path.cwd().resolve().is_relative_to(resolved):
        raise _refuse(out, "refusing to write results over the current folder or its parents")
    if scenario is not None and Path(scenario).resolve().parent.is_relative_to(resolved):
        raise _refuse(out, f"refusing to write results over the folder that holds {scenario}")
    if absolute.is_symlink():
        raise _refuse(out, "is a symbolic link; give the folder it points to")
    if absolute.exists():
        if not absolute.is_dir():
            raise _refuse(out, "exists and is not a directory")
        if any(absolute.iterdir()):
            foreign = foreign_entry(absolute)
            if foreign == MARKER:
                raise _refuse(
                    out,
                    f"exists and is not a sitssim results folder (no {MARKER} marker); "
                    "give a new or empty folder",
                )
            if foreign is not None:
                raise _refuse(
                    out, f"holds {foreign}, which sitssim did not write; give another folder"
                )
    probe = _nearest_existing(absolute.parent)
    if not probe.is_dir():
        raise _refuse(out, f"{probe} is a file, not a directory")
    # access() rather than a probe folder, which a kill could leave behind; what access()
    # cannot see (root, odd file systems) the lock file, created next, still catches.
    if not os.access(probe, os.W_OK | os.X_OK):
        raise _refuse(out, f"cannot write to {probe}: permission denied")


def _check_lengths(out: Path, absolute: Path) -> None:
    probe = _nearest_existing(absolute.parent)
    try:
        name_max = os.pathconf(probe, "PC_NAME_MAX")
        path_max = os.pathconf(probe, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    missing = absolute.relative_to(probe).parts
    for part in missing[:-1]:
        if len(os.fsencode(part)) > name_max:
            raise _refuse(out, f"folder name {part[:40]}... is longer than {name_max} bytes")
    room = name_max - SIBLING_EXTRA
    if len(os.fsencode(absolute.name)) > room:
        raise _refuse(
            out,
            f"name is longer than {room} bytes (the staging folder beside it must fit "
            f"in {name_max})",
        )
    if len(os.fsencode(str(absolute))) + INSIDE_RESERVE > path_max:
        raise _refuse(out, f"path is too long for the files inside it (PATH_MAX {path_max})")


def _start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), to tell a reused PID from the owner."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return int(fields[19]) if len(fields) > 19 else None


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def owner_alive(pid: int, start: int) -> bool:
    """Whether the process that wrote a staging or old folder may still be running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if _zombie(pid):
        return False
    now = _start_time(pid)
    return now is None or start == 0 or now == start


def _me() -> str:
    return f"{os.getpid()}.{_start_time(os.getpid()) or 0}"


def _sibling_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"\.{re.escape(name)}\.sitssim-(tmp|old)-(\d+)\.(\d+)(?:-[0-9a-f]+)?")


def _trash_name(name: str) -> str:
    return f".{name}{_TMP}{_me()}-{secrets.token_hex(4)}"


def _delete(folder: Path, name: str) -> None:
    """Delete a folder of ours; an ``-old-`` one is renamed to a ``-tmp-`` name first, so that a
    deletion cut short never leaves a partial folder that :func:`recover` would restore."""
    if _OLD in folder.name:
        trash = folder.with_name(_trash_name(name))
        os.rename(folder, trash)
        folder = trash
    shutil.rmtree(folder, ignore_errors=True)


def recover(out: Path) -> None:
    """Finish what dead runs to ``out`` left: restore or delete ``-old-`` folders, drop staging.

    Only folders named after ``out`` whose recorded owner is dead are touched; a live run's
    folders (parallel sweeps write side by side) are left alone.
    """
    parent = out.parent
    pattern = _sibling_pattern(out.name)
    try:
        entries = sorted(parent.iterdir())
    except OSError:
        return
    stale = []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match and entry.is_dir() and not entry.is_symlink():
            kind, pid, start = match.group(1), int(match.group(2)), int(match.group(3))
            if not owner_alive(pid, start):
                stale.append((kind != "old", entry))
    for is_tmp, entry in sorted(stale):
        if not is_tmp and not os.path.lexists(out):
            os.rename(entry, out)
        else:
            _delete(entry, out.name)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT back while folders are renamed or cleaned, then deliver it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: pending.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
        if pending:
            raise KeyboardInterrupt


def _renameat2() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    return getattr(libc, "renameat2", None)


def exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one atomic step; False where the system cannot (then nothing moved)."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _read_holder(fd: int) -> str:
    """The PID the lock's holder wrote (it writes just after locking, so wait a moment)."""
    for _ in range(20):
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if text.isdigit():
            return text
        time.sleep(0.01)
    return "unknown"


class ResultsFolder:
    """One run's claim on ``--out``: lock, staging folder, atomic commit, cleanup.

    Use as a context manager around the simulation; write into :meth:`stage` and call
    :meth:`commit`. Leaving the block without committing removes the staging folder and any
    parent folders it created, so an interrupted or failed run leaves nothing behind.
    """

    def __init__(self, out: Path, scenario: Path | None = None) -> None:
        self.out = out
        self.scenario = scenario
        self.committed = False
        self.had_results = False
        self._path = Path(os.path.abspath(out))
        self._lock_path = self._path.with_name(f".{self._path.name}{_LOCK}")
        self._lock_fd: int | None = None
        self._staging: Path | None = None
        self._created: list[Path] = []

    def __enter__(self) -> ResultsFolder:
        check_out_target(self.out, self.scenario)
        try:
            self._make_parents()
            self._lock()
            recover(self._path)
        except BaseException:
            self._release()
            raise
        self.had_results = self._path.is_dir() and any(self._path.iterdir())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with interrupts_deferred():
            self._release()

    def _make_parents(self) -> None:
        missing = []
        parent = self._path.parent
        while not os.path.lexists(parent):
            missing.append(parent)
            parent = parent.parent
        for folder in reversed(missing):
            try:
                folder.mkdir()
            except FileExistsError:
                continue
            except OSError as exc:
                raise _refuse(self.out, f"cannot create {folder}: {exc.strerror}") from None
            self._created.append(folder)

    def _lock(self) -> None:
        while True:
            try:
                fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            except OSError as exc:
                raise _refuse(
                    self.out, f"cannot write to {self._path.parent}: {exc.strerror}"
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise _refuse(
                    self.out, f"another sitssim run (pid {holder}) is writing here"
                ) from None
            # A holder that unlinked the file between our open and flock left us an orphan.
            try:
                current = os.stat(self._lock_path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                current = False
            if current:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def stage(self) -> Path:
        """A new, empty staging folder beside ``out`` (permissions follow the umask)."""
        if self._staging is None:
            while True:
                candidate = self._path.with_name(_trash_name(self._path.name))
                try:
                    os.mkdir(candidate, 0o777)
                except FileExistsError:
                    continue
                self._staging = candidate
                break
        return self._staging

    def commit(self) -> None:
        """Mark the staged results as a run's and put them at ``out`` in place of any old ones."""
        staging = self.stage()
        listed = [entry for entry in _listing(staging) if (staging / entry).is_file()]
        marker = {"sitssim": __version__, "files": listed}
        (staging / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
        with interrupts_deferred():
            self._replace(staging)
            self._staging = None
            self.committed = True

    def _replace(self, staging: Path) -> None:
        out = self._path
        if not os.path.lexists(out) or (out.is_dir() and not any(out.iterdir())):
            os.rename(staging, out)
            return
        foreign = foreign_entry(out) if out.is_dir() and not out.is_symlink() else "?"
        if foreign is not None:
            raise _refuse(self.out, "changed during the run and is no longer only sitssim results")
        if exchange(staging, out):
            shutil.rmtree(staging, ignore_errors=True)
            return
        old = out.with_name(f".{out.name}{_OLD}{_me()}")
        os.rename(out, old)
        os.rename(staging, out)
        _delete(old, out.name)

    def _release(self) -> None:
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None
        if self._lock_fd is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._lock_path)
            os.close(self._lock_fd)
            self._lock_fd = None
        if not self.committed:
            for folder in reversed(self._created):
                with contextlib.suppress(OSError):
                    folder.rmdir()
        self._created = []

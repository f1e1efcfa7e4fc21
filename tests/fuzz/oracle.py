"""What every scenario document must do, however broken: the fuzz test's two properties.

1. ``load_scenario`` returns a ``Scenario`` or raises ``InputError``; nothing else,
   and within a time and memory budget (a hang or a blow-up fails too).
2. ``sitssim validate`` exits 0 or 2. On 2 nothing goes to stdout and stderr is one
   located line, ``error: FILE:LINE: ...``; only a file with no YAML content in it
   (missing, empty, comments only, not UTF-8) may leave the line out.

A budget is enforced in three layers, because a document can stall the loader in
three ways: Python code looping (``SIGALRM`` raises ``Hang``), memory growing
(``RLIMIT_AS`` turns it into ``MemoryError``), or one C call that never returns, such
as a huge integer power (the ``faulthandler`` watchdog dumps every thread's stack and
ends the process, so CI fails instead of stalling).
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from fuzz.mutations import FAST_RUN, SCENARIOS, SHIPPED
from ruamel.yaml import YAML
from ruamel.yaml.nodes import ScalarNode
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.errors import InputError
from sitssim.scenario import Scenario, load_scenario

T = TypeVar("T")

LOAD_BUDGET_S = 10.0
RUN_BUDGET_S = 30.0
MEMORY_MARGIN_B = 2 << 30
WATCHDOG_S = 60.0

runner = CliRunner()


class Hang(BaseException):
    """Raised by the alarm. Not an ``Exception``: the CLI's catch-all must not map it to 3."""


class PropertyFailure(AssertionError):
    """A document broke a property; ``category`` groups failures with one cause."""

    def __init__(self, category: str, detail: str) -> None:
        super().__init__(f"{category}: {detail}")
        self.category = category
        self.detail = detail


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """Time, memory and watchdog limits around one call, all restored afterwards."""

    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"no answer within {seconds:g} s")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _vm_size() + MEMORY_MARGIN_B
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    previous = signal.signal(signal.SIGALRM, on_alarm)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    faulthandler.dump_traceback_later(max(WATCHDOG_S, 2 * seconds), exit=True)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.signal(signal.SIGALRM, previous)


def _origin(exc: BaseException) -> str:
    """Where an exception was raised: the innermost frame, as ``module.py:line in fn``."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    last = frames[-1]
    return f"{Path(last.filename).name}:{last.lineno} in {last.name}"


def has_content(data: bytes) -> bool:
    """Whether the file holds YAML to point at: then every error can name a line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    try:
        with bounded(LOAD_BUDGET_S):
            node = YAML(typ="rt").compose(text)
    except Hang:
        return True
    except Exception:
        # A document the YAML parser rejects still has a line where it went wrong.
        return True
    # A bare "---" composes to an empty null; "~" or "null" is content on a line.
    return node is not None and not (isinstance(node, ScalarNode) and node.value == "")


@dataclass
class Outcome:
    """What the loader and ``validate`` made of a document."""

    loaded: bool
    exit_code: int
    message: str

    @property
    def valid(self) -> bool:
        return self.loaded and self.exit_code == 0


def check_loader(path: Path) -> tuple[bool, str]:
    """Property 1: a ``Scenario`` (True) or an ``InputError`` (False, its message)."""
    try:
        with bounded(LOAD_BUDGET_S):
            result = load_scenario(path)
    except InputError as exc:
        return False, str(exc)
    except Hang as exc:
        raise PropertyFailure("loader hang", str(exc)) from None
    except Exception as exc:
        raise PropertyFailure(
            f"loader raised {type(exc).__name__} at {_origin(exc)}", _short(exc)
        ) from None
    if not isinstance(result, Scenario):
        raise PropertyFailure("loader returned no Scenario", repr(type(result)))
    return True, ""


def _short(exc: BaseException) -> str:
    text = str(exc).replace("\n", " | ")
    return text if len(text) <= 300 else text[:297] + "..."


def invoke(args: list[str], seconds: float) -> Any:
    """One CLI command in process, under the budget; a hang is a failure."""
    try:
        with bounded(seconds):
            return runner.invoke(app, args, catch_exceptions=True)
    except Hang as exc:
        raise PropertyFailure(f"{args[0]} hang", str(exc)) from None


def _internal(result: Any) -> str:
    """An exit-3 message plus the last frame of its log (which sitssim wrote for us)."""
    message = result.stderr.strip()
    match = re.search(r"\(log: (\S+)\)", message)
    if match is None:
        return message
    log = Path(match.group(1))
    try:
        tail = [ln for ln in log.read_text().splitlines() if ln.startswith('  File "')]
        log.unlink()
    except OSError:
        return message
    where = tail[-1].strip() if tail else "?"
    return f"{message.split(' (log:')[0]} [{where}]"


def check_exit_two(result: Any, path: Path, located: Callable[[], bool], command: str) -> str:
    """The exit-2 contract: empty stdout, one ``error: FILE[:LINE]: `` line on stderr.

    ``located`` says whether the message must name a line; it is asked only when
    the line is missing, since it parses the document again.
    """
    lines = re.split(r"\r\n|\r|\n", result.stderr.strip())
    if len(lines) != 1:
        raise PropertyFailure(f"{command} exit 2 not one line", repr(result.stderr[:300]))
    line = lines[0]
    prefix = re.compile(rf"^error: {re.escape(str(path))}(:(\d+))?: \S")
    match = prefix.match(line)
    if match is None:
        raise PropertyFailure(f"{command} exit 2 not 'error: FILE:LINE: '", line[:300])
    if match.group(1) is None and located():
        raise PropertyFailure(f"{command} exit 2 without a line", line[:300])
    if result.stdout.strip():
        raise PropertyFailure(f"{command} exit 2 wrote stdout", result.stdout[:300])
    return line


def check_validate(path: Path, data: bytes, loader: tuple[bool, str]) -> Outcome:
    """Property 2, and that ``validate`` reports the loader's own message when it fails."""
    result = invoke(["validate", str(path)], LOAD_BUDGET_S)
    output = result.stdout + result.stderr
    if result.exit_code == 3:
        raise PropertyFailure("validate internal error", _internal(result))
    if result.exit_code not in (0, 2) or "Traceback" in output:
        raise PropertyFailure(
            f"validate exit {result.exit_code}", f"{output[:300]!r} {result.exception!r}"
        )
    loaded, load_message = loader
    if result.exit_code == 0:
        if not loaded:
            raise PropertyFailure("validate passed what the loader refused", load_message)
        return Outcome(True, 0, "")
    line = check_exit_two(result, path, lambda: has_content(data), "validate")
    if not loaded and line != f"error: {load_message}":
        raise PropertyFailure("validate and the loader disagree", f"{line!r} vs {load_message!r}")
    if not loaded and "\n" in load_message:
        raise PropertyFailure("loader message not one line", repr(load_message[:300]))
    return Outcome(loaded, 2, line)


def check_document(path: Path, data: bytes) -> Outcome:
    """Write ``data`` to ``path`` and hold it to both properties."""
    path.write_bytes(data)
    return check_file(path)


def check_file(path: Path) -> Outcome:
    """Hold the file at ``path``, as it is, to both properties."""
    return check_validate(path, path.read_bytes(), check_loader(path))


def check_run(path: Path, out: Path, validated: Outcome) -> int:
    """A short run: it exits 0, 1 or 2, and exits 2 only with the line ``validate`` gave."""
    result = invoke(["run", str(path), "--out", str(out), "--no-figures"], RUN_BUDGET_S)
    if result.exit_code == 3:
        raise PropertyFailure("run internal error", _internal(result))
    if result.exit_code not in (0, 1, 2) or "Traceback" in result.stdout + result.stderr:
        raise PropertyFailure(f"run exit {result.exit_code}", result.stderr[:300])
    if result.exit_code == 2:
        line = check_exit_two(result, path, lambda: True, "run")
        if validated.exit_code != 2:
            raise PropertyFailure("run refused what validate passed", line[:300])
        if line != validated.message:
            raise PropertyFailure(
                "run and validate refuse differently", f"{line!r} vs {validated.message!r}"
            )
    elif validated.exit_code == 2:
        raise PropertyFailure("validate refused what run ran", validated.message[:300])
    return result.exit_code


def warm_up(folder: Path) -> None:
    """Import what ``validate`` and ``run`` import lazily, before any limit applies.

    Mapping pyarrow's and pandas' libraries takes address space that a first
    import under the memory limit would be refused, and blamed on the document.
    """
    for base in SHIPPED:
        runner.invoke(app, ["validate", str(base)])
    out = folder / "warm-up"
    runner.invoke(app, ["run", str(SCENARIOS / FAST_RUN[0]), "--out", str(out), "--no-figures"])
    shutil.rmtree(out, ignore_errors=True)


def isolated(fn: Callable[[], T], seconds: float) -> T:
    """Call ``fn`` in a forked child and return its result; a child that stalls or dies fails.

    For documents known to be hostile (the corpus): a C-level stall there must fail
    its own case, not take the whole test session down with the watchdog.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            payload: Any = ("ok", fn())
        except PropertyFailure as exc:
            payload = ("fail", (exc.category, exc.detail))
        except BaseException as exc:
            payload = ("fail", (f"{type(exc).__name__} in the check", _short(exc)))
        with os.fdopen(write_end, "wb") as pipe:
            pickle.dump(payload, pipe)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        ready, _, _ = select.select([pipe], [], [], seconds)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise PropertyFailure("hang", f"no answer within {seconds:g} s (killed)")
        blob = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not blob:
        raise PropertyFailure("child died", f"wait status {status}")
    kind, value = pickle.loads(blob)
    if kind == "fail":
        raise PropertyFailure(*value)
    return value


def python_m_validate(path: Path, data: bytes) -> None:
    """Property 2 through a real ``python -m sitssim`` process."""
    path.write_bytes(data)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "sitssim", "validate", str(path)],
            capture_output=True,
            text=True,
            timeout=WATCHDOG_S,
            env={**os.environ, "COLUMNS": "200"},
        )
    except subprocess.TimeoutExpired:
        raise PropertyFailure("python -m sitssim validate hang", str(path)) from None
    if done.returncode not in (0, 2) or "Traceback" in done.stdout + done.stderr:
        raise PropertyFailure(
            f"python -m sitssim validate exit {done.returncode}", done.stderr[:300]
        )
    if done.returncode == 2:
        check_exit_two(done, path, lambda: has_content(data), "python -m sitssim validate")

"""Reading the files a scenario names: regular files only, and never more than a bound.

A path can name a FIFO (opening it waits for a writer forever), a device such as
``/dev/zero`` (reading it never ends) or a file far larger than anything sitssim
reads. Each is bad input, refused before it costs time or memory.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from sitssim.errors import InputError

_NOT_REGULAR = [
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
]


def _not_regular(mode: int, name: str, what: str) -> InputError:
    if stat.S_ISDIR(mode):
        return InputError(f"is a directory, not a {what} file", file=name)
    kind = next((text for test, text in _NOT_REGULAR if test(mode)), "not a regular file")
    return InputError(f"is {kind}: a {what} is read from a regular file only", file=name)


def _too_large(name: str, size: str, limit: int, what: str, hint: str) -> InputError:
    return InputError(
        f"{size} bytes is too large for a {what} (bound: {limit} bytes){hint}", file=name
    )


def open_regular_file(name: str, what: str) -> BinaryIO:
    """``name`` opened for binary reading if it is a regular file, else ``InputError``.

    ``what`` names the file's role in messages ("scenario", "trace"). The mode is
    checked before opening (opening a device can have effects) and again on the open
    descriptor, which ``O_NONBLOCK`` keeps from waiting on a FIFO swapped in between.
    """
    try:
        info = os.stat(name)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(info.st_mode, name, what)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        file = open(os.open(name, flags), "rb")  # noqa: SIM115 (the caller closes it)
    except FileNotFoundError:
        raise InputError(f"no such {what} file", file=name) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=name) from None
    mode = os.fstat(file.fileno()).st_mode
    if not stat.S_ISREG(mode):
        file.close()
        raise _not_regular(mode, name, what)
    return file


def read_regular_file(name: str, limit: int, what: str, hint: str = "") -> bytes:
    """The bytes of regular file ``name`` of at most ``limit`` bytes, or ``InputError``.

    ``hint`` follows a too-large refusal. At most ``limit + 1`` bytes are read,
    whatever the file claims its size is.
    """
    with open_regular_file(name, what) as file:
        size = os.fstat(file.fileno()).st_size
        if size > limit:
            raise _too_large(name, str(size), limit, what, hint)
        try:
            raw = file.read(limit + 1)
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", file=name) from None
    if len(raw) > limit:
        raise _too_large(name, f"more than {limit}", limit, what, hint)
    return raw

"""Reading back the ``waves.vcd`` files sitssim writes, for the tests that check them."""

from __future__ import annotations

from pathlib import Path


def vcd_changes(path: Path) -> dict[tuple[str, str], list[tuple[int, str]]]:
    """(scope, signal) -> [(time, value)] of every signal a VCD file declares, in file
    order (vector values as bit strings; a signal that never changes has none)."""
    ids: dict[str, tuple[str, str]] = {}
    scopes: list[str] = []
    changes: dict[tuple[str, str], list[tuple[int, str]]] = {}
    t = 0
    for line in path.read_text().splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "$scope":
            scopes.append(parts[2])
        elif parts[0] == "$upscope":
            scopes.pop()
        elif parts[0] == "$var":
            ids[parts[3]] = (".".join(scopes), parts[4])
            changes[ids[parts[3]]] = []
        elif line.startswith("#"):
            t = int(line[1:])
        elif line[0] in "bsr" and len(parts) == 2 and parts[1] in ids:
            changes[ids[parts[1]]].append((t, parts[0][1:]))
    return changes

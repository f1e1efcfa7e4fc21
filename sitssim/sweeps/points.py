"""A study's points: every combination of its axes, times its replications, checked.

A *point* is one run: one value per parameter and one seed. The combinations are the
product of the study's axes in file order (the first varies slowest); replication ``r``
runs with the base scenario's seed plus ``r``, the same seeds at every combination, so
that points are compared on common random numbers and replication 0 of a study with no
parameters is ``sitssim run`` of its base.

Every combination is applied to the base scenario's data and validated, and each distinct
scenario goes through the same pre-run checks as ``sitssim run`` (``preflight``), all
before any point runs: bad input stops the sweep with nothing run. A problem a parameter
caused is reported at the parameter's line in the study file.

A point's key hashes its resolved scenario (the validated model, so ``5us`` and
``5000ns`` are the same run), its seed and the sitssim version: a finished point is
reused only for the very run it was.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sitssim import __version__
from sitssim.errors import InputError, shown
from sitssim.preflight import preflight
from sitssim.quantities import MAX_SEED
from sitssim.scenario import Edit, Scenario, scenario_variants
from sitssim.sweeps.study import Study

Where = dict[str, tuple[int | None, str]]
"""Per parameter path, the line and field of the study file that set it."""


@dataclass(frozen=True)
class Point:
    """One run of a study."""

    index: int
    """Which combination of parameter values (replications share it)."""
    replication: int
    seed: int
    values: dict[str, Any]
    scenario: Scenario
    key: str
    scenario_sha256: str


def _slot(data: Any, path: str) -> tuple[Any, Any]:
    """The container and key that ``path`` names in plain scenario data, making missing
    mappings on the way (the scenario's validation then says if they may exist). Raise
    ``ValueError`` with what is wrong when the path runs through a list index that is not
    there or through a value."""
    parts = path.split(".")
    node = data
    walked: list[str] = []
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ValueError(
                    f"{'.'.join(walked)} is a list of {len(node)} item(s) in the base scenario: "
                    f"expected an index 0 to {len(node) - 1}, got {shown(part)}"
                )
            key: Any = int(part)
        elif isinstance(node, dict):
            key = part
        else:
            raise ValueError(
                f"{'.'.join(walked)} is a value ({shown(node)}) in the base scenario, "
                "not a mapping with fields"
            )
        if last:
            return node, key
        if isinstance(node, dict) and key not in node:
            node[key] = {}
        node = node[key]
        walked.append(part)
    raise AssertionError("a path has at least one part")


def _canonical(scenario: Scenario) -> str:
    return json.dumps(scenario.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def _relates(field: str | None, path: str) -> bool:
    """Whether a scenario error at ``field`` (``workloads[0].load``) is about ``path``
    (``workloads.0.load``): at it, inside it, or at a key on its way (a misspelt section
    the path made)."""
    if not field:
        return False
    dotted = ".".join(p.replace("]", "").replace("[", ".") for p in field.split("."))
    dotted = dotted.replace("..", ".")
    return dotted == path or dotted.startswith(path + ".") or path.startswith(dotted + ".")


def _at(study: Study, where: tuple[int | None, str], message: str) -> InputError:
    line, field = where
    return InputError(message, file=str(study.path), line=line, field=field)


def _apply(
    study: Study, variant: Callable[[Edit | None], Scenario], values: dict[str, Any], where: Where
) -> Scenario:
    def edit(data: Any) -> None:
        for path, value in values.items():
            try:
                container, key = _slot(data, path)
            except ValueError as exc:
                raise _at(study, where[path], str(exc)) from None
            container[key] = copy.deepcopy(value)

    try:
        return variant(edit)
    except InputError as exc:
        if exc.file == str(study.path):
            raise
        for path, value in values.items():
            if _relates(exc.field, path):
                # The value is beside the point of an unknown key.
                given = "" if exc.message.startswith("unknown key") else f"{shown(value)}: "
                raise _at(study, where[path], given + exc.message) from None
        if not values:
            raise
        given = ", ".join(f"{p} = {shown(v)}" for p, v in values.items())
        raise _at(
            study, where[next(iter(values))], f"with {given}, the base scenario is refused: {exc}"
        ) from None


def expand(study: Study) -> list[Point]:
    """Every point of ``study``, checked (module docstring)."""
    # The base is read and parsed once; each combination validates its own copy.
    variant = scenario_variants(study.base)
    base = variant(None) if not study.axes else None
    where = {
        path: (line, field)
        for axis in study.axes
        for path, line, field in zip(axis.paths, axis.lines, axis.fields, strict=True)
    }
    combinations = itertools.product(*(axis.values for axis in study.axes))
    points: list[Point] = []
    checked: set[str] = set()
    owner: dict[str, int] = {}
    for index, combination in enumerate(combinations):
        values = {
            path: value
            for axis, row in zip(study.axes, combination, strict=True)
            for path, value in zip(axis.paths, row, strict=True)
        }
        scenario = _apply(study, variant, values, where) if values else base
        assert scenario is not None
        canonical = _canonical(scenario.updated(seed=0))
        if canonical in owner:
            given = ", ".join(f"{p} = {shown(v)}" for p, v in values.items())
            first = points[owner[canonical] * study.replications].values
            earlier = ", ".join(f"{p} = {shown(v)}" for p, v in first.items())
            raise InputError(
                f"{given} is the same run as {earlier}: each point must differ",
                file=str(study.path),
                line=study.line_of("parameters") or study.line_of("zip"),
                field="parameters",
            )
        owner[canonical] = index
        if canonical not in checked:
            _preflight(study, scenario, values, where)
            checked.add(canonical)
        sha = hashlib.sha256(canonical.encode()).hexdigest()
        for replication in range(study.replications):
            seed = scenario.seed + replication
            if seed > MAX_SEED:
                raise study.error(
                    f"the base seed {scenario.seed} plus {replication} is past the largest "
                    f"seed ({MAX_SEED})",
                    "replications",
                )
            key = hashlib.sha256(
                json.dumps({"scenario": sha, "seed": seed, "sitssim": __version__}).encode()
            ).hexdigest()[:32]
            points.append(
                Point(
                    index=index,
                    replication=replication,
                    seed=seed,
                    values=values,
                    scenario=scenario.updated(seed=seed),
                    key=key,
                    scenario_sha256=sha,
                )
            )
    return points


def _preflight(study: Study, scenario: Scenario, values: dict[str, Any], where: Where) -> None:
    try:
        preflight(scenario)
    except InputError as exc:
        if not values:
            raise
        path = next((p for p in values if _relates(exc.field, p)), next(iter(values)))
        given = ", ".join(f"{p} = {shown(v)}" for p, v in values.items())
        raise _at(study, where[path], f"with {given}: {exc.message}") from None

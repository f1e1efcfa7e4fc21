"""Every numeric scenario field has a range, and values outside it are bad input.

The table of fields is built from the models: every pydantic model reachable from
``Scenario`` is walked, so a field added later without a lower and an upper bound
(or a float that takes inf/nan) fails here. Each bound is then exercised: a value
just past it must be refused by the field's own type. The issue's cases run
through ``sitssim validate`` and must exit 2 naming file, line and field; every
spec-violating witness in scenarios/violations/ must still be valid input.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
import pytest
from pydantic import BaseModel, BeforeValidator, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from typer.testing import CliRunner

from sitssim.cli import app
from sitssim.config.cdc_profile import parse_frequency_hz
from sitssim.config.collective_config import parse_bandwidth_bytes_per_ns
from sitssim.scenario import Scenario
from sitssim.units import parse_length_m, parse_rate_gts, parse_size_bytes, parse_time_ns

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

# How a value in the field's base unit is written in a scenario, per unit parser.
WRITE: dict[Callable, Callable[[float], str]] = {
    parse_time_ns: lambda v: f"{v!r}ns",
    parse_size_bytes: lambda v: f"{int(v)}B",
    parse_rate_gts: lambda v: f"{v!r}GT/s",
    parse_length_m: lambda v: f"{v!r}m",
    parse_frequency_hz: lambda v: f"{v!r}Hz",
    parse_bandwidth_bytes_per_ns: lambda v: f"{round(v * 1e9)}B/s",
}


@dataclass(frozen=True)
class Leaf:
    """One numeric leaf of a field's type, with the constraints that apply to it."""

    where: str
    base: type
    metadata: tuple

    def bound(self, *kinds: type) -> Any:
        return next((getattr(m, m.__class__.__name__.lower()) for m in self._flat(kinds)), None)

    def _flat(self, kinds: tuple[type, ...]) -> Iterator[Any]:
        for m in self.metadata:
            for c in m.metadata if isinstance(m, FieldInfo) else (m,):
                if isinstance(c, kinds):
                    yield c

    @property
    def low(self) -> tuple[str, Any] | None:
        for kind in (at.Ge, at.Gt):
            value = self.bound(kind)
            if value is not None:
                return kind.__name__.lower(), value
        return None

    @property
    def high(self) -> tuple[str, Any] | None:
        for kind in (at.Le, at.Lt):
            value = self.bound(kind)
            if value is not None:
                return kind.__name__.lower(), value
        return None

    def general(self, name: str) -> Any:
        for m in self.metadata:
            for c in m.metadata if isinstance(m, FieldInfo) else (m,):
                if hasattr(c, "__dict__") and name in vars(c):
                    return vars(c)[name]
        return None

    @property
    def parser(self) -> Callable | None:
        for m in self.metadata:
            # A range-checked parser wraps the unit parser (functools.wraps).
            func = getattr(m, "func", None) if isinstance(m, BeforeValidator) else None
            func = getattr(func, "__wrapped__", func)
            if func in WRITE:
                return func
        return None

    def written(self, value: float) -> Any:
        parser = self.parser
        if parser is not None:
            return WRITE[parser](value)
        return int(value) if self.base is int else float(value)

    def refuses(self, value: Any) -> bool:
        adapter = TypeAdapter(Annotated[(self.base, *self.metadata)])  # type: ignore[misc]
        try:
            adapter.validate_python(value)
        except ValidationError:
            return True
        return False


def _leaves(annotation: Any, where: str, metadata: tuple = ()) -> Iterator[Leaf | type]:
    """Numeric leaves of ``annotation``, and the models it refers to."""
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *extra = get_args(annotation)
        yield from _leaves(base, where, (*metadata, *extra))
    elif origin in (Union, UnionType):
        for arg in get_args(annotation):
            yield from _leaves(arg, where, metadata)
    elif origin in (list, dict, tuple):
        for arg in get_args(annotation):
            yield from _leaves(arg, where)
    elif origin is Literal or annotation in (bool, str, type(None), Any):
        return
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    elif annotation in (int, float):
        yield Leaf(where, annotation, metadata)


def numeric_leaves() -> list[Leaf]:
    """Every int and float leaf of every model reachable from ``Scenario``."""
    seen: set[type] = set()
    todo: list[type[BaseModel]] = [Scenario]
    found: list[Leaf] = []
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            for item in _leaves(info.annotation, f"{model.__name__}.{name}", tuple(info.metadata)):
                if isinstance(item, Leaf):
                    found.append(item)
                else:
                    todo.append(item)
    return sorted(found, key=lambda leaf: leaf.where)


LEAVES = numeric_leaves()
IDS = [leaf.where for leaf in LEAVES]


def test_the_walk_reaches_every_section() -> None:
    """The table is only as good as the walk: models in every layer must be in it."""
    models = {leaf.where.split(".")[0] for leaf in LEAVES}
    for model in (
        "FatTree",
        "LinkProfile",
        "ChannelBlock",
        "PhyProfile",
        "PhyCosts",
        "ClockConfig",
        "CdcProfile",
        "FlitProfile",
        "CreditProfile",
        "SyntheticWorkload",
        "CollectiveWorkload",
        "TransactionWorkload",
        "InferenceWorkload",
        "LengthDistribution",
        "KvCompressionOptions",
        "RetrainAfterWindows",
    ):
        assert model in models
    assert len(LEAVES) > 100


@pytest.mark.parametrize("leaf", LEAVES, ids=IDS)
def test_every_number_has_both_bounds(leaf: Leaf) -> None:
    assert leaf.low is not None, f"{leaf.where} has no lower bound"
    assert leaf.high is not None, f"{leaf.where} has no upper bound"
    if leaf.base is float:
        assert leaf.general("allow_inf_nan") is False, f"{leaf.where} accepts inf/nan"
    elif leaf.parser is None:
        strict = any(getattr(c, "strict", False) for c in leaf._flat((object,)))
        assert strict, f"{leaf.where} is not strict: a YAML float would become an int"


def _past(side: tuple[str, Any], base: type, up: bool) -> float:
    kind, value = side
    if kind in ("gt", "lt"):
        return value
    if base is int:
        return value + (1 if up else -1)
    step = abs(value) * 0.5 if value else 1.0
    return value + step if up else value - step


@pytest.mark.parametrize("leaf", LEAVES, ids=IDS)
def test_values_past_each_bound_are_refused(leaf: Leaf) -> None:
    assert leaf.low is not None and leaf.high is not None
    below = _past(leaf.low, leaf.base, up=False)
    above = _past(leaf.high, leaf.base, up=True)
    assert leaf.refuses(leaf.written(below)), f"{leaf.where} accepts {below!r}"
    assert leaf.refuses(leaf.written(above)), f"{leaf.where} accepts {above!r}"
    # The bounds themselves, where closed, are in range: the range is what the docs say.
    for side in (leaf.low, leaf.high):
        if side[0] in ("ge", "le"):
            assert not leaf.refuses(leaf.written(side[1])), f"{leaf.where} refuses {side[1]!r}"


@pytest.mark.parametrize("leaf", [f for f in LEAVES if f.parser is None], ids=lambda f: f.where)
def test_inf_nan_and_huge_numbers_are_refused(leaf: Leaf) -> None:
    for value in (math.inf, -math.inf, math.nan, float("1e400"), 10**5000, -(10**5000)):
        assert leaf.refuses(value), f"{leaf.where} accepts {value!r:.20}"
    # YAML's `yes` / `true` is a truth value, never the number 1.
    for value in (True, False):
        assert leaf.refuses(value), f"{leaf.where} accepts {value!r}"


@pytest.mark.parametrize("leaf", [f for f in LEAVES if f.parser is not None], ids=lambda f: f.where)
def test_unit_quantities_refuse_overflowing_decimals(leaf: Leaf) -> None:
    unit = re.sub(r"^[-+.\deE]+", "", leaf.written(1.0))
    for text in ("1e400", "1e9999999999", "-1e9999999999"):
        assert leaf.refuses(text + unit), f"{leaf.where} accepts {text + unit}"


# --- the issue's cases, end to end ----------------------------------------------------

HEAD = "version: 1\nname: ranges\nduration: 20us\n"
TREE = "topology:\n  kind: fat_tree\n  gpus: 4\n  levels: 1\n  radix: 4\n"
SYNTHETIC = "workloads:\n  - kind: synthetic\n    pattern: uniform_random\n"
INFERENCE = (
    "workloads:\n  - kind: inference\n    requests:\n      kind: generator\n"
    "      prompt_tokens: 16\n      generated_tokens: 4\n      interval: 1ms\n"
)
COLLECTIVE = "workloads:\n  - kind: collective\n    sizes: [1MiB]\n"

# (name, scenario text, field the one error line names); the offending line ends in '# <-'.
ISSUE_CASES = [
    (
        "interval 1e-30ns",
        HEAD + TREE + SYNTHETIC + "    message_bytes: 4KiB\n    interval: 1e-30ns  # <-\n",
        "workloads[0].interval",
    ),
    (
        "load 1e300",
        HEAD + TREE + SYNTHETIC + "    message_bytes: 4KiB\n    load: 1e300  # <-\n",
        "workloads[0].load",
    ),
    (
        "inference count 1e400",
        HEAD + TREE + INFERENCE + "      count: 1e400  # <-\n",
        "workloads[0].requests.count",
    ),
    (
        "spines 2^31",
        HEAD + "topology:\n  kind: fat_tree\n  gpus: 8\n  spines: 2147483648  # <-\n",
        "topology.spines",
    ),
    (
        "size 1e30B",
        HEAD + TREE + SYNTHETIC + "    message_bytes: 1e30B  # <-\n    load: 0.5\n",
        "workloads[0].message_bytes",
    ),
    (
        "fat tree levels 1e9",
        HEAD + "topology:\n  kind: fat_tree\n  gpus: 8\n  levels: 1000000000  # <-\n",
        "topology.levels",
    ),
    (
        "nvswitch planes 1e5",
        HEAD + "topology:\n  kind: nvswitch\n  gpus: 8\n  planes: 100000  # <-\n"
        "  links_per_gpu: 100000\n",
        "topology.planes",
    ),
    (
        "direct rc of 1e6 GPUs",
        HEAD + "topology:\n  kind: direct_rc\n  gpus: 1000000  # <-\n",
        "topology.gpus",
    ),
    (
        "fat tree of 2^63 GPUs",
        HEAD + "topology:\n  kind: fat_tree\n  gpus: 9223372036854775808  # <-\n",
        "topology.gpus",
    ),
    (
        "min_messages 1e9",
        HEAD + TREE + COLLECTIVE + "    min_messages: 1000000000  # <-\n",
        "workloads[0].min_messages",
    ),
    (
        "decimal overflow in a time",
        HEAD.replace("20us", "1e9999999999ns  # <-"),
        "duration",
    ),
    (
        "nvswitch too many GPU-plane links",
        HEAD + "topology:\n  kind: nvswitch\n  gpus: 65536\n  planes: 64  # <-\n"
        "  links_per_gpu: 64\n",
        "topology.planes",
    ),
    (
        "cdc frequency with a huge exponent",
        HEAD + TREE + "link_layer:\n  cdc:\n    write_clock: 1e99999999999GHz  # <-\n",
        "link_layer.cdc.write_clock",
    ),
]


def _marked_line(text: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.endswith("# <-"))


@pytest.mark.parametrize(("name", "text", "field"), ISSUE_CASES, ids=[c[0] for c in ISSUE_CASES])
def test_issue_cases_are_located_bad_input(
    tmp_path: Path, name: str, text: str, field: str
) -> None:
    path = tmp_path / "case.yaml"
    path.write_text(text)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, (name, result.output)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith(f"error: {path}:{_marked_line(text)}: {field}: "), lines[0]
    assert "Traceback" not in result.output


def _overflowing(*_args: object) -> None:
    raise OverflowError("int too large to convert to float")


@pytest.mark.parametrize(
    ("module", "name"),
    [
        # Inside a model validator, while the scenario loads.
        ("sitssim.scenario", "FatTree.link_count"),
        # Inside the model, once the scenario has loaded.
        ("sitssim.preflight", "build_fabric"),
    ],
)
def test_an_exception_inside_the_model_is_still_internal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, name: str
) -> None:
    """Exit 2 comes only from an InputError; no catch-all turns a model bug into bad input."""
    import importlib

    target: Any = importlib.import_module(module)
    *owner, attr = name.split(".")
    for part in owner:
        target = getattr(target, part)
    monkeypatch.setattr(target, attr, _overflowing)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    path = tmp_path / "ok.yaml"
    path.write_text(HEAD + TREE)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 3, result.output
    assert "internal error: OverflowError" in result.output


VIOLATIONS = sorted((ROOT / "scenarios" / "violations").glob("*.yaml"))


@pytest.mark.parametrize("path", VIOLATIONS, ids=[p.stem for p in VIOLATIONS])
def test_spec_violations_are_still_valid_input(path: Path) -> None:
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output

"""Scenario files: the versioned YAML schema, loading, and error messages.

A scenario is read in three steps, each of which can reject it with an
``InputError`` naming file, line and field:

1. YAML is composed (not constructed) and every node's tag is checked, so a
   tag that would build a Python object is refused before anything runs.
2. The round-trip loader gives plain data plus line numbers for every key.
3. Pydantic models (unknown keys forbidden) validate and convert units.

Cross-references that need the built fabric (a workload naming a node that
does not exist) are checked by the builders, which raise ``InputError`` with
the field's location; ``Scenario.locate`` turns that location into a line.

A scenario that *asks* for something the spec forbids (12 GPUs in a fat tree,
a 9-hop chain) is valid input: it runs, and its clause fails.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from sitssim.errors import InputError
from sitssim.units import parse_length_m, parse_rate_gts, parse_size_bytes, parse_time_ns

SCHEMA_VERSION = 1

Duration = Annotated[float, BeforeValidator(parse_time_ns)]
PositiveDuration = Annotated[float, BeforeValidator(parse_time_ns), Field(gt=0)]
NonNegDuration = Annotated[float, BeforeValidator(parse_time_ns), Field(ge=0)]
PositiveSize = Annotated[int, BeforeValidator(parse_size_bytes), Field(gt=0)]
PositiveRate = Annotated[float, BeforeValidator(parse_rate_gts), Field(gt=0)]
NonNegLength = Annotated[float, BeforeValidator(parse_length_m), Field(ge=0)]
PositiveInt = Annotated[int, Field(gt=0, strict=True)]
NodeName = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]*$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- links -------------------------------------------------------------------

ENCODINGS = ("flit256", "128b130b", "8b10b", "none")


class LinkProfile(_Strict):
    """One direction's signalling: rate per lane, lanes, line encoding, flight time."""

    rate: PositiveRate = Field(default=64.0, description="per-lane signalling rate (GT/s)")
    lanes: PositiveInt = 16
    encoding: Literal["flit256", "128b130b", "8b10b", "none"] = "flit256"
    modulation: Literal["pam4", "nrz"] = "pam4"
    propagation: NonNegDuration | None = None
    length: NonNegLength | None = None

    @model_validator(mode="after")
    def _one_flight_time(self) -> LinkProfile:
        if self.propagation is not None and self.length is not None:
            raise ValueError("give either 'propagation' or 'length', not both")
        return self


# --- topology ----------------------------------------------------------------


class FatTree(_Strict):
    """Switch fat tree: leaf switches of ``radix`` GPU ports, aggregated level by level."""

    kind: Literal["fat_tree"]
    gpus: PositiveInt
    levels: PositiveInt = 2
    radix: PositiveInt = 4
    spines: PositiveInt = 1
    link: str = "default"
    root_complex: bool = True

    @model_validator(mode="after")
    def _fits(self) -> FatTree:
        if self.levels == 1 and self.spines != 1:
            raise ValueError("a one-level fat tree has a single switch; 'spines' must be 1")
        capacity = self.radix**self.levels if self.spines == 1 else None
        if capacity is not None and self.gpus > capacity:
            raise ValueError(
                f"{self.gpus} GPUs do not fit a {self.levels}-level tree of radix "
                f"{self.radix} (at most radix**levels = {capacity})"
            )
        if self.spines > 1:
            below = self.gpus
            for _ in range(self.levels - 1):
                below = -(-below // self.radix)
            if below > self.radix:
                raise ValueError(
                    f"each spine would need {below} down ports but the radix is {self.radix}"
                )
        return self


class DirectRC(_Strict):
    """A root complex with every GPU on its own link; GPU-to-GPU traffic turns at the RC."""

    kind: Literal["direct_rc"]
    gpus: PositiveInt
    link: str = "default"


class NVSwitchFabric(_Strict):
    """HGX-style: every GPU has ``links_per_gpu`` links spread over ``planes`` switches."""

    kind: Literal["nvswitch"]
    gpus: PositiveInt
    planes: PositiveInt = 4
    links_per_gpu: PositiveInt = 18
    link: str = "default"

    @model_validator(mode="after")
    def _every_plane_reached(self) -> NVSwitchFabric:
        if self.links_per_gpu < self.planes:
            raise ValueError(
                f"{self.links_per_gpu} links per GPU cannot reach all {self.planes} planes"
            )
        return self


class GraphNode(_Strict):
    id: NodeName
    kind: Literal["gpu", "switch", "root_complex"]
    level: PositiveInt = 1


class GraphEdge(_Strict):
    a: NodeName
    b: NodeName
    link: str = "default"
    links: PositiveInt = 1


class GraphTopology(_Strict):
    """Explicit nodes and edges, for anything the builders do not cover."""

    kind: Literal["graph"]
    nodes: list[GraphNode] = Field(min_length=1)
    edges: list[GraphEdge] = Field(default_factory=list)


Topology = Annotated[
    Union[FatTree, DirectRC, NVSwitchFabric, GraphTopology],  # noqa: UP007
    Field(discriminator="kind"),
]


# --- devices -----------------------------------------------------------------


class SwitchParams(_Strict):
    arbitration: NonNegDuration | list[NonNegDuration] = Field(
        default=40.0, description="arbitration latency per switch level (one value or per level)"
    )
    vcs_per_port: PositiveInt = 8

    def arbitration_ns(self, level: int) -> float:
        """Arbitration latency of a switch at ``level`` (1 = leaf)."""
        if isinstance(self.arbitration, list):
            return self.arbitration[min(level, len(self.arbitration)) - 1]
        return self.arbitration


class RootComplexParams(_Strict):
    arbitration: NonNegDuration = 20.0
    tso_window: PositiveDuration | None = None


class Tenant(_Strict):
    name: NodeName


# --- workloads ---------------------------------------------------------------

PATTERNS = (
    "pair",
    "uniform_random",
    "permutation",
    "hotspot",
    "tornado",
    "bit_complement",
    "transpose",
    "shuffle",
)


class SyntheticWorkload(_Strict):
    """Open-loop synthetic traffic from every source GPU (or the listed ones)."""

    kind: Literal["synthetic"]
    name: str | None = None
    pattern: Literal[
        "pair",
        "uniform_random",
        "permutation",
        "hotspot",
        "tornado",
        "bit_complement",
        "transpose",
        "shuffle",
    ]
    src: NodeName | None = None
    dst: NodeName | None = None
    sources: list[NodeName] | None = None
    arrivals: Literal["poisson", "periodic"] = "poisson"
    message_bytes: PositiveSize
    load: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    interval: PositiveDuration | None = None
    start: NonNegDuration = 0.0
    stop: PositiveDuration | None = None
    tenant: NodeName | None = None
    hotspot: NodeName | None = None
    hotspot_fraction: Annotated[float, Field(gt=0, le=1)] = 0.5

    @model_validator(mode="after")
    def _consistent(self) -> SyntheticWorkload:
        if (self.load is None) == (self.interval is None):
            raise ValueError("give exactly one of 'load' or 'interval'")
        if self.pattern == "pair" and (self.src is None or self.dst is None):
            raise ValueError("pattern 'pair' needs 'src' and 'dst'")
        if self.pattern != "pair" and (self.src is not None or self.dst is not None):
            raise ValueError("'src' and 'dst' belong to pattern 'pair'; use 'sources' instead")
        if self.pattern == "pair" and self.src == self.dst:
            raise ValueError("'src' and 'dst' must differ")
        if self.stop is not None and self.stop <= self.start:
            raise ValueError("'stop' must come after 'start'")
        return self


class ProbeWorkload(_Strict):
    """Non-posted request / completion pairs that measure round trips under load."""

    kind: Literal["probes"]
    name: str | None = None
    requester: NodeName | None = None
    targets: list[NodeName] | None = None
    interval: PositiveDuration = 1000.0
    request_bytes: PositiveSize = 32
    completion_bytes: PositiveSize = 96
    turnaround: NonNegDuration = 0.0
    start: NonNegDuration = 0.0
    tenant: NodeName | None = None


Workload = Annotated[
    Union[SyntheticWorkload, ProbeWorkload],  # noqa: UP007
    Field(discriminator="kind"),
]


# --- the scenario ------------------------------------------------------------


@dataclass(frozen=True)
class SourceInfo:
    """Where a scenario came from, for error messages and the report."""

    path: str
    sha256: str
    lines: dict[tuple, int] = field(default_factory=dict)

    def line_of(self, loc: Iterable[Any]) -> int | None:
        """Line of the deepest known prefix of ``loc`` (1-based)."""
        key = tuple(loc)
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key[:-1]
        return None


class Scenario(_Strict):
    version: Literal[1] = SCHEMA_VERSION
    name: NodeName
    description: str = ""
    seed: Annotated[int, Field(ge=0, strict=True)] = 0
    duration: PositiveDuration
    topology: Topology
    links: dict[NodeName, LinkProfile] = Field(default_factory=lambda: {"default": LinkProfile()})
    switch: SwitchParams = Field(default_factory=SwitchParams)
    root_complex: RootComplexParams = Field(default_factory=RootComplexParams)
    tenants: list[Tenant] = Field(default_factory=lambda: [Tenant(name="default")], min_length=1)
    workloads: list[Workload] = Field(default_factory=list)

    _source: SourceInfo | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        profiles = set(self.links)
        topo = self.topology
        if isinstance(topo, GraphTopology):
            for i, edge in enumerate(topo.edges):
                if edge.link not in profiles:
                    raise _LocatedValueError(
                        ("topology", "edges", i, "link"),
                        f"unknown link profile {edge.link!r}; defined: {sorted(profiles)}",
                    )
        elif topo.link not in profiles:
            raise _LocatedValueError(
                ("topology", "link"),
                f"unknown link profile {topo.link!r}; defined: {sorted(profiles)}",
            )
        tenants = [t.name for t in self.tenants]
        if len(set(tenants)) != len(tenants):
            raise _LocatedValueError(("tenants",), "tenant names must be unique")
        for i, wl in enumerate(self.workloads):
            if wl.tenant is not None and wl.tenant not in tenants:
                raise _LocatedValueError(
                    ("workloads", i, "tenant"), f"unknown tenant {wl.tenant!r}; defined: {tenants}"
                )
        if isinstance(self.switch.arbitration, list) and not self.switch.arbitration:
            raise _LocatedValueError(("switch", "arbitration"), "give at least one latency")
        return self

    @property
    def source(self) -> SourceInfo:
        return self._source or SourceInfo(path="<memory>", sha256="")

    def error(self, loc: tuple, message: str) -> InputError:
        """An ``InputError`` at scenario location ``loc`` (a path of keys and indices)."""
        return InputError(
            message=message,
            file=self.source.path,
            line=self.source.line_of(loc),
            field=_dotted(loc),
        )


class _LocatedValueError(ValueError):
    """A validation failure that knows which field it is about."""

    def __init__(self, loc: tuple, message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message


# --- loading -----------------------------------------------------------------

_PLAIN_TAGS = {
    "tag:yaml.org,2002:" + name
    for name in ("str", "int", "float", "bool", "null", "map", "seq", "omap")
}


def _dotted(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _check_tags(node: Any, path: str) -> None:
    stack = [node]
    while stack:
        current = stack.pop()
        if current is None:
            continue
        if current.tag not in _PLAIN_TAGS:
            raise InputError(
                f"YAML tag {current.tag!r} is not allowed: scenarios hold plain data only",
                file=path,
                line=current.start_mark.line + 1,
            )
        if isinstance(current.value, list):
            for item in current.value:
                stack.extend(item if isinstance(item, tuple) else (item,))


def _line_map(data: Any) -> dict[tuple, int]:
    lines: dict[tuple, int] = {}
    stack: list[tuple[tuple, Any]] = [((), data)]
    while stack:
        prefix, node = stack.pop()
        if isinstance(node, CommentedMap):
            for key, value in node.items():
                lines[(*prefix, key)] = node.lc.key(key)[0] + 1
                stack.append(((*prefix, key), value))
        elif isinstance(node, CommentedSeq):
            for i, value in enumerate(node):
                lines[(*prefix, i)] = node.lc.item(i)[0] + 1
                stack.append(((*prefix, i), value))
    return lines


def _plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The pydantic model that owns the last key of ``loc`` (for suggestions)."""
    model: Any = Scenario
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue
        if part in _KIND_MODELS:
            model = _KIND_MODELS[part]
            continue
        info = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if info is None:
            return None
        model = _first_model(info.annotation)
    return model if hasattr(model, "model_fields") else None


def _first_model(annotation: Any) -> Any:
    stack = [annotation]
    while stack:
        current = stack.pop(0)
        if isinstance(current, type) and issubclass(current, BaseModel):
            return current
        stack.extend(getattr(current, "__args__", ()))
    return None


_KIND_MODELS: dict[str, type[BaseModel]] = {
    "fat_tree": FatTree,
    "direct_rc": DirectRC,
    "nvswitch": NVSwitchFabric,
    "graph": GraphTopology,
    "synthetic": SyntheticWorkload,
    "probes": ProbeWorkload,
}


def _message(err: dict) -> str:
    kind = err["type"]
    loc = err["loc"]
    if kind == "extra_forbidden":
        model = _model_at(loc)
        hint = ""
        if model is not None:
            close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            hint += f" (valid keys: {', '.join(model.model_fields)})"
        return f"unknown key{hint}"
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":
        got = err["input"].get("kind")
        return f"unknown kind {got!r}; expected one of {err['ctx']['expected_tags']}"
    if kind == "union_tag_not_found":
        return f"a 'kind' is required ({err['ctx'].get('discriminator', 'kind')})"
    text = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        text = text.removeprefix(prefix)
    got = err.get("input")
    if kind not in ("value_error",) and not isinstance(got, dict | list):
        text += f" (got {got!r})"
    return text


def _strip_union_tags(loc: tuple) -> tuple:
    return tuple(part for part in loc if not (isinstance(part, str) and part in _KIND_MODELS))


def scenario_from_data(
    data: Any, path: str = "<memory>", lines: dict | None = None, sha256: str = ""
) -> Scenario:
    """Validate already-parsed data; raise ``InputError`` on the first problem."""
    source = SourceInfo(path=path, sha256=sha256, lines=lines or {})
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a YAML {type(data).__name__}"
        raise InputError(
            f"expected a mapping of scenario fields at the top level, got {kind}",
            file=path,
            line=1 if data is not None else None,
        )
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        ctx_error = err.get("ctx", {}).get("error")
        if isinstance(ctx_error, _LocatedValueError):
            loc = ctx_error.loc
            message = ctx_error.message
        else:
            loc = _strip_union_tags(tuple(err["loc"]))
            message = _message(err)
        raise InputError(
            message, file=path, line=source.line_of(loc), field=_dotted(loc) or None
        ) from None
    scenario._source = source
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    """Read, check and validate a scenario file."""
    path = Path(path)
    name = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError("no such scenario file", file=name) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a scenario file", file=name) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=name) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", file=name) from None
    if not text.strip():
        raise InputError("empty file: expected a YAML mapping of scenario fields", file=name)
    yaml = YAML(typ="rt")
    try:
        _check_tags(yaml.compose(text), name)
        data = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise InputError(f"not valid YAML: {problem}", file=name, line=line) from None
    except YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", file=name) from None
    lines = _line_map(data)
    return scenario_from_data(
        _plain(data), path=name, lines=lines, sha256=hashlib.sha256(raw).hexdigest()
    )

"""Hypothesis strategies that turn a shipped scenario into a fuzzed document.

A document starts as one of the shipped scenarios, read with ruamel's round-trip
loader so that mutations see the same mappings, lists and flow styles as the
file. Three families of mutation are drawn:

- *mild* ones keep the scenario meaningful (another seed, keys reordered, a time
  respelt in another unit, a load within range, comments, CRLF, block style), so
  that a good share of the documents are valid scenarios and the fuzz reaches the
  builders and checks behind the schema, not only the schema's first refusal;
- *data* ones edit the tree: drop, add, retype, extreme values, unit swaps, list
  surgery, and raw YAML fragments (tags, anchors, deep nesting, odd numbers);
- *text* ones edit the dumped text: duplicate keys, truncation, stray bytes,
  alias bombs, whole documents that are not scenarios at all.

Raw fragments are planted as placeholder scalars and substituted after dumping,
because ruamel cannot be asked to write ``!!omap``, ``1e400`` or a 5,000-digit
integer as such.
"""

from __future__ import annotations

import copy
import functools
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"
SHIPPED = sorted(SCENARIOS.glob("*.yaml")) + sorted((SCENARIOS / "violations").glob("*.yaml"))
SHIPPED_TEXT = {p.relative_to(SCENARIOS).as_posix(): p.read_text(encoding="utf-8") for p in SHIPPED}

# Bases whose run at a 2 us duration takes well under a second (measured), so the
# sampled runs stay inside the suite's time budget.
FAST_RUN = (
    "direct_rc_host_io.yaml",
    "nvswitch_8gpu.yaml",
    "violations/cdc_undersized.yaml",
    "violations/chain_9hop.yaml",
    "violations/skew_asymmetric.yaml",
    "violations/tso_loaded.yaml",
)
RUN_DURATION = "2us"

_RAW = "FZRAW{}X"
_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z/µ]+)\s*$")
_KEY_LINE = re.compile(r"^\s*(?:- )?[A-Za-z_][\w.-]*:")

TIME_UNITS = {"ps": 1e-3, "ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
SIZE_UNITS = {"B": 1, "KB": 1000, "KiB": 1024, "MB": 1000**2, "MiB": 1024**2}
RATE_UNITS = {"GT/s": 1.0, "MT/s": 1e-3}
LENGTH_UNITS = {"mm": 1e-3, "cm": 1e-2, "m": 1.0}
FAMILIES = (TIME_UNITS, SIZE_UNITS, RATE_UNITS, LENGTH_UNITS)
ALIEN_UNITS = ("GT/s", "us", "B", "cm", "kb", "μs", "nS", "Hz", "GB/s", "%", "", "us us", "s/GT")

FIVE_THOUSAND_DIGITS = "9" * 5000
STRAY_CHARS = "\t:-{}[]'\"&*!%@`#|>?,"

# Numbers as YAML text: ruamel cannot write most of these, and they are the point.
RAW_NUMBERS = (
    "1e400",
    "-1e400",
    "1e999999",
    FIVE_THOUSAND_DIGITS,
    "-" + FIVE_THOUSAND_DIGITS,
    "1" + "0" * 400,
    ".inf",
    "-.inf",
    ".nan",
    "0x7fffffffffffffff",
    "0o777",
    "1_000",
    "+5",
    "-0",
    "5.",
    ".5",
    "1e-30",
    "٥",
    "５",
    "0b101",
    "1:30",
    "2001-12-14",
)
# Numbers as Python values, written by ruamel.
EXTREME_NUMBERS: tuple[Any, ...] = (
    0,
    -1,
    1,
    2,
    3,
    7,
    16,
    64,
    1024,
    65536,
    2**20,
    2**31 - 1,
    2**31,
    2**63,
    2**64,
    -(2**63),
    10**5,
    10**6,
    10**9,
    10**400,
    0.5,
    1e-30,
    1e300,
    -1e300,
    float("inf"),
    float("nan"),
    True,
    False,
)
QUANTITY_NUMBERS = (
    "1",
    "0.001",
    "65536",
    "1e6",
    "1e9",
    "0",
    "-1",
    "1e-30",
    "1e999999",
    "1e30",
    "1e300",
    "1e400",
    "nan",
    "inf",
    "-inf",
    FIVE_THOUSAND_DIGITS,
    str(2**63),
    "٥",
    "５",
    "1.5e3",
    "0x10",
    "1_000",
    "",
    "1e-400",
    "0.000000000000000000000000000001",
)
STRINGS: tuple[Any, ...] = (
    "",
    " ",
    "x" * 10_000,
    "é",
    "ü" * 300,
    "a b",
    "0",
    "null",
    "yes",
    "gpu0",
    "gpu999999",
    "rc0",
    "sw1.0",
    "default",
    "-leading",
    "tab\there",
    "line\nbreak",
    "\u2028",
    "\x00",
    "💥",
    "[not a list]",
    "{not: a map}",
    "*",
    "%",
)
ODD_KEYS: tuple[Any, ...] = (
    "bogus",
    "Kind",
    "",
    " ",
    "é",
    "a\nb",
    "kind",
    "<<",
    "x" * 300,
    1,
    0.5,
    True,
    None,
)
# Single-line YAML fragments planted as values.
RAW_FRAGMENTS = (
    "!!omap [{a: 1}, {b: 2}]",
    "!!set {a, b}",
    "!!python/object:os.system {}",
    "!!python/object/apply:os.system ['true']",
    "!!python/name:os.system ''",
    "!!binary aGVsbG8=",
    "!foo bar",
    "!<tag:example.com:x> 1",
    "!!str 5",
    "!!int '5'",
    "!!float 1",
    "!!bool yes",
    "!!null ''",
    "!!timestamp 2001-12-14",
    "!!map {a: 1}",
    "!!seq [1]",
    "&anchor 5",
    "*undefined_alias",
    "{a: 1, a: 2}",
    "{<<: {a: 1}}",
    "[1, [2, [3]]]",
    "? complex",
    "|",
    "'unterminated",
    '"\\x00\\uD800"',
    "@reserved",
    "`reserved",
    "{",
    "]",
    "- - -",
)


@dataclass
class Case:
    """One fuzzed document: its bytes, the base it came from and what was done to it."""

    base: str
    data: bytes
    mutations: list[str] = field(default_factory=list)
    run: bool = False

    def describe(self) -> str:
        return f"{self.base}: {'; '.join(self.mutations) or 'unchanged'}"

    def __repr__(self) -> str:
        # Hypothesis prints the falsifying case: the edits say more than a megabyte of bytes.
        head = self.data[:400].decode("utf-8", "replace")
        return f"Case({self.describe()!r}, {len(self.data)} bytes, starting {head!r})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def parse(text: str) -> CommentedMap:
    return _yaml().load(text)


@functools.cache
def _parsed(base: str) -> CommentedMap:
    """The shipped scenario's tree, parsed once: a deep copy is several times cheaper."""
    return parse(SHIPPED_TEXT[base])


def dump(data: Any, raw: list[str]) -> str:
    stream = io.StringIO()
    _yaml().dump(data, stream)
    text = stream.getvalue()
    # The closing X keeps FZRAW1X from matching inside FZRAW12X.
    for index, fragment in enumerate(raw):
        text = text.replace(_RAW.format(index), fragment)
    return text


def _slots(node: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in the tree: the places a mutation can act on."""
    found: list[tuple[Any, Any]] = []
    stack = [node]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, dict):
            for key, value in current.items():
                found.append((current, key))
                stack.append(value)
        elif isinstance(current, list):
            for index, value in enumerate(current):
                found.append((current, index))
                stack.append(value)
    return found


def _containers(node: Any, kind: type) -> list[Any]:
    out = [node] if isinstance(node, kind) else []
    out += [c[k] for c, k in _slots(node) if isinstance(c[k], kind)]
    return out


def _quantities(node: Any) -> list[tuple[Any, Any, float, str, dict]]:
    """Slots holding a quantity string, with its number, unit and unit family."""
    out = []
    for container, key in _slots(node):
        value = container[key]
        if not isinstance(value, str):
            continue
        match = _QUANTITY.match(value)
        if match is None:
            continue
        number, unit = match.groups()
        for family in FAMILIES:
            if unit in family:
                out.append((container, key, float(number), unit, family))
    return out


class Mutator:
    """Applies drawn mutations to one parsed document and records what it did."""

    def __init__(self, draw: st.DrawFn, data: CommentedMap, case: Case) -> None:
        self.draw = draw
        self.data = data
        self.case = case
        self.raw: list[str] = []

    def note(self, text: str) -> None:
        self.case.mutations.append(text)

    def plant(self, fragment: str) -> str:
        self.raw.append(fragment)
        return _RAW.format(len(self.raw) - 1)

    def slot(self) -> tuple[Any, Any] | None:
        slots = _slots(self.data)
        if not slots:
            return None
        return self.draw(st.sampled_from(slots))

    @staticmethod
    def where(container: Any, key: Any) -> str:
        return f"[{key!r}]" if isinstance(container, list) else f".{key}"

    # --- mild: the scenario keeps its meaning -------------------------------------

    def seed(self) -> None:
        self.data["seed"] = self.draw(st.integers(0, 2**32))
        self.note(f"seed={self.data['seed']}")

    def reorder(self) -> None:
        keys = list(self.data)
        order = self.draw(st.permutations(keys))
        moved = CommentedMap((k, self.data[k]) for k in order)
        self.data.clear()
        self.data.update(moved)
        self.note("top-level keys reordered")

    def describe(self) -> None:
        texts = ["", "fuzz: a 'quoted' # not a comment", "µ ü 💥", "x" * 500]
        text = self.draw(st.sampled_from(texts))
        self.data["description"] = text
        self.note(f"description={text[:20]!r}")

    def respell(self) -> None:
        quantities = _quantities(self.data)
        if not quantities:
            return
        container, key, number, unit, family = self.draw(st.sampled_from(quantities))
        if family is SIZE_UNITS:
            new = f"{int(number * family[unit])}{self.draw(st.sampled_from(['B', ' B']))}"
        else:
            target = self.draw(st.sampled_from(sorted(family)))
            value = number * family[unit] / family[target]
            sep = self.draw(st.sampled_from(["", " "]))
            new = f"{value!r}{sep}{target}"
        container[key] = new
        self.note(f"{key}: {new} (respelt from {number:g}{unit})")

    def load(self) -> None:
        workloads = self.data.get("workloads")
        loads = [w for w in workloads or [] if isinstance(w, dict) and "load" in w]
        if not loads:
            return
        target = self.draw(st.sampled_from(loads))
        target["load"] = self.draw(st.floats(0.01, 0.9).map(lambda x: round(x, 3)))
        self.note(f"load={target['load']}")

    def block_style(self) -> None:
        for node in _containers(self.data, dict) + _containers(self.data, list):
            node.fa.set_block_style()
        self.note("block style throughout")

    def quote(self) -> None:
        strings = [s for s in _slots(self.data) if isinstance(s[0][s[1]], str)]
        if not strings:
            return
        container, key = self.draw(st.sampled_from(strings))
        style = self.draw(st.sampled_from([DoubleQuotedScalarString, SingleQuotedScalarString]))
        container[key] = style(str(container[key]))
        self.note(f"{key} quoted")

    def share_profile(self) -> None:
        links = self.data.get("links")
        if not isinstance(links, dict) or not links:
            return
        name = self.draw(st.sampled_from(sorted(links)))
        links["spare_profile"] = links[name]
        self.note(f"links.spare_profile aliases links.{name}")

    MILD = (
        "seed",
        "reorder",
        "describe",
        "respell",
        "load",
        "block_style",
        "quote",
        "share_profile",
    )

    # --- data: the tree is edited ---------------------------------------------------

    def drop(self) -> None:
        chosen = self.slot()
        if chosen is None:
            return
        container, key = chosen
        del container[key]
        self.note(f"dropped {self.where(container, key)}")

    def add(self) -> None:
        maps = _containers(self.data, dict)
        target = self.draw(st.sampled_from(maps))
        existing = [k for k in target if isinstance(k, str)]
        typos = [k[:-1] for k in existing if len(k) > 1] + [k.upper() for k in existing]
        key = self.draw(st.sampled_from(list(ODD_KEYS) + typos))
        if key in target:
            return
        target[key] = self.value()
        self.note(f"added key {key!r}")

    def value(self) -> Any:
        """Any value at all, Python or raw YAML text."""
        pick = self.draw(st.integers(0, 5))
        if pick == 0:
            return self.draw(st.sampled_from(EXTREME_NUMBERS))
        if pick == 1:
            return self.draw(st.sampled_from(STRINGS))
        if pick == 2:
            return self.plant(self.draw(st.sampled_from(RAW_NUMBERS + RAW_FRAGMENTS)))
        if pick == 3:
            return self.draw(st.sampled_from([None, [], {}, [1], {"a": 1}, [[]], ["gpu0"]]))
        if pick == 4:
            return self.plant(self.nested())
        return self.plant(self.quantity())

    def nested(self) -> str:
        depth = self.draw(st.integers(1, 400))
        if self.draw(st.booleans()):
            return "[" * depth + "]" * depth
        return "{a: " * depth + "1" + "}" * depth

    def quantity(self) -> str:
        number = self.draw(st.sampled_from(QUANTITY_NUMBERS))
        unit = self.draw(st.sampled_from([u for f in FAMILIES for u in f] + list(ALIEN_UNITS)))
        return f"{number}{unit}"

    def retype(self) -> None:
        chosen = self.slot()
        if chosen is None:
            return
        container, key = chosen
        old = container[key]
        new = self.value()
        if type(new) is type(old):
            return
        container[key] = new
        self.note(f"{self.where(container, key)} retyped to {self.shown(new)}")

    def extreme(self) -> None:
        quantities = _quantities(self.data)
        numbers = [
            s
            for s in _slots(self.data)
            if isinstance(s[0][s[1]], int | float) and not isinstance(s[0][s[1]], bool)
        ]
        if quantities and (not numbers or self.draw(st.booleans())):
            container, key, _, unit, _ = self.draw(st.sampled_from(quantities))
            number = self.draw(st.sampled_from(QUANTITY_NUMBERS))
            container[key] = self.plant(f"{number}{unit}")
        elif numbers:
            container, key = self.draw(st.sampled_from(numbers))
            if self.draw(st.booleans()):
                container[key] = self.plant(self.draw(st.sampled_from(RAW_NUMBERS)))
            else:
                container[key] = self.draw(st.sampled_from(EXTREME_NUMBERS))
        else:
            return
        self.note(f"{self.where(container, key)} = {self.shown(container[key])}")

    def unit_swap(self) -> None:
        quantities = _quantities(self.data)
        if not quantities:
            return
        container, key, number, unit, family = self.draw(st.sampled_from(quantities))
        others = [u for f in FAMILIES if f is not family for u in f] + list(ALIEN_UNITS)
        new_unit = self.draw(st.sampled_from(others))
        container[key] = self.plant(f"{number:g}{new_unit}")
        self.note(f"{self.where(container, key)} unit {unit} -> {new_unit!r}")

    def list_surgery(self) -> None:
        lists = [x for x in _containers(self.data, list) if x]
        if not lists:
            return
        target = self.draw(st.sampled_from(lists))
        how = self.draw(st.sampled_from(["empty", "duplicate", "alias", "reverse", "scalar"]))
        if how == "empty":
            target.clear()
        elif how == "duplicate":
            target.append(copy.deepcopy(target[self.draw(st.integers(0, len(target) - 1))]))
        elif how == "alias":
            # The same object twice: ruamel writes an anchor and an alias.
            target.append(target[self.draw(st.integers(0, len(target) - 1))])
        elif how == "reverse":
            target.reverse()
        else:
            for container, key in _slots(self.data):
                if container[key] is target:
                    container[key] = target[0] if target else None
                    break
        self.note(f"list {how}")

    def fragment(self) -> None:
        chosen = self.slot()
        if chosen is None:
            return
        container, key = chosen
        container[key] = self.plant(self.draw(st.sampled_from(RAW_FRAGMENTS + RAW_NUMBERS)))
        self.note(f"{self.where(container, key)} = {self.shown(container[key])}")

    def deep(self) -> None:
        chosen = self.slot()
        if chosen is None:
            return
        container, key = chosen
        container[key] = self.plant(self.nested())
        depth = self.raw[-1].count("[") or self.raw[-1].count("{")
        self.note(f"{self.where(container, key)} nested {depth} deep")

    DATA = ("drop", "add", "retype", "extreme", "unit_swap", "list_surgery", "fragment", "deep")

    def shown(self, value: Any) -> str:
        """A value for the case's description, raw fragments as the YAML text they stand for."""
        match = re.fullmatch(_RAW.format(r"(\d+)"), value) if isinstance(value, str) else None
        text = self.raw[int(match.group(1))] if match else repr(value)
        return text if len(text) <= 40 else text[:37] + "..."


# --- text: the dumped document is edited -------------------------------------------


def _text_mutation(draw: st.DrawFn, text: str, case: Case) -> bytes:
    how = draw(
        st.sampled_from(
            [
                "duplicate_key",
                "delete_line",
                "truncate",
                "insert_char",
                "tab_indent",
                "bad_utf8",
                "utf16",
                "bom",
                "alias_bomb",
                "whole",
                "long_line",
                "nul",
            ]
        )
    )
    lines = text.splitlines(keepends=True)
    if how == "duplicate_key":
        keyed = [i for i, line in enumerate(lines) if _KEY_LINE.match(line)]
        i = draw(st.sampled_from(keyed))
        line = lines[i]
        # A copy of "- key:" continues the same item, so drop its dash.
        copy_line = re.sub(r"^(\s*)- ", r"\1  ", line)
        lines.insert(i + 1, copy_line if copy_line.endswith("\n") else copy_line + "\n")
        case.mutations.append(f"duplicate key line {i + 2}")
        return "".join(lines).encode()
    if how == "delete_line":
        i = draw(st.integers(0, len(lines) - 1))
        del lines[i]
        case.mutations.append(f"deleted line {i + 1}")
        return "".join(lines).encode()
    if how == "truncate":
        at = draw(st.integers(0, len(text)))
        case.mutations.append(f"truncated at {at}")
        return text[:at].encode()
    if how in ("insert_char", "nul"):
        at = draw(st.integers(0, len(text)))
        chars = ["\x00"] if how == "nul" else [*STRAY_CHARS, "\ufeff", "é", "\u2028", "\r"]
        char = draw(st.sampled_from(chars))
        case.mutations.append(f"inserted {char!r} at {at}")
        return (text[:at] + char + text[at:]).encode()
    if how == "tab_indent":
        indented = [i for i, line in enumerate(lines) if line.startswith("  ")]
        if not indented:
            return text.encode()
        i = draw(st.sampled_from(indented))
        lines[i] = "\t" + lines[i][2:]
        case.mutations.append(f"tab indent on line {i + 1}")
        return "".join(lines).encode()
    if how == "bad_utf8":
        raw = text.encode()
        at = draw(st.integers(0, len(raw)))
        case.mutations.append(f"byte 0xff at {at}")
        return raw[:at] + b"\xff" + raw[at:]
    if how == "utf16":
        case.mutations.append("UTF-16")
        return text.encode("utf-16")
    if how == "bom":
        case.mutations.append("UTF-8 BOM")
        return b"\xef\xbb\xbf" + text.encode()
    if how == "alias_bomb":
        levels = draw(st.integers(1, 6))
        fan = draw(st.integers(2, 10))
        case.mutations.append(f"alias bomb {fan}^{levels}")
        return (text + alias_bomb(levels, fan)).encode()
    if how == "long_line":
        size = draw(st.sampled_from([10_000, 100_000, 100_000, 1_000_000]))
        case.mutations.append(f"description of {size} chars")
        return (text + f"fuzz_long: {'x' * size}\n").encode()
    whole = draw(
        st.sampled_from(
            [
                "",
                "\n\n",
                "# only a comment\n",
                "---\n",
                "...\n",
                "~\n",
                "42\n",
                "- a\n- b\n",
                "name: x\n---\nname: y\n",
                "%YAML 1.1\n---\nname: x\n",
                "%YAML 9.9\n---\nname: x\n",
                "%TAG ! tag:evil.example,2026:\n---\n!x {}\n",
                "!!python/object/apply:os.system ['true']\n",
                "[" * 300 + "]" * 300 + "\n",
                "{a: " * 300 + "1" + "}" * 300 + "\n",
                "name: &a x\nversion: *a\n",
                "? [a, b]\n: c\n",
                "name: x\nname: y\n",
            ]
        )
    )
    case.mutations.append(f"whole document {whole[:30]!r}")
    return whole.encode()


def alias_bomb(levels: int, fan: int) -> str:
    """Top-level keys ``fuzz_bomb0..`` where each level aliases the one below ``fan`` times."""
    out = [f"fuzz_bomb0: &b0 [{', '.join(['lol'] * fan)}]"]
    for level in range(1, levels + 1):
        out.append(f"fuzz_bomb{level}: &b{level} [{', '.join([f'*b{level - 1}'] * fan)}]")
    return "\n".join(out) + "\n"


@st.composite
def fuzzed_documents(draw: st.DrawFn) -> Case:
    """A shipped scenario after 0-3 mild mutations and at most one hostile one."""
    base = draw(st.sampled_from(sorted(SHIPPED_TEXT)))
    case = Case(base=base, data=b"")
    data = copy.deepcopy(_parsed(base))
    mutator = Mutator(draw, data, case)
    family = draw(st.sampled_from(["mild", "mild", "data", "data", "data", "text"]))
    if base in FAST_RUN and draw(st.integers(0, 19)) == 0:
        case.run = True
        data["duration"] = RUN_DURATION
        case.mutations.append(f"duration={RUN_DURATION} for a run")
    mild = [m for m in Mutator.MILD if not (case.run and m == "respell")]
    for name in draw(st.lists(st.sampled_from(mild), max_size=3 if family == "mild" else 1)):
        getattr(mutator, name)()
    if family == "data":
        getattr(mutator, draw(st.sampled_from(Mutator.DATA)))()
    text = dump(data, mutator.raw)
    if family == "text":
        case.data = _text_mutation(draw, text, case)
    elif family == "mild" and draw(st.booleans()):
        case.data = _mild_text(draw, text, case)
    else:
        case.data = text.encode()
    return case


def _mild_text(draw: st.DrawFn, text: str, case: Case) -> bytes:
    """Edits of the text that leave the document's meaning alone."""
    how = draw(st.sampled_from(["crlf", "markers", "comments", "directive"]))
    case.mutations.append(how)
    if how == "crlf":
        return text.replace("\n", "\r\n").encode()
    if how == "markers":
        return f"---\n{text}...\n".encode()
    if how == "directive":
        return f"%YAML 1.2\n---\n{text}".encode()
    lines = text.splitlines(keepends=True)
    top = [i for i, line in enumerate(lines) if re.match(r"^[A-Za-z_]", line)]
    for i in sorted(draw(st.lists(st.sampled_from(top), max_size=5, unique=True)), reverse=True):
        lines.insert(i, "# fuzz: a comment line: with [brackets] and 'quotes'\n")
    return ("".join(lines) + "# trailing comment").encode()

"""Bounds on a scenario file, checked before anything is built from it.

A scenario is a few kilobytes of plain data, so anything far larger, deeper or
stranger is refused up front rather than handed to code that would recurse,
expand or allocate without limit:

- The file must be a regular file (a FIFO would block, ``/dev/zero`` never
  ends) and is read to at most ``MAX_FILE_BYTES``.
- Each parser event is checked as the composer takes it, before the event's
  node exists: nesting depth (ruamel's composer recurses once per level),
  scalar length, the number of documents, tags, merge keys, anchors, and the
  number of nodes the data *expands* to. An alias counts as the size of the
  subtree it names, tracked per anchor as the stream goes by, so a
  billion-laughs document is refused after a few hundred events.

The expansion bound is what keeps the rest of the loader linear: the line
map and the conversion to plain data walk every expanded path (each path needs
its own line), so their work is at most ``MAX_NODES`` steps. An alias inside
the collection it names would make that walk endless, so it is refused too.
"""

from __future__ import annotations

import datetime
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.constructor import ConstructorError, DuplicateKeyError, RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    DocumentStartEvent,
    Event,
    NodeEvent,
    ScalarEvent,
)
from ruamel.yaml.nodes import Node, ScalarNode
from ruamel.yaml.parser import RoundTripParser
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.resolver import BaseResolver
from ruamel.yaml.scalarbool import ScalarBoolean

from sitssim.errors import InputError, one_line, shown
from sitssim.files import read_regular_file

MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_SCALAR_CHARS = 4096
# A number of more characters than this is no setting anyone means, and a 4096-digit hex
# integer would be past Python's 4300-digit limit the first time a message printed it.
MAX_NUMBER_CHARS = 100
# ruamel's pure-Python round-trip loader takes 50-200 µs a node, so this keeps the
# slowest document within the bounds near a second; a hand-written graph topology of
# 1,900 nodes and 1,900 edges fits (it loads in 1.6 s on a busy 2-core machine).
MAX_NODES = 20_000
MAX_DOCUMENTS = 1

YAML_TAG = "tag:yaml.org,2002:"
_MERGE_TAG = YAML_TAG + "merge"
_NUMBER_TAGS = {YAML_TAG + "int", YAML_TAG + "float"}
# '!' is the non-specific tag: plain text, mapping or list as the node's shape says.
# Timestamps are allowed because an unquoted date is YAML's reading of plain text.
ALLOWED_TAGS = {None, "!"} | {
    YAML_TAG + name for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
}


def read_scenario_bytes(name: str) -> bytes:
    """The scenario file's bytes: a regular file of at most ``MAX_FILE_BYTES``."""
    return read_regular_file(
        name,
        MAX_FILE_BYTES,
        "scenario",
        ": scenarios are a few kilobytes; is this the right file?",
    )


class _Bounds:
    """The state of one pass: open collections, anchor sizes, and the running total."""

    def __init__(self, name: str, resolver: BaseResolver) -> None:
        self.name = name
        self.nodes = 0
        self.first_line: int | None = None
        self.documents = 0
        # One entry per open collection: its anchor and the node count before it began.
        self.open: list[tuple[str | None, int]] = []
        self.sizes: dict[str, int] = {}
        self.anchored_at: dict[str, int] = {}
        self.resolver = resolver

    def refuse(self, message: str, line: int) -> InputError:
        return InputError(message, file=self.name, line=line)

    def node(self, event: NodeEvent, line: int) -> None:
        # str(): ruamel versions differ on whether a tag is a str or a Tag object.
        tag = None if event.tag is None else str(event.tag)
        if tag == _MERGE_TAG or (
            isinstance(event, ScalarEvent)
            and tag is None
            and event.value == "<<"
            and event.style is None
        ):
            raise self.refuse(
                "YAML merge keys ('<<') are not supported: write the fields out", line
            )
        if tag not in ALLOWED_TAGS:
            shown_tag = shown(tag.replace(YAML_TAG, "!!", 1))
            raise self.refuse(
                f"YAML tag {shown_tag} is not allowed: scenarios hold plain data only", line
            )
        anchor = event.anchor
        if anchor is not None:
            if anchor in self.anchored_at:
                raise self.refuse(
                    f"anchor {shown('&' + anchor)} is defined twice (first on line "
                    f"{self.anchored_at[anchor]}): give each anchor its own name",
                    line,
                )
            self.anchored_at[anchor] = line
        self.nodes += 1
        if self.first_line is None:
            self.first_line = line
        if isinstance(event, ScalarEvent):
            self.scalar(event, line)
            if anchor is not None:
                self.sizes[anchor] = 1
        else:
            if len(self.open) >= MAX_DEPTH:
                raise self.refuse(
                    f"nested more than {MAX_DEPTH} levels deep (bound: {MAX_DEPTH}): "
                    "scenarios nest a few levels; flatten the data",
                    line,
                )
            self.open.append((anchor, self.nodes - 1))

    def scalar(self, event: ScalarEvent, line: int) -> None:
        value = event.value
        if len(value) > MAX_SCALAR_CHARS:
            raise self.refuse(
                f"a value of {len(value)} characters (bound: {MAX_SCALAR_CHARS}): "
                "shorten it; scenario values are names, numbers and a short description",
                line,
            )
        if len(value) > MAX_NUMBER_CHARS and self.is_number(event):
            raise self.refuse(
                f"a number of {len(value)} characters (bound: {MAX_NUMBER_CHARS}): "
                "write it with an exponent or a unit prefix",
                line,
            )

    def is_number(self, event: ScalarEvent) -> bool:
        """Whether the constructor will read this scalar as an int or a float."""
        if event.tag is not None:
            return str(event.tag) in _NUMBER_TAGS
        if event.style is not None:
            return False
        return str(self.resolver.resolve(ScalarNode, event.value, (True, False))) in _NUMBER_TAGS

    def alias(self, event: AliasEvent, line: int) -> None:
        anchor = event.anchor
        size = self.sizes.get(anchor)
        if size is None:
            if anchor in self.anchored_at:
                raise self.refuse(
                    f"alias {shown('*' + anchor)} is inside the collection it names: "
                    "recursive data is not allowed",
                    line,
                )
            raise self.refuse(
                f"alias {shown('*' + anchor)} names no anchor defined before it", line
            )
        self.nodes += size

    def end(self) -> None:
        anchor, before = self.open.pop()
        if anchor is not None:
            self.sizes[anchor] = self.nodes - before

    def see(self, event: Event) -> None:
        """Account for one event; refuse it, at its line, if it passes a bound."""
        line = event.start_mark.line + 1
        if isinstance(event, AliasEvent):
            self.alias(event, line)
        elif isinstance(event, NodeEvent):
            self.node(event, line)
        elif isinstance(event, CollectionEndEvent):
            self.end()
        elif isinstance(event, DocumentStartEvent):
            self.document(event, line)
        if self.nodes > MAX_NODES:
            raise self.refuse(
                f"the data expands to more than {MAX_NODES} nodes (bound: {MAX_NODES}), "
                "counting each alias as the nodes it repeats: use fewer or smaller aliases",
                line,
            )

    def document(self, event: DocumentStartEvent, line: int) -> None:
        self.documents += 1
        if self.documents > MAX_DOCUMENTS:
            raise self.refuse(
                f"a second YAML document (bound: {MAX_DOCUMENTS}): a scenario file holds "
                "one mapping; remove the '---' or split the file",
                line,
            )
        if event.version not in (None, (1, 2)):
            version = ".".join(map(str, event.version))
            raise self.refuse(
                f"YAML {version} is not read: scenarios are YAML 1.2 (remove the %YAML line)",
                line,
            )


class _BoundedParser(RoundTripParser):
    """ruamel's round-trip parser, checking each event the moment it is produced.

    The composer peeks at an event before it builds that event's node, and
    composes the whole document before anything is constructed, so a refusal
    here comes before any node past a bound exists and before any tag has
    built anything. One parse serves both the check and the load.
    """

    bounds: _Bounds

    def _produce(self) -> None:
        # The base class makes each event in whichever of these three asks first.
        if self.current_event is None and self.state:
            self.current_event = self.state()
            if self.current_event is not None:
                self.bounds.see(self.current_event)

    def check_event(self, *choices: Any) -> bool:
        self._produce()
        return super().check_event(*choices)

    def peek_event(self) -> Any:
        self._produce()
        return super().peek_event()

    def get_event(self) -> Any:
        self._produce()
        return super().get_event()


class _LocatedConstructor(RoundTripConstructor):
    """ruamel's round-trip constructor, with a line for the scalars it cannot build.

    The resolver takes some text for a date or a number that the constructor
    then fails on with a bare ``ValueError``, ``IndexError`` or ``KeyError``
    (``2001-13-45``, ``0x_``, ``._``, ``!!bool yes``); that is the file's fault,
    so it becomes a located YAML error.
    """

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, LookupError, OverflowError) as exc:
            tag = str(node.tag).replace(YAML_TAG, "!!", 1)
            what = shown(node.value) if isinstance(node, ScalarNode) else "this node"
            raise ConstructorError(
                problem=f"{what} does not read as {tag} ({one_line(str(exc), 80)}); "
                "quote it if it is text",
                problem_mark=node.start_mark,
            ) from None


def _yaml_problem(exc: MarkedYAMLError) -> str:
    """ruamel's description of the problem, without the values it quotes in full."""
    problem = exc.problem or exc.context or "invalid YAML"
    if isinstance(exc, DuplicateKeyError):
        # ruamel goes on to quote both values whole; the key and the line are what help.
        problem = problem.split('" with value "', 1)[0] + '"'
    return problem


def load_yaml(raw: bytes, name: str, what: str = "scenario") -> Any:
    """The round-trip data of one bounded YAML document (a ``what`` file), or a located
    ``InputError``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not UTF-8 text (byte {exc.start})", file=name, line=line) from None
    yaml = YAML(typ="rt")
    yaml.Parser = _BoundedParser
    yaml.Constructor = _LocatedConstructor
    yaml.parser.bounds = _Bounds(name, yaml.resolver)
    try:
        data = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise InputError(f"not valid YAML: {_yaml_problem(exc)}", file=name, line=line) from None
    except ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise InputError(
            f"not valid YAML: {exc.reason} ({shown(chr(exc.character))})", file=name, line=line
        ) from None
    except YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", file=name) from None
    first = yaml.parser.bounds.first_line
    if data is None and first is not None:
        # `~`, `null` or an empty value: a document, just not a mapping.
        message = f"expected a mapping of {what} fields at the top level, got null"
        raise InputError(message, file=name, line=first)
    return data


def line_map(data: Any) -> dict[tuple, int]:
    """Line of every key and list item, keyed like ``plain``'s data (string keys).

    The key ``()`` holds the line where the top-level node starts.

    Aliases make shared subtrees, and every path through them gets its lines, so this
    walks the expanded data: ``load_yaml`` bounded that to ``MAX_NODES`` and refused
    recursive aliases before the data was built.
    """
    lines: dict[tuple, int] = {}
    if isinstance(data, CommentedMap | CommentedSeq):
        lines[()] = data.lc.line + 1
    stack: list[tuple[tuple, Any]] = [((), data)]
    while stack:
        prefix, node = stack.pop()
        if isinstance(node, CommentedMap):
            for key, value in node.items():
                lines[(*prefix, str(key))] = node.lc.key(key)[0] + 1
                stack.append(((*prefix, str(key)), value))
        elif isinstance(node, CommentedSeq):
            for i, value in enumerate(node):
                lines[(*prefix, i)] = node.lc.item(i)[0] + 1
                stack.append(((*prefix, i), value))
    return lines


def line_of(lines: dict[tuple, int], loc: tuple) -> int | None:
    """Line of the deepest prefix of ``loc`` that ``lines`` (a ``line_map``) knows."""
    key = tuple(loc)
    while key:
        if key in lines:
            return lines[key]
        key = key[:-1]
    return None


def plain(node: Any) -> Any:
    """Builtin types only: ruamel's scalar subclasses would leak into messages and reports."""
    if isinstance(node, TaggedScalar):
        # What ruamel keeps of an explicit '!!str 123' to write the tag back: the text.
        return str(node.value)
    if isinstance(node, dict):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    if isinstance(node, bool | ScalarBoolean):
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, datetime.date):
        return str(node)
    return node

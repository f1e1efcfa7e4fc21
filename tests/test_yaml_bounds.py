"""Bounded scenario input: what the loader refuses before building anything, and where it says.

Each refusal must be an ``InputError`` that names the file, the line of the first
offending node and the bound, and it must come quickly: the point of the bounds
is that no document, however built, makes the loader recurse, expand or read
without limit.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from sitssim.errors import InputError, shown
from sitssim.files import read_regular_file
from sitssim.scenario import load_scenario, scenario_from_data
from sitssim.yaml_bounds import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_NODES,
    MAX_NUMBER_CHARS,
    MAX_SCALAR_CHARS,
    load_yaml,
)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "scenarios").glob("*.yaml")) + sorted(
    (ROOT / "scenarios" / "violations").glob("*.yaml")
)
GOOD = (
    "version: 1\nname: good\nduration: 2us\n"
    "topology: {kind: direct_rc, gpus: 2}\n"
    "workloads:\n  - {kind: probes, interval: 500ns}\n"
)


def refused(text: str | bytes, tmp_path: Path) -> InputError:
    """The error ``load_scenario`` raises for ``text`` written to a file."""
    path = tmp_path / "bad.yaml"
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    with pytest.raises(InputError) as info:
        load_scenario(path)
    assert info.value.file == str(path)
    return info.value


def one_line_message(error: InputError) -> str:
    message = str(error)
    assert "\n" not in message and "\r" not in message, message
    assert len(message) < 400, len(message)
    return message


def loads_within(path: Path, seconds: float) -> InputError:
    """``load_scenario(path)``'s error, failing the test if it does not come in time."""
    outcome: list[Exception] = []

    def load() -> None:
        try:
            load_scenario(path)
        except Exception as exc:  # handed to the test's thread, which judges it
            outcome.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"loading {path} blocked for {seconds} s"
    assert outcome and isinstance(outcome[0], InputError), outcome
    return outcome[0]


# --- aliases ------------------------------------------------------------------


def billion_laughs(levels: int = 9) -> str:
    """Ten-fold aliases, ``levels`` deep: 10**levels strings once expanded."""
    lines = ["version: 1", "name: lol", "a0: &a0 [" + ", ".join(["lol"] * 10) + "]"]
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def first_line_past_the_node_bound(levels: int) -> int:
    """The bomb's line at which the expanded node count first passes ``MAX_NODES``."""
    total = 1 + 2 + 2  # the top mapping, then 'version' and 'name' with their values
    size = 1 + 10  # a0: a list of ten strings
    for level in range(levels + 1):
        total += 1 + size  # the key, then the list it names
        if total > MAX_NODES:
            return 3 + level
        size = 1 + 10 * size
    raise AssertionError("the bomb stays within the bound")


def test_a_billion_laughs_is_refused_at_once_naming_a_line_and_the_bound(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lol.yaml"
    path.write_text(billion_laughs(9), encoding="utf-8")
    start = time.perf_counter()
    error = loads_within(path, 10)
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0, elapsed
    assert error.line == first_line_past_the_node_bound(9)
    message = one_line_message(error)
    assert f"bound: {MAX_NODES}" in message and "alias" in message


def test_aliases_within_the_bound_still_work(tmp_path: Path) -> None:
    path = tmp_path / "aliases.yaml"
    path.write_text(
        GOOD + "links:\n  default: &fast {rate: 64GT/s, lanes: 16}\n  spare: *fast\n",
        encoding="utf-8",
    )
    links = load_scenario(path).links
    assert links["spare"] == links["default"] and links["spare"].lanes == 16


def test_an_alias_inside_the_collection_it_names_is_refused(tmp_path: Path) -> None:
    # Composed, this is a list that contains itself: the line map would walk forever.
    error = refused(GOOD + "description: &loop [1, *loop]\n", tmp_path)
    assert error.line == GOOD.count("\n") + 1
    assert "recursive" in one_line_message(error)


def test_an_anchor_defined_twice_is_refused_at_the_second(tmp_path: Path) -> None:
    # ruamel would only warn, on stderr, in several lines.
    error = refused(GOOD + "seed: &n 1\ndescription: &n two\n", tmp_path)
    assert error.line == GOOD.count("\n") + 2
    assert "defined twice" in one_line_message(error)


def test_an_alias_to_no_anchor_is_refused(tmp_path: Path) -> None:
    error = refused(GOOD + "seed: *nowhere\n", tmp_path)
    assert error.line == GOOD.count("\n") + 1
    assert "'*nowhere'" in one_line_message(error)


# --- nesting, length, numbers -----------------------------------------------------


def nested(depth: int) -> str:
    """A block mapping ``depth`` levels deep; the mapping at depth d starts on line d."""
    return "".join("  " * level + f"l{level}:\n" for level in range(depth - 1)) + (
        "  " * (depth - 1) + "leaf: x\n"
    )


def test_nesting_at_the_bound_is_read() -> None:
    data = load_yaml(nested(MAX_DEPTH).encode(), "deep.yaml")
    for level in range(MAX_DEPTH - 1):
        data = data[f"l{level}"]
    assert data == {"leaf": "x"}


def test_nesting_past_the_bound_is_refused_at_the_deepest_line() -> None:
    with pytest.raises(InputError) as info:
        load_yaml(nested(MAX_DEPTH + 1).encode(), "deep.yaml")
    assert (info.value.file, info.value.line) == ("deep.yaml", MAX_DEPTH + 1)
    assert f"bound: {MAX_DEPTH}" in one_line_message(info.value)


def test_flow_lists_nested_hundreds_deep_do_not_reach_the_recursive_composer(
    tmp_path: Path,
) -> None:
    error = refused(GOOD + "description: " + "[" * 300 + "]" * 300 + "\n", tmp_path)
    assert error.line == GOOD.count("\n") + 1
    assert f"bound: {MAX_DEPTH}" in one_line_message(error)


def test_a_scalar_past_the_length_bound_is_refused_without_echoing_it(tmp_path: Path) -> None:
    error = refused(GOOD + "description: " + "a" * (MAX_SCALAR_CHARS + 1) + "\n", tmp_path)
    assert error.line == GOOD.count("\n") + 1
    message = one_line_message(error)
    assert f"bound: {MAX_SCALAR_CHARS}" in message and "aaaaaaaaaa" not in message


def test_a_long_description_within_the_bound_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "long.yaml"
    text = "word " * (MAX_SCALAR_CHARS // 5)
    path.write_text(GOOD + f"description: '{text}'\n", encoding="utf-8")
    assert load_scenario(path).description == text


def test_a_5000_digit_integer_is_refused_located(tmp_path: Path) -> None:
    error = refused(GOOD + "seed: " + "9" * 5000 + "\n", tmp_path)
    assert error.line == GOOD.count("\n") + 1
    assert "5000 characters" in one_line_message(error)


def test_a_long_number_within_the_scalar_bound_is_refused_as_a_number(tmp_path: Path) -> None:
    # 4,000 hex digits would be a 4,800-digit int: past the limit of Python's int-to-text.
    error = refused(GOOD + "seed: 0x" + "f" * 4000 + "\n", tmp_path)
    assert error.line == GOOD.count("\n") + 1
    assert f"bound: {MAX_NUMBER_CHARS}" in one_line_message(error)


def test_long_text_that_is_not_a_number_is_not_held_to_the_number_bound(tmp_path: Path) -> None:
    path = tmp_path / "text.yaml"
    text = "1 GPU " + "x" * (2 * MAX_NUMBER_CHARS)
    path.write_text(GOOD + f"description: {text}\n", encoding="utf-8")
    assert load_scenario(path).description == text


@pytest.mark.parametrize(
    ("value", "tag"),
    [("2001-13-45", "!!timestamp"), ("0x_", "!!int"), ("._", "!!float")],
    ids=["month-13", "hex-without-digits", "float-without-digits"],
)
def test_text_yaml_takes_for_a_date_or_number_it_cannot_build_is_refused_located(
    tmp_path: Path, value: str, tag: str
) -> None:
    # ruamel's resolver accepts these and its constructor then raises a bare ValueError.
    error = refused(GOOD + f"description: {value}\n", tmp_path)
    assert error.line == GOOD.count("\n") + 1
    message = one_line_message(error)
    assert f"{value!r} does not read as {tag}" in message and "quote it" in message


# --- tags, merge keys, documents, versions ---------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "!!omap [{a: 1}]",
        "!!pairs [{a: 1}]",
        "!!set {a, b}",
        "!!binary aGVsbG8=",
        "!!python/object:os.system {}",
        "!<tag:yaml.org,2002:python/name:os.system> x",
    ],
    ids=["omap", "pairs", "set", "binary", "python-object", "verbatim"],
)
def test_tags_beyond_plain_data_are_refused_located(tmp_path: Path, value: str) -> None:
    error = refused(GOOD + f"description: {value}\n", tmp_path)
    assert error.line == GOOD.count("\n") + 1
    assert "is not allowed" in one_line_message(error)


@pytest.mark.parametrize(
    ("value", "text"), [("! plain words", "plain words"), ("!!str 123", "123"), ("!!str", "")]
)
def test_the_text_tags_give_plain_text(tmp_path: Path, value: str, text: str) -> None:
    # ruamel keeps '!!str 123' as a TaggedScalar; the scenario must hold a str.
    path = tmp_path / "tagged.yaml"
    path.write_text(GOOD + f"description: {value}\n", encoding="utf-8")
    description = load_scenario(path).description
    assert type(description) is str and description == text


def test_an_explicit_bool_that_is_not_one_is_refused_located(tmp_path: Path) -> None:
    # ruamel's bool constructor raises a bare KeyError for this.
    error = refused(GOOD + "description: !!bool maybe\n", tmp_path)
    assert error.line == GOOD.count("\n") + 1
    assert "does not read as !!bool" in one_line_message(error)


def test_a_second_document_is_refused_at_its_marker(tmp_path: Path) -> None:
    error = refused(GOOD + "---\nname: again\n", tmp_path)
    assert error.line == GOOD.count("\n") + 1
    assert "bound: 1" in one_line_message(error)


def test_yaml_1_1_is_refused(tmp_path: Path) -> None:
    # 1.1 reads 'on:' as true and '=' as a tag that builds an object; scenarios are 1.2.
    error = refused("%YAML 1.1\n---\n" + GOOD, tmp_path)
    assert error.line == 2
    assert "YAML 1.1" in one_line_message(error)


def test_a_duplicate_key_names_the_key_not_its_values(tmp_path: Path) -> None:
    error = refused(GOOD + "description: " + "v" * 3000 + "\nname: twice\n", tmp_path)
    assert error.line == GOOD.count("\n") + 2
    message = one_line_message(error)
    assert 'duplicate key "name"' in message and "vvvvvvvvvv" not in message


def test_a_control_character_is_refused_on_its_line(tmp_path: Path) -> None:
    error = refused(GOOD + "description: a\x00b\n", tmp_path)
    assert error.line == GOOD.count("\n") + 1
    assert "'\\x00'" in one_line_message(error)


def test_bytes_that_are_not_utf8_are_refused_on_their_line(tmp_path: Path) -> None:
    error = refused(GOOD.encode() + b"description: caf\xe9\n", tmp_path)
    assert error.line == GOOD.count("\n") + 1
    assert "not UTF-8" in one_line_message(error)


# --- what is read at all ----------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    error = loads_within(fifo, 10)
    assert "named pipe" in one_line_message(error) and error.line is None


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_dev_zero_is_refused_without_reading_it() -> None:
    error = loads_within(Path("/dev/zero"), 10)
    assert "character device" in one_line_message(error)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    error = loads_within(tmp_path, 10)
    assert "is a directory" in one_line_message(error)


def test_a_file_past_the_size_bound_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# padding\n" * (2 * MAX_FILE_BYTES // 10))
    error = loads_within(big, 10)
    assert f"bound: {MAX_FILE_BYTES} bytes" in one_line_message(error)


def test_the_size_bound_is_inclusive(tmp_path: Path) -> None:
    path = tmp_path / "exact.yaml"
    path.write_bytes(b"x" * 10)
    assert read_regular_file(str(path), 10, "scenario") == b"x" * 10
    with pytest.raises(InputError, match="bound: 9 bytes"):
        read_regular_file(str(path), 9, "scenario")


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_shipped_scenario_is_well_inside_the_bounds(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.source.path == str(path)
    assert path.stat().st_size < MAX_FILE_BYTES // 100


# --- messages ---------------------------------------------------------------------


def test_an_echoed_10000_char_value_stays_one_short_line() -> None:
    # From data, not YAML, so no scalar bound stands in front of the message code.
    data = {"version": 1, "name": "é\n" * 5000, "duration": "2us"}
    with pytest.raises(InputError) as info:
        scenario_from_data(data, path="mem.yaml")
    message = one_line_message(info.value)
    assert "(10000 chars)" in message


def test_an_unknown_kind_of_10000_chars_is_clipped() -> None:
    data = {"version": 1, "name": "k", "duration": "2us", "topology": {"kind": "z" * 10000}}
    with pytest.raises(InputError) as info:
        scenario_from_data(data, path="mem.yaml")
    message = one_line_message(info.value)
    assert "unknown kind" in message and "(10000 chars)" in message and "fat_tree" in message


def test_a_message_with_newlines_is_printed_on_one_line() -> None:
    error = InputError("first\nsecond\r\nthird" * 500, file="f.yaml", line=3, field="x\ny")
    message = one_line_message(error)
    assert message.startswith("f.yaml:3: x\\ny: first\\nsecond\\r\\nthird")
    assert message.endswith("…")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a" * 5000, "'" + "a" * 60 + "…' (5000 chars)"),
        ("short", "'short'"),
        (10**5000, "an integer of about 5000 digits"),
        (-(10**300), "a negative integer of about 300 digits"),
        (2**63, "9223372036854775808"),
        (float("inf"), "inf"),
    ],
    ids=["long-text", "short-text", "huge-int", "huge-negative", "int", "inf"],
)
def test_shown_values_are_clipped(value: object, expected: str) -> None:
    assert shown(value) == expected

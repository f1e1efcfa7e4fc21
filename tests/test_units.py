"""Quantities with units: the forms scenario files may write, and the ones they may not."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from itertools import permutations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sitssim.units import (
    LENGTH_UNITS_M,
    RATE_UNITS_GT,
    SIZE_UNITS_B,
    TIME_UNITS_NS,
    UnitError,
    parse_length_m,
    parse_rate_gts,
    parse_size_bytes,
    parse_time_ns,
)

Parser = Callable[[object], float]
FAMILIES: list[tuple[Parser, dict, str]] = [
    (parse_time_ns, TIME_UNITS_NS, "time"),
    (parse_size_bytes, SIZE_UNITS_B, "size"),
    (parse_rate_gts, RATE_UNITS_GT, "signalling rate"),
    (parse_length_m, LENGTH_UNITS_M, "length"),
]
FAMILY_IDS = [what for _, _, what in FAMILIES]


@pytest.mark.parametrize(
    ("smaller", "larger", "ratio"),
    [
        ("1ps", "1ns", 1000),
        ("1ns", "1us", 1000),
        ("1us", "1ms", 1000),
        ("1ms", "1s", 1000),
        ("1us", "1µs", 1),
    ],
)
def test_time_units_scale_by_their_si_prefix(smaller: str, larger: str, ratio: int) -> None:
    assert parse_time_ns(larger) == pytest.approx(ratio * parse_time_ns(smaller), rel=1e-12)


def test_the_internal_time_unit_is_the_nanosecond() -> None:
    assert parse_time_ns("1ns") == 1.0


@pytest.mark.parametrize(
    ("smaller", "larger", "ratio"),
    [
        ("1B", "1KB", 1000),
        ("1KB", "1MB", 1000),
        ("1MB", "1GB", 1000),
        ("1B", "1KiB", 1024),
        ("1KiB", "1MiB", 1024),
        ("1MiB", "1GiB", 1024),
    ],
)
def test_size_units_are_decimal_and_binary_prefixes(smaller: str, larger: str, ratio: int) -> None:
    assert parse_size_bytes(larger) == ratio * parse_size_bytes(smaller)
    assert isinstance(parse_size_bytes(larger), int)


def test_rate_and_length_units() -> None:
    assert parse_rate_gts("1000MT/s") == pytest.approx(parse_rate_gts("1GT/s"))
    assert parse_length_m("100cm") == pytest.approx(parse_length_m("1m"))
    assert parse_length_m("10mm") == pytest.approx(parse_length_m("1cm"))


@pytest.mark.parametrize(
    ("text", "same_as"),
    [
        ("1.5us", "1500ns"),
        (" 1.5 us ", "1500ns"),
        (".5us", "500ns"),
        ("5.us", "5000ns"),
        ("1e3ns", "1us"),
        ("2.5E-1ms", "250us"),
        ("+7ns", "7ns"),
    ],
)
def test_accepted_number_forms(text: str, same_as: str) -> None:
    assert parse_time_ns(text) == pytest.approx(parse_time_ns(same_as), rel=1e-12)


def test_the_sign_is_kept_for_the_schema_to_judge() -> None:
    # Positivity is a field's rule (a start may be 0, a duration may not), not the parser's.
    assert parse_time_ns("-5ns") == -parse_time_ns("5ns")


@given(
    number=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    unit=st.sampled_from(sorted(TIME_UNITS_NS)),
)
def test_a_time_is_linear_in_its_number(number: float, unit: str) -> None:
    assert parse_time_ns(f"{number!r}{unit}") == pytest.approx(
        number * parse_time_ns(f"1{unit}"), rel=1e-12
    )


@given(
    digits=st.integers(min_value=0, max_value=10**9),
    places=st.integers(min_value=0, max_value=3),
    unit=st.sampled_from(["KB", "MB", "GB"]),
)
@example(digits=201, places=2, unit="KB")
def test_decimal_sizes_with_whole_bytes_are_exact(digits: int, places: int, unit: str) -> None:
    # '2.01KB' is exactly 2010 bytes; binary floating point would call it fractional.
    text = str(Decimal(digits).scaleb(-places))
    expected = Decimal(text) * parse_size_bytes(f"1{unit}")
    assert parse_size_bytes(f"{text}{unit}") == int(expected)


@pytest.mark.parametrize("text", ["1.5B", "0.1B", "1.0001KB", "0.3KiB"])
def test_fractional_bytes_are_rejected(text: str) -> None:
    with pytest.raises(UnitError, match="whole number of bytes"):
        parse_size_bytes(text)


def test_fractions_of_a_larger_unit_that_make_whole_bytes_are_accepted() -> None:
    assert parse_size_bytes("0.5KiB") == parse_size_bytes("512B")
    assert parse_size_bytes("1.5KB") == parse_size_bytes("1500B")


@pytest.mark.parametrize(("parse", "units", "what"), FAMILIES, ids=FAMILY_IDS)
@pytest.mark.parametrize("bare", [200, 1.5, 0, True, None])
def test_a_bare_number_is_rejected_naming_the_units(
    parse: Parser, units: dict, what: str, bare: object
) -> None:
    with pytest.raises(UnitError) as info:
        parse(bare)
    message = str(info.value)
    assert f"expected a {what} with a unit" in message
    assert all(unit in message for unit in units)
    assert repr(bare) in message


@pytest.mark.parametrize(("parse", "units", "what"), FAMILIES, ids=FAMILY_IDS)
@pytest.mark.parametrize("text", ["", "ns5", "5 n s", "five ns", "1,5ns", "inf ns", "--3ns"])
def test_malformed_quantities_are_rejected(
    parse: Parser, units: dict, what: str, text: str
) -> None:
    with pytest.raises(UnitError, match=f"expected a {what}"):
        parse(text)


@pytest.mark.parametrize(("parse", "units", "what"), FAMILIES, ids=FAMILY_IDS)
def test_an_unknown_unit_is_named(parse: Parser, units: dict, what: str) -> None:
    with pytest.raises(UnitError) as info:
        parse("200 furlongs")
    message = str(info.value)
    assert "unknown unit 'furlongs'" in message and f"expected a {what}" in message


@pytest.mark.parametrize(
    ("family", "other"),
    list(permutations(range(len(FAMILIES)), 2)),
    ids=[f"{FAMILY_IDS[a]}<-{FAMILY_IDS[b]}" for a, b in permutations(range(len(FAMILIES)), 2)],
)
def test_a_unit_of_another_quantity_is_called_out(family: int, other: int) -> None:
    parse, _, what = FAMILIES[family]
    _, other_units, other_what = FAMILIES[other]
    with pytest.raises(UnitError, match=f"is a {other_what} unit.*expected a {what}"):
        parse(f"4{next(iter(other_units))}")


def test_units_are_case_sensitive() -> None:
    # 'MS' could be mega-siemens or a shouted 'ms'; refusing it is safer than guessing.
    with pytest.raises(UnitError):
        parse_time_ns("5MS")
    with pytest.raises(UnitError):
        parse_size_bytes("4kib")


@pytest.mark.parametrize(("parse", "units", "what"), FAMILIES, ids=FAMILY_IDS)
def test_quantities_too_large_for_a_float_are_rejected(
    parse: Parser, units: dict, what: str
) -> None:
    unit = next(iter(units))
    with pytest.raises(UnitError, match=f"finite {what}"):
        parse(f"1e400{unit}")


@pytest.mark.parametrize(("parse", "units", "what"), FAMILIES, ids=FAMILY_IDS)
@pytest.mark.parametrize(
    "digits",
    ["٥", "５", "१", "1٥", "٥.5", "1e٣"],
    ids=["arabic", "fullwidth", "devanagari", "mixed", "fraction", "exponent"],
)
def test_only_ascii_digits_make_a_number(
    parse: Parser, units: dict, what: str, digits: str
) -> None:
    # Python's Decimal and float read all of these as numbers; a scenario may not.
    with pytest.raises(UnitError, match=f"expected a {what} like"):
        parse(f"{digits}{next(iter(units))}")


@pytest.mark.parametrize(("parse", "units", "what"), FAMILIES, ids=FAMILY_IDS)
@pytest.mark.parametrize("number", ["1e999999", "9e99999999999", "1e-999999", "-1e331"])
def test_exponents_past_any_float_are_refused_not_overflowed(
    parse: Parser, units: dict, what: str, number: str
) -> None:
    # Decimal's context stops at 1e999999 and raises decimal.Overflow past it.
    with pytest.raises(UnitError, match=f"finite {what} with an exponent within"):
        parse(f"{number}{next(iter(units))}")


def test_the_exponent_bound_leaves_every_float_magnitude() -> None:
    assert parse_time_ns("1e300ns") == 1e300
    assert parse_time_ns("-1.5e-300ns") == -1.5e-300
    assert parse_time_ns("0e999999ns") == 0.0


@pytest.mark.parametrize(("parse", "units", "what"), FAMILIES, ids=FAMILY_IDS)
@pytest.mark.parametrize("word", ["nan", "NaN", "-nan", "snan", "inf", "-Infinity", "infinity"])
def test_nan_and_infinity_are_not_numbers_here(
    parse: Parser, units: dict, what: str, word: str
) -> None:
    unit = next(iter(units))
    for text in (f"{word}{unit}", f"{word} {unit}"):
        with pytest.raises(UnitError, match=f"expected a {what} like"):
            parse(text)


@pytest.mark.parametrize(("parse", "units", "what"), FAMILIES, ids=FAMILY_IDS)
def test_a_quantity_of_thousands_of_characters_is_refused_with_a_short_message(
    parse: Parser, units: dict, what: str
) -> None:
    text = "9" * 10_000 + next(iter(units))
    with pytest.raises(UnitError) as info:
        parse(text)
    message = str(info.value)
    assert f"expected a {what}" in message and f"({len(text)} chars)" in message
    assert len(message) < 200 and "\n" not in message

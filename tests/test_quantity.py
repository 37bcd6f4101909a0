"""app.objects.quantity: Kubernetes quantities parsed once into integers (milli-CPU, bytes, counts)."""
import time

import pytest

from app.objects.quantity import MAX_QUANTITY, QuantityError, format_quantity, parse_quantity


@pytest.mark.parametrize("value, expected", [
    ("1", 1000),
    ("2", 2000),
    ("100m", 100),
    ("1500m", 1500),
    ("0.5", 500),
    ("1.5", 1500),
    (".25", 250),
    ("0", 0),
])
def test_cpu_is_parsed_into_millicpu(value, expected):
    assert parse_quantity(value, "cpu") == expected


@pytest.mark.parametrize("value, expected", [
    ("64Mi", 64 * 2**20),
    ("4Gi", 4 * 2**30),
    ("1Ki", 1024),
    ("1Ti", 2**40),
    ("1Pi", 2**50),
    ("1Ei", 2**60),
    ("1k", 1000),
    ("1M", 10**6),
    ("1G", 10**9),
    ("1T", 10**12),
    ("1P", 10**15),
    ("1E", 10**18),
    ("1.5Gi", 1610612736),
    ("123", 123),
])
def test_memory_is_parsed_into_bytes_for_every_suffix(value, expected):
    assert parse_quantity(value, "memory") == expected


def test_milli_suffix_on_a_non_cpu_resource_is_a_fraction_of_a_base_unit():
    assert parse_quantity("2000m", "memory") == 2
    assert parse_quantity("3000m", "nvidia.com/gpu") == 3


@pytest.mark.parametrize("value, resource, expected", [
    ("1e3", "memory", 1000),
    ("1E3", "memory", 1000),
    ("1e+3", "pods", 1000),
    ("5e-1", "cpu", 500),
    ("1e3", "cpu", 1_000_000),
])
def test_decimal_exponent_form_is_accepted(value, resource, expected):
    assert parse_quantity(value, resource) == expected


def test_capital_e_alone_is_the_exa_suffix_not_an_exponent():
    assert parse_quantity("2E", "memory") == 2 * 10**18


@pytest.mark.parametrize("value, resource, expected", [
    (4, "cpu", 4000),
    (4, "memory", 4),
    (0.5, "cpu", 500),
    (1.5, "memory", 2),
    (1e3, "pods", 1000),
])
def test_ints_and_floats_from_yaml_are_accepted(value, resource, expected):
    assert parse_quantity(value, resource) == expected


@pytest.mark.parametrize("value, resource, expected", [
    ("0.5m", "cpu", 1),         # half a milli-CPU rounds up to 1m, like MilliValue()
    ("100n", "cpu", 1),
    ("1.0001", "cpu", 1001),
    ("500m", "memory", 1),      # half a byte rounds up to 1 byte, like Value()
    ("1.1", "pods", 2),
])
def test_fractions_round_up_like_kube_scheduler(value, resource, expected):
    assert parse_quantity(value, resource) == expected


def test_surrounding_whitespace_is_ignored():
    assert parse_quantity(" 2Gi ", "memory") == 2 * 2**30


@pytest.mark.parametrize("value", ["-1", "-100m", "-1Gi", -3, -0.5])
def test_negative_quantity_is_rejected(value):
    with pytest.raises(QuantityError, match="negative"):
        parse_quantity(value, "cpu")


@pytest.mark.parametrize("value", ["12Q", "", "1.2.3", "Gi", "1 Gi", "1gi", "abc", "1e", "0x10", "inf"])
def test_malformed_string_is_rejected(value):
    with pytest.raises(QuantityError, match="not a Kubernetes quantity"):
        parse_quantity(value, "memory")


@pytest.mark.parametrize("value", [None, True, False, [1], {"cpu": 1}, float("nan"), float("inf")])
def test_non_quantity_types_are_rejected(value):
    with pytest.raises(QuantityError):
        parse_quantity(value, "cpu")


def test_error_message_names_the_resource():
    with pytest.raises(QuantityError, match=r"^memory: '12Q'"):
        parse_quantity("12Q", "memory")


def test_largest_allowed_quantity_is_two_to_the_62():
    assert parse_quantity("4Ei", "memory") == MAX_QUANTITY == 2**62


@pytest.mark.parametrize("value, resource", [
    ("8Ei", "memory"),
    (str(2**62 + 1), "memory"),
    ("5P", "cpu"),              # 5e15 cores = 5e18 milli-CPU > 2**62
    ("1e30", "pods"),
])
def test_absurdly_large_quantity_is_rejected(value, resource):
    with pytest.raises(QuantityError, match="absurdly large"):
        parse_quantity(value, resource)


@pytest.mark.parametrize("value", ["1e999990", "1e999999", "1e999999999", "9e99999999999999999999"])
def test_huge_exponent_is_rejected_quickly_as_a_quantity_error(value):
    """Regression: these raised decimal.Overflow, or took ~25 s converting to int."""
    start = time.monotonic()
    with pytest.raises(QuantityError):
        parse_quantity(value, "cpu")
    with pytest.raises(QuantityError):
        parse_quantity(value, "memory")
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize("amount, resource, expected", [
    (2000, "cpu", "2"),
    (1500, "cpu", "1500m"),
    (100, "cpu", "100m"),
    (0, "cpu", "0"),
    (4 * 2**30, "memory", "4Gi"),
    (64 * 2**20, "memory", "64Mi"),
    (1536 * 2**20, "memory", "1536Mi"),
    (2**40, "memory", "1Ti"),
    (1024, "memory", "1Ki"),
    (1000, "memory", "1000"),
    (0, "memory", "0"),
    (10 * 2**30, "ephemeral-storage", "10Gi"),
    (1024, "pods", "1024"),
    (8, "nvidia.com/gpu", "8"),
])
def test_format_quantity_renders_admin_friendly_strings(amount, resource, expected):
    assert format_quantity(amount, resource) == expected


@pytest.mark.parametrize("amount, resource", [
    (1500, "cpu"), (7, "cpu"), (3 * 2**30, "memory"), (12345, "memory"), (5 * 2**20, "ephemeral-storage"),
])
def test_format_quantity_round_trips_through_parse_quantity(amount, resource):
    assert parse_quantity(format_quantity(amount, resource), resource) == amount

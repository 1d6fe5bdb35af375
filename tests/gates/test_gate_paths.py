from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import BaseModel

from gates.paths import FieldNotFound, fmt_number, get_field, iter_strings, preview, to_text


class Price(BaseModel):
    amount: float
    currency: str = "EUR"


@dataclass
class Offer:
    vendor: str
    prices: list[Price]


def test_get_field_walks_dicts_lists_models_and_dataclasses():
    output = {"offers": [Offer(vendor="acme", prices=[Price(amount=9.5)])]}
    assert get_field(output, "offers.0.vendor") == "acme"
    assert get_field(output, "offers.0.prices.0.amount") == 9.5
    assert get_field(output, "offers.-1.prices.0.currency") == "EUR"


def test_get_field_without_path_returns_the_output_itself():
    assert get_field([1, 2], None) == [1, 2]
    assert get_field("x", "") == "x"


def test_get_field_reads_int_dict_keys_from_digit_segments():
    assert get_field({1: "one"}, "1") == "one"


def test_get_field_names_the_segment_where_the_path_stopped():
    with pytest.raises(FieldNotFound,
                       match=r"field 'a.b.c' not found: no 'b' at 'a' in a dict with keys \[x\]"):
        get_field({"a": {"x": 1}}, "a.b.c")


def test_get_field_reports_an_index_past_the_end_of_a_list():
    with pytest.raises(FieldNotFound, match="no '3' at 'items' in a list of 2 items"):
        get_field({"items": [1, 2]}, "items.3")


def test_get_field_does_not_expose_private_attributes():
    with pytest.raises(FieldNotFound):
        get_field(Price(amount=1), "__class__")


def test_iter_strings_finds_nested_values_but_not_keys():
    found = list(iter_strings({"title": "A", "refs": [{"id": 7}, "doc-2"], "ok": True}))
    assert found == ["A", "7", "doc-2"]


def test_to_text_keeps_strings_and_dumps_structures_as_sorted_json():
    assert to_text("hello") == "hello"
    assert to_text({"b": 1, "a": Price(amount=2)}) == '{"a": {"amount": 2.0, "currency": "EUR"}, "b": 1}'


def test_preview_and_fmt_number_keep_reasons_short_and_clean():
    assert preview("x" * 100, 10) == "'xxxxxx..."
    assert fmt_number(0.7) == "0.7"
    assert fmt_number(10) == "10"
    assert fmt_number(12.5) == "12.5"

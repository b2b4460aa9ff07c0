"""spec.units: quantities, durations and the counts messages print."""

from __future__ import annotations

import pytest

from taugrid.spec import units


@pytest.mark.parametrize(
    ("count", "word", "text"),
    [(1, "node", "1 node"), (0, "node", "0 nodes"), (3, "GPU", "3 GPUs"), (0.5, "GPU", "0.5 GPUs")],
)
def test_plural_says_one_thing_or_several(count: float, word: str, text: str) -> None:
    assert units.plural(count, word) == text


def test_quantities_and_durations_parse_to_bytes_and_seconds() -> None:
    assert units.parse_quantity_bytes("2Gi") == 2 * 2**30
    assert units.parse_quantity_bytes("500M") == 500 * 10**6
    assert units.parse_duration("90s") == 90
    assert units.parse_duration("2h") == 7200

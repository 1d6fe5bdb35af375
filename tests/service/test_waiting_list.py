"""Many waiting units in one line: the first ones and a count, the count kept whatever the width."""

from __future__ import annotations

from orchestrator.service.waiting_list import first_and_count

PATHS = [f"sub[{i}] > classify" for i in range(200)]


def test_the_first_path_and_how_many_more_wait() -> None:
    assert first_and_count(PATHS) == "sub[0] > classify +199 more"


def test_the_next_few_then_the_count() -> None:
    assert first_and_count(["x[3]", "x[4]", "x[5]", "x[6]"], shown=3) == "x[3], x[4], x[5] +1 more"


def test_as_many_as_wait_without_a_count() -> None:
    assert first_and_count(["a", "b"], shown=3) == "a, b"
    assert first_and_count(["a"]) == "a"
    assert first_and_count([]) == ""


def test_a_narrow_width_shortens_the_names_and_keeps_the_count() -> None:
    line = first_and_count(PATHS, width=20)
    assert line == "sub[0] >… +199 more" and len(line) <= 20
    assert first_and_count(["a_rather_long_step_name"], width=10) == "a_rather_…"

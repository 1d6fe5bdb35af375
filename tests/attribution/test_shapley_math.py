"""The credit math on games with known answers: Shapley axioms, sampling, difference rewards."""

from __future__ import annotations

import pytest

from orchestrator.attribution.shapley import (
    difference_rewards,
    exact_shapley,
    sampled_shapley,
    shapley,
)


def glove_game(coalition: frozenset) -> float:
    """One left glove (L) and two right gloves (R1, R2): a pair is worth 1."""
    return 1.0 if "L" in coalition and ({"R1", "R2"} & coalition) else 0.0


def weighted_majority(coalition: frozenset) -> float:
    weights = {"a": 3, "b": 2, "c": 1, "d": 1}
    return 1.0 if sum(weights[p] for p in coalition) >= 4 else 0.0


def with_null(coalition: frozenset) -> float:
    """'n' never changes anything."""
    return glove_game(coalition - {"n"})


class TestExactShapley:
    def test_glove_game_has_the_textbook_values(self):
        est = exact_shapley(["L", "R1", "R2"], glove_game)
        assert est.values["L"] == pytest.approx(2 / 3)
        assert est.values["R1"] == pytest.approx(1 / 6)
        assert est.values["R2"] == pytest.approx(1 / 6)
        assert est.exact and est.samples == 0

    @pytest.mark.parametrize("game, players", [(glove_game, ["L", "R1", "R2"]),
                                               (weighted_majority, ["a", "b", "c", "d"]),
                                               (with_null, ["L", "R1", "R2", "n"])])
    def test_efficiency_credits_add_up_to_v_all_minus_v_none(self, game, players):
        est = exact_shapley(players, game)
        assert est.total == pytest.approx(game(frozenset(players)) - game(frozenset()))
        assert est.v_all == game(frozenset(players)) and est.v_none == game(frozenset())

    def test_symmetry_interchangeable_players_get_equal_credit(self):
        est = exact_shapley(["a", "b", "c", "d"], weighted_majority)
        assert est.values["c"] == pytest.approx(est.values["d"])
        glove = exact_shapley(["L", "R1", "R2"], glove_game)
        assert glove.values["R1"] == pytest.approx(glove.values["R2"])

    def test_null_player_gets_zero(self):
        est = exact_shapley(["L", "R1", "R2", "n"], with_null)
        assert est.values["n"] == pytest.approx(0.0)
        assert est.values["L"] == pytest.approx(2 / 3)

    def test_additive_game_credits_each_player_with_its_own_value(self):
        own = {"a": -1.0, "b": 0.25, "c": 0.0}
        est = exact_shapley(list(own), lambda s: sum(own[p] for p in s))
        assert est.values == pytest.approx(own)

    def test_each_coalition_is_evaluated_once(self):
        asked: list[frozenset] = []

        def counted(coalition: frozenset) -> float:
            asked.append(coalition)
            return weighted_majority(coalition)

        exact_shapley(["a", "b", "c", "d"], counted)
        assert len(asked) == len(set(asked)) == 16

    def test_up_to_twelve_players_is_exact_and_above_is_sampled(self):
        players = [f"p{i}" for i in range(12)]
        assert shapley(players, lambda s: float(len(s))).exact
        more = [f"p{i}" for i in range(13)]
        est = shapley(more, lambda s: float(len(s)), samples=8)
        assert not est.exact and est.samples == 8


class TestSampledShapley:
    def test_sampled_estimate_is_exactly_efficient(self):
        est = sampled_shapley(["a", "b", "c", "d"], weighted_majority, samples=7, seed=3)
        assert est.total == pytest.approx(weighted_majority(frozenset("abcd")) - weighted_majority(frozenset()))

    def test_confidence_interval_covers_the_exact_value(self):
        exact = exact_shapley(["a", "b", "c", "d"], weighted_majority)
        est = sampled_shapley(["a", "b", "c", "d"], weighted_majority, samples=400, seed=1)
        for p in "abcd":
            lo, hi = est.ci95(p)
            assert lo - 1e-9 <= exact.values[p] <= hi + 1e-9
            assert est.stderr[p] < 0.05

    def test_null_player_gets_exactly_zero_with_no_uncertainty(self):
        est = sampled_shapley(["L", "R1", "R2", "n"], with_null, samples=20, seed=0)
        assert est.values["n"] == 0.0 and est.ci95("n") == (0.0, 0.0)

    def test_same_seed_gives_the_same_estimate(self):
        one = sampled_shapley(["a", "b", "c", "d"], weighted_majority, samples=10, seed=42)
        two = sampled_shapley(["a", "b", "c", "d"], weighted_majority, samples=10, seed=42)
        assert one.values == two.values

    def test_zero_samples_is_refused(self):
        with pytest.raises(ValueError):
            sampled_shapley(["a"], lambda s: 0.0, samples=0)


class TestDifferenceRewards:
    def test_credit_is_what_the_outcome_loses_without_the_player(self):
        est = difference_rewards(["L", "R1", "R2"], glove_game)
        # removing L loses the pair; removing either right glove loses nothing (the other remains)
        assert est.values == {"L": 1.0, "R1": 0.0, "R2": 0.0}

    def test_difference_rewards_need_n_plus_one_evaluations(self):
        est = difference_rewards(["a", "b", "c", "d"], weighted_majority)
        assert est.evaluations == 5

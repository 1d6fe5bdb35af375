"""Credit math over a cooperative game: exact and sampled Shapley values, difference rewards.

Pure functions, no I/O. A game is a list of hashable players and a value function
``v(frozenset_of_players) -> float``; the caller decides what a coalition means (for
attribution: the members keep their own behaviour, everyone else is replaced by a reference).

Shapley values satisfy, and the tests check:

- efficiency: the credits add up to ``v(all) - v(none)``;
- symmetry: two players whose marginal contributions are equal everywhere get equal credit;
- null player: a player whose presence never changes the value gets zero.

Permutation sampling keeps efficiency exactly (each sampled permutation's marginals add up to
``v(all) - v(none)``) and reports a 95% confidence interval per player.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from itertools import combinations

ValueFn = Callable[[frozenset[Hashable]], float]

EXACT_LIMIT = 12
"""Up to this many players the Shapley value is computed exactly (2^n coalitions)."""

Z95 = 1.959963984540054


@dataclass
class CreditEstimate:
    """Credit per player, with the uncertainty of a sampled estimate (zero when exact)."""

    values: dict[Hashable, float]
    exact: bool
    stderr: dict[Hashable, float] = field(default_factory=dict)
    samples: int = 0
    """Permutations drawn (0 when exact)."""
    evaluations: int = 0
    """Distinct coalitions whose value was asked for."""
    v_all: float = 0.0
    v_none: float | None = None
    """``v(none)``; not computed by difference rewards, which never need it."""

    def ci95(self, player: Hashable) -> tuple[float, float]:
        value = self.values[player]
        half = Z95 * self.stderr.get(player, 0.0)
        return (value - half, value + half)

    @property
    def total(self) -> float:
        return sum(self.values.values())


class _Memo:
    """Evaluate each coalition once, however often the formulas ask for it."""

    def __init__(self, value: ValueFn) -> None:
        self.value = value
        self.seen: dict[frozenset[Hashable], float] = {}

    def __call__(self, coalition: frozenset[Hashable]) -> float:
        if coalition not in self.seen:
            self.seen[coalition] = float(self.value(coalition))
        return self.seen[coalition]


def exact_shapley(players: Sequence[Hashable], value: ValueFn) -> CreditEstimate:
    """phi_i = sum over S not containing i of |S|!(n-|S|-1)!/n! * (v(S+i) - v(S)); 2^n evaluations."""
    n = len(players)
    v = _Memo(value)
    weights = [math.factorial(k) * math.factorial(n - k - 1) / math.factorial(n) for k in range(n)]
    phi: dict[Hashable, float] = {p: 0.0 for p in players}
    for i, player in enumerate(players):
        others = [p for j, p in enumerate(players) if j != i]
        for size in range(n):
            w = weights[size]
            for subset in combinations(others, size):
                coalition = frozenset(subset)
                phi[player] += w * (v(coalition | {player}) - v(coalition))
    return CreditEstimate(phi, exact=True, evaluations=len(v.seen),
                          v_all=v(frozenset(players)), v_none=v(frozenset()))


def sampled_shapley(players: Sequence[Hashable], value: ValueFn, *, samples: int = 32,
                    seed: int | None = 0) -> CreditEstimate:
    """Average marginal contributions over ``samples`` random orderings of the players.

    Each ordering adds players one at a time to the empty coalition; the marginals of one
    ordering add up to ``v(all) - v(none)``, so the estimate is efficient for any sample size.
    The standard error is the sample standard deviation over orderings divided by sqrt(samples).
    """
    if samples < 1:
        raise ValueError("samples must be at least 1")
    rng = random.Random(seed)
    v = _Memo(value)
    order = list(players)
    sums = {p: 0.0 for p in players}
    squares = {p: 0.0 for p in players}
    for _ in range(samples):
        rng.shuffle(order)
        coalition: frozenset[Hashable] = frozenset()
        previous = v(coalition)
        for player in order:
            coalition = coalition | {player}
            current = v(coalition)
            marginal = current - previous
            sums[player] += marginal
            squares[player] += marginal * marginal
            previous = current
    means = {p: sums[p] / samples for p in players}
    stderr = {}
    for p in players:
        if samples > 1:
            var = max(0.0, (squares[p] - samples * means[p] ** 2) / (samples - 1))
            stderr[p] = math.sqrt(var / samples)
        else:
            stderr[p] = 0.0
    return CreditEstimate(means, exact=False, stderr=stderr, samples=samples, evaluations=len(v.seen),
                          v_all=v(frozenset(players)), v_none=v(frozenset()))


def shapley(players: Sequence[Hashable], value: ValueFn, *, samples: int | None = None, seed: int | None = 0,
            exact_limit: int = EXACT_LIMIT) -> CreditEstimate:
    """Exact for up to ``exact_limit`` players (unless ``samples`` is given), sampled above."""
    if not players:
        return CreditEstimate({}, exact=True, v_all=value(frozenset()), v_none=value(frozenset()))
    if len(players) <= exact_limit and samples is None:
        return exact_shapley(players, value)
    return sampled_shapley(players, value, samples=samples or 32, seed=seed)


def difference_rewards(players: Sequence[Hashable], value: ValueFn) -> CreditEstimate:
    """D_i = v(all) - v(all without i): what the outcome loses when i alone is replaced.

    n + 1 evaluations. Unlike Shapley, the credits need not add up to ``v(all) - v(none)``
    (they do when players do not interact).
    """
    v = _Memo(value)
    everyone = frozenset(players)
    full = v(everyone)
    credits = {p: full - v(everyone - {p}) for p in players}
    return CreditEstimate(credits, exact=True, evaluations=len(v.seen), v_all=full)

"""A store that hands every call to another, its forwarding generated from the role interfaces.

Two stores are thin layers over another one: the replay's :class:`MarkingStore` (it only marks how a
replayed record's output came to be) and :class:`~orchestrator.store.sqlite.SqliteStore` (it writes
the run path itself and hands everything else to the SQLAlchemy store on the same file). Each
subclasses :class:`DelegatingStore` and overrides only what it changes. The forwarding methods are
made here, one per abstract method of :class:`~orchestrator.store.base.Store` (every role's), so a
method added to a role interface is forwarded without anyone writing it down again, and nothing
here repeats a signature (or the stored fields its keywords name).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

from orchestrator.store.base import Store


class DelegatingStore(Store):
    """Every Store method calls the same method of :meth:`target`; subclasses override what they change.

    Type checkers see the interface's methods as abstract here (they are made at import, below), so
    a subclass is instantiated through :func:`concrete`."""

    @abc.abstractmethod
    def target(self) -> Store:
        """The store the calls go to."""

    @property
    def embedded(self) -> bool:
        return self.target().embedded


def _forwarding(name: str) -> Callable[..., Any]:
    interface = getattr(Store, name)

    def forward(self: DelegatingStore, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.target(), name)(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = interface.__doc__
    return forward


FORWARDED = frozenset(Store.__abstractmethods__)
"""The methods every delegating store forwards unless it overrides them: the whole Store interface."""

for _name in FORWARDED:
    setattr(DelegatingStore, _name, _forwarding(_name))
abc.update_abstractmethods(cast(type[Any], DelegatingStore))

P = ParamSpec("P")
S = TypeVar("S", bound=DelegatingStore)


def concrete(cls: Callable[P, S]) -> Callable[P, S]:
    """``cls`` itself, its constructor's signature kept: how a delegating store is instantiated where a type
    checker, not knowing the forwarding made above, takes it for abstract."""
    return cls

"""A run named by a unique prefix of its id, as git names a commit.

Run ids carry 96 random bits (:func:`orchestrator.store.rows.new_run_id`): far too long to type, and
random from their first character on, so a few characters almost always name one run. Every command
and API method that takes a run id accepts such a prefix. An exact id always wins (an id from before
ids grew may also begin a newer one); a prefix that begins several runs is refused, naming them.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence

from orchestrator.core.errors import InputError, NotFoundError
from orchestrator.store.base import Store

SHOWN_CANDIDATES = 8
"""At most this many runs are named when a prefix is ambiguous."""

SHORT_ID_LENGTH = 8
"""The fewest characters a listing shows of a run id (``r`` and 7 hex digits, 28 random bits), as git shows
at least 7 of a commit's: enough that a prefix shown today still names one run after many more are stored."""

_ID_CHARACTERS = re.compile(r"[0-9a-z]+")


def short_run_id(store: Store, run_id: str, *, minimum: int = SHORT_ID_LENGTH) -> str:
    """The shortest prefix of ``run_id``, at least ``minimum`` characters, that :func:`resolve_run_id` resolves
    to this run among the stored runs (the whole id when none shorter does, or when the id holds characters
    a prefix cannot be typed with). One store read when the first ``minimum`` characters are unique, as they
    almost always are; each further read skips to the first character that tells the run from another."""
    if not _ID_CHARACTERS.fullmatch(run_id):
        return run_id
    size = min(minimum, len(run_id))
    while size < len(run_id):
        found = store.run_ids_starting(run_id[:size], limit=2)
        others = [o for o in found if o != run_id]
        if not others:
            return run_id[:size] if found else run_id  # not stored (any more): the whole id
        size = max(size + 1, len(os.path.commonprefix([run_id, others[0]])) + 1)
    return run_id


def short_run_ids(store: Store, run_ids: Sequence[str], *, minimum: int = SHORT_ID_LENGTH) -> dict[str, str]:
    """:func:`short_run_id` of each run, by run id, with one store read for the lot: a run whose first
    ``minimum`` characters begin no other stored id is shown by them; only a run that shares them is read
    again on its own (a page of listed runs is one round trip to a database server, not one per run)."""
    heads = {run_id: run_id[:minimum] for run_id in run_ids
             if _ID_CHARACTERS.fullmatch(run_id) and len(run_id) > minimum}
    limit = 2 * len(heads) + 1
    found = store.run_ids_starting_any(sorted(set(heads.values())), limit=limit) if heads else []
    complete = len(found) < limit  # else a head's count may be cut short: nothing is concluded from it
    beginning = Counter(other[:minimum] for other in found)
    stored = set(found)
    shown = {}
    for run_id in run_ids:
        head = heads.get(run_id)
        if head is not None and complete and beginning[head] == 1 and run_id in stored:
            shown[run_id] = head
        else:
            shown[run_id] = short_run_id(store, run_id, minimum=minimum)
    return shown


class AmbiguousRunError(InputError):
    """A prefix that begins more than one run id (exit 2, naming them)."""


def not_found(store: Store, text: str) -> NotFoundError:
    return NotFoundError(f"no run {text!r} in {store.display_url}; list runs with `orchestrator runs`")


def resolve_run_id(store: Store, text: str) -> str:
    """The one run id that is ``text`` or begins with it (case ignored); NotFoundError when none does,
    AmbiguousRunError naming the candidates when several do."""
    prefix = text.strip().lower()
    if not _ID_CHARACTERS.fullmatch(prefix):
        raise not_found(store, text)
    found = store.run_ids_starting(prefix, limit=SHOWN_CANDIDATES + 1)
    if prefix in found or len(found) == 1:
        return prefix if prefix in found else found[0]
    if not found:
        raise not_found(store, text)
    named = []
    for run_id in found[:SHOWN_CANDIDATES]:
        run = store.get_run(run_id)
        named.append(f"{run_id} ({run.workflow}, {run.status})")
    more = ", and more" if len(found) > SHOWN_CANDIDATES else ""
    raise AmbiguousRunError(f"run id {text!r} is ambiguous: it begins {', '.join(named)}{more}; "
                            "type more of the id")

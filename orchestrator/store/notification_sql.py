"""The outbox's statements, plain SQL with named parameters: the same text on SQLite's own connection
(``sqlite3`` binds ``:name``) and on SQLAlchemy's (``text()``), so the two stores cannot disagree.

A sender claims a due row with a conditional UPDATE (still pending, still unclaimed or its claim lapsed):
of any number of senders racing for one row exactly one changes it. Times are the sender's clock,
passed in (``:now``): a sender on a host whose clock is off only delivers a little early or late, never twice at
once, because the claim itself is the conditional UPDATE.
"""

from __future__ import annotations

from orchestrator.store.rows import NOTIFICATION_COLUMNS

INSERT = (f"INSERT INTO notifications ({', '.join(NOTIFICATION_COLUMNS)}) "
          f"VALUES ({', '.join(':' + c for c in NOTIFICATION_COLUMNS)})")

_UNCLAIMED = "(claimed_until IS NULL OR claimed_until < :now)"

DUE = (f"SELECT id FROM notifications WHERE status = 'pending' AND next_try_at <= :now AND {_UNCLAIMED} "
       "ORDER BY id LIMIT :limit")
DUE_OF_RUN = (f"SELECT id FROM notifications WHERE run_id = :run_id AND status = 'pending' AND next_try_at <= :now "
              f"AND {_UNCLAIMED} ORDER BY id LIMIT :limit")

CLAIM = (f"UPDATE notifications SET claimed_by = :holder, claimed_until = :until "
         f"WHERE id = :id AND status = 'pending' AND {_UNCLAIMED}")

BY_ID = "SELECT * FROM notifications WHERE id = :id"

FINISH = ("UPDATE notifications SET status = :status, tries = :tries, last_error = :last_error, "
          "delivered_at = :delivered_at, next_try_at = :next_try_at, claimed_by = :claimed_by, "
          "claimed_until = :claimed_until WHERE id = :id AND claimed_by = :holder AND status = 'pending'")

RELEASE = ("UPDATE notifications SET claimed_by = NULL, claimed_until = NULL "
           "WHERE claimed_by = :holder AND status = 'pending'")

CLAIM_HOLDERS = ("SELECT DISTINCT claimed_by FROM notifications "
                 "WHERE status = 'pending' AND claimed_by IS NOT NULL AND claimed_until >= :now")

LIST = "SELECT * FROM notifications ORDER BY id DESC LIMIT :limit"
LIST_FAILED = ("SELECT * FROM notifications WHERE status = 'failed' OR (status = 'pending' AND last_error IS NOT NULL) "
               "ORDER BY id DESC LIMIT :limit")
LIST_OF_RUN = "SELECT * FROM notifications WHERE run_id = :run_id ORDER BY id DESC LIMIT :limit"

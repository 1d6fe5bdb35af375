"""The exception tree. Every error a user can cause is an OrchestratorError with a message
that names the file, line or step and says how to fix it; the CLI turns them into one line
and an exit code, never a traceback::

    OrchestratorError
    ├── SpecError            the workflow file is invalid (exit 2); holds SpecProblem rows
    ├── ResolveError         a ``module:callable`` reference cannot be imported (exit 2)
    ├── InputError           workflow inputs or CLI arguments are wrong (exit 2)
    │   └── DatabaseUnreachableError  the database did not answer when opened (a worker waits for it)
    ├── ReviewError          a review decision does not apply (not paused, already decided,
    │   │                    an edit that fails the step's gates) (exit 2)
    │   └── EditRefusedError  an edit failed the step's gates (an approval step's output_schema);
    │                         it may be stored anyway, recorded as forced
    ├── NotFoundError        an unknown run or step id (exit 2)
    ├── StoreMismatchError   stored records disagree with the workflow spec on resume (exit 2)
    ├── LeaseHeldError       another live process holds the run's lease (exit 2)
    ├── LeaseLostError       this process's lease was taken over; it stopped writing (exit 1)
    └── StoreError           the database failed a store call; the message never holds SQL (exit 1)
        ├── StoreUnavailableError  it did not answer (connection lost, server restarting, SQLite
        │                          busy) for as long as the store retries
        └── StoreFullError         the disk (or the server's) is full
"""

from __future__ import annotations

from dataclasses import dataclass


class OrchestratorError(Exception):
    """Base of every error the orchestrator raises on purpose."""

    exit_code: int = 2


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with a workflow file: where, which key, what."""

    path: str
    key: str
    """Dotted location such as ``steps.summarize.gates[1]``."""
    message: str
    line: int | None = None
    """Set only when the YAML parser knows it: a made-up number is worse than none."""
    column: int | None = None

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        key = f" {self.key}:" if self.key else ""
        return f"{where}:{key} {self.message}"


class SpecError(OrchestratorError):
    """The workflow definition is invalid."""

    def __init__(self, problems: list[SpecProblem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class ResolveError(OrchestratorError):
    """A ``module:callable`` reference cannot be resolved."""


class InputError(OrchestratorError):
    """Workflow inputs or command arguments are invalid."""


class ReviewError(OrchestratorError):
    """A review decision cannot be applied."""


class EditRefusedError(ReviewError):
    """An edited output fails the step's blocking gates (an approval step's: its ``output_schema``), so nothing was
    stored; the same edit may be stored anyway, recorded as forced (``edit --force``, or the review app's
    confirmation). ``failing`` holds one ``check: reason`` line per refusal, for a face to show before asking."""

    def __init__(self, message: str, failing: list[str], checked: object = None) -> None:
        super().__init__(message)
        self.failing = failing
        self.checked = checked
        """What the refusal was decided on (the record, the output, every gate's result): handed back with the
        same output to a forced edit (``review.edit(..., force=True, checked=...)``), it spares evaluating the
        gates again, and paying for their model calls twice."""


class RunBusyError(ReviewError):
    """A decision found its run out of the state it answers (another decision's continuation is running it):
    nothing was stored, and the same decision may be taken once the run is paused again."""


class NotFoundError(OrchestratorError):
    """A run or step id that does not exist."""


class StoreMismatchError(OrchestratorError):
    """Stored step records disagree with the workflow they are resumed under."""


class LeaseHeldError(OrchestratorError):
    """Another process holds the run's lease and is alive (its lease has not expired)."""


class LeaseLostError(OrchestratorError):
    """The lease was taken over (this process stalled past its expiry); nothing more was written."""

    exit_code = 1


class StoreError(OrchestratorError):
    """The database failed a store call. The message names the driver's error in one line, never the
    SQL statement or its bound parameters (they may hold a run's data). Never a step's failure: the
    executor stops the execution and hands the lease back, leaving the run resumable."""

    exit_code = 1

    def __init__(self, message: str, *, driver_error: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.driver_error = driver_error
        """The driver's exception type (``OperationalError``), for callers that tell errors apart."""
        self.detail = detail
        """The driver's own one-line message (``attempt to write a readonly database``)."""


class StoreUnavailableError(StoreError):
    """A transient error (a lost connection, a server restarting, SQLite busy) outlasted the store's retries."""


class DatabaseUnreachableError(StoreUnavailableError):
    """Opening the store found no server answering (refused, restarting, timed out, connections dropped) for
    the whole retry window (``ORCHESTRATOR_DB_RETRY_SECONDS``). Not invalid input: the same command may work
    once the database is back, so a command exits 1, as for any store error past its retries, naming
    --db (the URL may still be the culprit); a worker waits for the database instead."""


class StoreFullError(StoreError):
    """The database could not grow (SQLite ``database or disk is full``, PostgreSQL ``disk_full``)."""

"""What every command shares: consoles, options, the error guard, opening the store.

Exit codes: 0 succeeded, 1 failed or rejected, 2 invalid input, 3 paused for review.
Bad input gets one line on stderr and changes nothing stored; never a traceback.
Heavy imports (the store, Textual) happen inside commands so ``--help`` and ``validate`` stay fast.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from orchestrator.store import Store

EXIT_CODES = {"succeeded": 0, "failed": 1, "rejected": 1, "paused": 3, "running": 3, "queued": 3}
"""A run's status as the process exit code (2, invalid input, comes from errors)."""

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

DbOption = Annotated[str | None, typer.Option("--db", help="SQLAlchemy URL (default: $ORCHESTRATOR_DB, "
                                                   "else sqlite:///.orchestrator/orchestrator.db)")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the JSON document instead of tables.")]
RunArgument = Annotated[str, typer.Argument(metavar="RUN", help="Run id, or a unique prefix of it.")]
StepOption = Annotated[str | None, typer.Option("--step", help="The paused step (needed when several wait); a path "
                                                "such as 'research > retrieve' names one inside a child run.")]
CommentOption = Annotated[str | None, typer.Option("--comment", help="Why; stored with the decision.")]
ReviewerOption = Annotated[str | None, typer.Option("--reviewer", help="Who decides (default: the OS user).")]
OtelOption = Annotated[str | None, typer.Option("--otel", help="Export OpenTelemetry spans to this OTLP/HTTP "
                                               "endpoint (default: $OTEL_EXPORTER_OTLP_ENDPOINT).")]
MAX_COUNT = 1_000_000
"""The most any count flag takes (runs, steps or samples at once): every integer flag is bounded on both
sides, so a huge number is refused as a usage error (exit 2) instead of overflowing a database integer or
a thread pool further on (``runs --limit/--offset`` are bounded where the API's listing is too)."""
MAX_SEED = 2**32 - 1
"""The largest ``--seed`` (a 32-bit seed, as random-number libraries take)."""
ConcurrencyOption = Annotated[int, typer.Option("--max-concurrency", min=1, max=MAX_COUNT, help="Steps run at once.")]

STATUS_STYLE = {"succeeded": "green", "failed": "red", "gate_failed": "yellow", "paused": "yellow",
                "waiting": "yellow",
                "running": "cyan", "skipped": "dim", "rejected": "red", "queued": "dim", "pending": "dim",
                "interrupted": "magenta"}


def styled(text: object, style: str | None = None) -> str:
    """``text`` as Rich markup that prints exactly as itself, in ``style`` when there is one.

    Every name, reason or value a user or a step wrote goes through here (or :func:`escape`) before it
    reaches a console: ``etl [daily]`` would otherwise lose its ``[daily]`` as an unknown style, and
    ``report[/]v2`` would end the command with a markup error.
    """
    plain = escape(str(text))
    return f"[{style}]{plain}[/]" if style else plain


def status_markup(status: str) -> str:
    """A run or step status in its colour (a status without one prints plain)."""
    return styled(status, STATUS_STYLE.get(status))


def fail(message: str, code: int = 2) -> None:
    """One line on stderr, then exit with ``code``."""
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn OrchestratorErrors into one line and their exit code; never show a traceback for bad input."""
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from orchestrator.core.errors import OrchestratorError, SpecError, StoreError

        try:
            with json_owns_stdout(bool(kwargs.get("as_json"))):
                try:
                    return fn(*args, **kwargs)
                finally:
                    sys.stdout.flush()  # a full disk says so here, not in the interpreter's last flush
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except BrokenPipeError:  # `orchestrator show RUN --json | head -1`: the reader left; exit quietly
            quiet_stdout()
            raise typer.Exit(1) from None
        except SpecError as exc:
            for problem in exc.problems:
                err.print(f"[bold red]error:[/] {escape(str(problem))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except StoreError as exc:  # the driver's reason, in one line: the same checks as a raw driver error
            fail_on_database_problem(exc.detail)
            fail(str(exc), exc.exit_code)
        except OrchestratorError as exc:
            fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:  # commands that execute a run name it themselves (resumable_on_interrupt)
            fail("interrupted", 130)
        except Exception as exc:
            if os.environ.get("ORCHESTRATOR_DEBUG"):
                raise
            if isinstance(exc, OSError) and exc.errno in _OUTPUT_FULL:  # `show --json > /dev/full`
                quiet_stdout()
                fail(f"cannot write the output: {exc.strerror}", 1)
            db_error = type(exc).__module__.startswith(("sqlalchemy", "sqlite3"))
            if db_error:
                fail_on_database_problem(str(exc))
            what = "database error" if db_error else "internal error"
            fail(f"{what}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
                 "(set ORCHESTRATOR_DEBUG=1 for the traceback)", 1)
    return wrapper


_OUTPUT_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})
"""Errors writing the output (a full disk or quota, a file too large, a device error): the reader is
still there, unlike a broken pipe, but nothing more can be written."""


def fail_on_database_problem(text: str) -> None:
    """A corrupt or read-only database, named by a database error's text: exit 2 saying so (else return)."""
    line = text.splitlines()[0] if text else ""
    if "database disk image is malformed" in text or "file is not a database" in text:
        fail(f"the database {_opened or 'in use'} is corrupt (or not a SQLite database): {line}")
    if is_read_only(text):
        fail(f"the database {_opened or 'in use'} is read-only ({line}): this command writes to it; check the "
             "file's permissions, or --db")


def is_read_only(message: str) -> bool:
    """Whether a database error says the database may not be written: a read-only SQLite file (or one
    opened with ``mode=ro``), a read-only PostgreSQL transaction or standby."""
    return "readonly database" in message or "read-only transaction" in message


def show_warnings() -> None:
    """The store's and the worker's warnings on stderr, one line each: a database that does not
    answer and each retry, a run handed back. Printed through :data:`err`, which finds the current
    stderr at each line (a test runner swaps it)."""
    import logging

    class ToStderr(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            err.print(f"[yellow]warning:[/] {escape(record.getMessage())}", highlight=False, soft_wrap=True)

    logger = logging.getLogger("orchestrator")
    if not any(type(h).__name__ == "ToStderr" for h in logger.handlers):
        logger.addHandler(ToStderr(logging.WARNING))
        logger.setLevel(logging.WARNING)


def quiet_stdout() -> None:
    """After a broken pipe: point stdout at devnull so the interpreter's last flush cannot fail
    (the recipe of the Python docs, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (a test runner's buffer)
        pass


def read_json_text(path: Path, option: str) -> str:
    """The text of a file named by an option: a regular UTF-8 file of at most
    :data:`~orchestrator.core.files.MAX_JSON_BYTES`, else InputError (exit 2) naming the option and file."""
    from orchestrator.core.errors import InputError
    from orchestrator.core.files import MAX_JSON_BYTES, UnreadableFileError, read_capped

    try:
        return read_capped(path, MAX_JSON_BYTES).decode("utf-8")
    except OSError as exc:
        raise InputError(f"{option} {path}: {exc.strerror}") from None
    except UnreadableFileError as exc:
        raise InputError(f"{option} {path}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{option} {path}: not a text file (UTF-8): byte at offset {exc.start} "
                         "is not UTF-8") from None


def read_json_file(path: Path, option: str) -> Any:
    """A JSON file named by an option; InputError (exit 2) naming the option, line and column."""
    from orchestrator.core import jsonio
    from orchestrator.core.errors import InputError

    text = read_json_text(path, option)
    try:
        return jsonio.loads_document(text)
    except UnicodeDecodeError as exc:
        raise InputError(f"{option} {path}: not a text file (UTF-8): byte at offset {exc.start} "
                         "is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{option} {path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except ValueError as exc:  # NaN / Infinity, which Python's json accepts and JSON does not
        raise InputError(f"{option} {path}: {exc}") from None


_opened: str | None = None
"""The database the command opened, for messages about it."""

_thresholds: tuple[int, ...] | None = None
"""The collector's usual thresholds while start-up runs with fewer collections (see :func:`collect_after_start_up`)."""


def collect_after_start_up() -> None:
    """For the console script's own process: spare the garbage collector start-up's long-lived objects.

    Until a command opens its store it mostly imports modules: some 45 000 objects that live until the
    process exits. Collecting while they load (every 700 allocations by default) and walking them all
    again in the full collections of the interpreter's shutdown costs about 50 ms of a short
    ``orchestrator run`` (2 cores). So collections are rare until :func:`open_store`, which then freezes
    (:func:`gc.freeze`) what the process holds, so that no later collection walks it, and restores the
    usual thresholds: all the command allocates from opening its store on, the store included, is
    collected as before. An app called in-process (tests, scripts) keeps its collector as it is.
    """
    global _thresholds
    _thresholds = gc.get_threshold()
    gc.set_threshold(100_000)


def open_store(db: str | None, *, create: bool = True) -> Store:
    """The store of ``--db`` (else the default); ``create=False`` for commands that only read."""
    global _opened, _thresholds
    from orchestrator.core.errors import InputError
    from orchestrator.store import open_store as open_url

    if db is not None and not db.strip():
        raise InputError("--db is empty; give a database URL such as sqlite:///path/to/orchestrator.db "
                         "(or leave --db out for the default)")
    if _thresholds is not None:  # start-up is over: see collect_after_start_up
        gc.freeze()
        gc.set_threshold(*_thresholds)
        _thresholds = None
    store = open_url(db, create=create)
    url = store.display_url
    _opened = url.split("///", 1)[-1].split("?", 1)[0] if url.startswith("sqlite") and "///" in url else url
    return store


def resolve_run_id(store: Store, text: str) -> str:
    """The run a typed id, or a unique prefix of one, names; exit 2 naming the candidates when several match."""
    from orchestrator.store.run_prefix import resolve_run_id as resolve

    return resolve(store, text)


_json_stdout: TextIO | None = None
"""Where :func:`print_json` writes while :func:`json_owns_stdout` has moved everything else to stderr."""


@contextmanager
def json_owns_stdout(active: bool) -> Iterator[None]:
    """With ``--json``, stdout carries the JSON document and nothing else: whatever else is printed
    meanwhile (a step's ``print`` on the event loop, on a worker thread or in an ``isolation: process``
    child, an evaluator, a status line) goes to stderr.

    In a real process file descriptor 1 itself is pointed at stderr (so child processes and C code
    follow) and the document is written to a copy of the original; ``sys.stdout`` follows too.
    """
    global _json_stdout
    if not active or _json_stdout is not None:
        yield
        return
    sys.stdout.flush()
    original = sys.stdout
    try:
        descriptor_level = original is sys.__stdout__ and sys.stdout.fileno() == 1 and sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):  # a test runner's buffer: no descriptor to move
        descriptor_level = False
    saved = os.fdopen(os.dup(1), "w", encoding=original.encoding or "utf-8") if descriptor_level else original
    if descriptor_level:
        os.dup2(2, 1)
    _json_stdout, sys.stdout = saved, sys.stderr
    try:
        yield
    finally:
        sys.stdout, _json_stdout = original, None
        sys.stderr.flush()
        if descriptor_level:
            try:
                saved.flush()
            finally:
                os.dup2(saved.fileno(), 1)
                with contextlib.suppress(OSError):
                    saved.close()


def print_json(doc: Any) -> None:
    """A JSON document on stdout, strict: a NaN or infinity (JSON has none) is written as null."""
    from orchestrator.core.jsonio import strict

    print(json.dumps(strict(doc), indent=2, default=str, allow_nan=False), file=_json_stdout or sys.stdout)




def exit_code(status: str) -> int:
    return EXIT_CODES.get(status, 1)

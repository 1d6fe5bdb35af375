"""Turn ``module:callable`` references into Python objects.

Modules are looked up next to the workflow file first, then on the normal import path, so a
workflow directory is self-contained: ``run: procurement:retrieve`` finds ``procurement.py``
beside the YAML without installing anything.

A module found next to a workflow is loaded from its file, keyed by that file, and leaves nothing
behind in the process: its folder is on ``sys.path``, and it and the sibling modules it imports are
in ``sys.modules``, only while it executes. So a later ``import tools`` elsewhere never gets a
workflow's ``tools.py``, two workflow folders with a ``tools.py`` each never collide, and a module
whose file changed since it was loaded (or one of the sibling modules it imported) is loaded again:
a long-lived worker or review app sees an edited step module. Sibling modules are shared: a
module imported by one step module is the same object when another refers to it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from orchestrator.core.errors import ResolveError

Stamp = bytes
"""A digest of a file's bytes: what tells that it changed (a modification time can miss an edit made
within its granularity that keeps the size)."""


@dataclass(frozen=True)
class _Loaded:
    module: ModuleType
    stamps: dict[str, Stamp | None]
    """The files the module was executed from: its own and those of the siblings it imported then."""


_loaded: dict[str, _Loaded] = {}
"""Modules loaded next to a workflow, by their file's resolved path."""

_lock = threading.RLock()
"""Loading changes ``sys.path`` and ``sys.modules`` for a moment: one load at a time."""


def _stamp(path: str) -> Stamp | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.blake2b(fh.read(), digest_size=16).digest()
    except OSError:
        return None


def _current(entry: _Loaded) -> bool:
    return all(_stamp(path) == stamp for path, stamp in entry.stamps.items())


def loaded_files() -> dict[str, Stamp | None]:
    """Every file a module next to a workflow was loaded from, with its stamp then: a cache of anything
    built from those modules is valid while :func:`unchanged` says so."""
    with _lock:
        return {path: stamp for entry in _loaded.values() for path, stamp in entry.stamps.items()}


def file_stamps(paths: Iterable[str]) -> dict[str, Stamp | None]:
    """The stamps of these files now (None for one that cannot be read), for :func:`unchanged` later."""
    return {path: _stamp(path) for path in paths}


def unchanged(files: dict[str, Stamp | None]) -> bool:
    """Whether none of ``files`` changed since :func:`loaded_files` returned them."""
    return all(_stamp(path) == stamp for path, stamp in files.items())


def _local_module_file(base_dir: Path, module: str) -> Path | None:
    parts = module.split(".")
    head = base_dir.joinpath(*parts)
    for candidate in (head.with_suffix(".py"), head / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _file_under(module: ModuleType, base: Path) -> str | None:
    """The module's file when it lies in ``base`` (a sibling of a workflow module), else None."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    return str(path) if path.is_relative_to(base) else None


def import_module(module: str, base_dir: str | Path | None = None) -> ModuleType:
    """Import ``module``, preferring a file of that name in ``base_dir`` (see the module docstring).

    A module of that name already imported the usual way from that same file is used as it is.
    """
    if base_dir is not None:
        base = Path(base_dir).resolve()
        local = _local_module_file(base, module)
        if local is not None:
            local = local.resolve()
            with _lock:  # a module another thread is executing is in sys.modules half made: wait for it
                existing = sys.modules.get(module)
                if existing is not None and _file_under(existing, base) == str(local):
                    return existing
                return _load_local(module, local, base)
    return importlib.import_module(module)


def _load_local(name: str, file: Path, base: Path) -> ModuleType:
    with _lock:
        entry = _loaded.get(str(file))
        if entry is not None and _current(entry):
            return entry.module
        return _execute(name, file, base)


def _execute(name: str, file: Path, base: Path) -> ModuleType:
    """Execute ``file`` as module ``name`` with its folder importable, then take both away again."""
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ResolveError(f"cannot load module {name!r} from {file}")
    module = importlib.util.module_from_spec(spec)
    before = dict(sys.modules)
    for path, entry in _loaded.items():  # siblings loaded before are shared, not loaded twice
        sibling = entry.module.__name__
        if Path(path).is_relative_to(base) and sibling not in sys.modules and _current(entry):
            sys.modules[sibling] = entry.module
    folder = str(base)
    sys.path.insert(0, folder)
    sys.modules[name] = module
    failed = True
    try:
        spec.loader.exec_module(module)
        failed = False
    finally:
        with_folder = [i for i, entry in enumerate(sys.path) if entry == folder]
        if with_folder:
            del sys.path[with_folder[0]]
        stamps: dict[str, Stamp | None] = {str(file): _stamp(str(file))}
        for other, mod in list(sys.modules.items()):
            if mod is module or before.get(other) is mod:
                continue
            sibling_file = _file_under(mod, base)
            if sibling_file is None:
                continue
            del sys.modules[other]
            stamps[sibling_file] = _stamp(sibling_file)
            held = _loaded.get(sibling_file)
            if not failed and (held is None or held.module is not mod):
                _loaded[sibling_file] = _Loaded(mod, {sibling_file: stamps[sibling_file]})
        if name in before:
            sys.modules[name] = before[name]
        else:
            sys.modules.pop(name, None)
    _loaded[str(file)] = _Loaded(module, stamps)
    return module


def resolve_callable(ref: str, base_dir: str | Path | None = None) -> Any:
    """Resolve ``module:attr.path`` to a callable, with an error that says what to fix."""
    if not isinstance(ref, str) or ":" not in ref:
        raise ResolveError(f"{ref!r} is not of the form 'module:function'")
    module_name, _, attr_path = ref.partition(":")
    if not module_name or not attr_path:
        raise ResolveError(f"{ref!r} is not of the form 'module:function'")
    try:
        module = import_module(module_name, base_dir)
    except ModuleNotFoundError as exc:
        where = f" next to the workflow ({base_dir}) or" if base_dir else ""
        raise ResolveError(f"cannot import module {module_name!r}{where} on the import path: {exc}") from None
    except ResolveError:
        raise
    except SystemExit as exc:  # sys.exit() at import
        raise ResolveError(f"importing module {module_name!r} failed: it called exit({exc.code!r})") from None
    except Exception as exc:
        raise ResolveError(f"importing module {module_name!r} failed: {type(exc).__name__}: {exc}") from None
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            public = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
            raise ResolveError(
                f"module {module_name!r} has no attribute {attr_path!r}; callables there: {public[:12]}"
            ) from None
    if not callable(obj):
        raise ResolveError(f"{ref!r} is a {type(obj).__name__}, not a callable")
    return obj

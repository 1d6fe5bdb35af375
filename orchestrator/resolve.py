"""Turn ``module:callable`` references into Python objects.

Modules are looked up next to the workflow file first, then on the normal import path, so a
workflow directory is self-contained: ``run: procurement:retrieve`` finds ``procurement.py``
beside the YAML without installing anything.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from orchestrator.errors import ResolveError

_loaded: dict[tuple[str, str], ModuleType] = {}


def _local_module_file(base_dir: Path, module: str) -> Path | None:
    parts = module.split(".")
    head = base_dir.joinpath(*parts)
    for candidate in (head.with_suffix(".py"), head / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def import_module(module: str, base_dir: str | Path | None = None) -> ModuleType:
    """Import ``module``, preferring a file of that name in ``base_dir``.

    The directory is put on ``sys.path`` so the module's own sibling imports work. A module of
    the same name already loaded from elsewhere is not replaced: the local file is loaded under
    a private alias instead, so two workflow folders with a ``tools.py`` each do not collide.
    """
    if base_dir is not None:
        base = Path(base_dir).resolve()
        local = _local_module_file(base, module)
        if local is not None:
            key = (str(base), module)
            if key in _loaded:
                return _loaded[key]
            if str(base) not in sys.path:
                sys.path.insert(0, str(base))
            existing = sys.modules.get(module)
            existing_file = getattr(existing, "__file__", None)
            if existing is not None and existing_file and Path(existing_file).resolve() == local.resolve():
                _loaded[key] = existing
                return existing
            name = module if existing is None else f"_orchestrator_local_{abs(hash(key))}_{module}"
            spec = importlib.util.spec_from_file_location(name, local)
            if spec is None or spec.loader is None:
                raise ResolveError(f"cannot load module {module!r} from {local}")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            try:
                spec.loader.exec_module(mod)
            except BaseException:
                sys.modules.pop(name, None)
                raise
            _loaded[key] = mod
            return mod
    return importlib.import_module(module)


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

"""Two threads binding workflows from one Python file at once (two runs continued together by the async
API or a worker) each get the module whole: one executes it, the other waits for it to finish instead of
taking the half-executed module it finds in ``sys.modules`` (which lacked the steps defined further down)."""

from __future__ import annotations

import builtins
import threading
from pathlib import Path
from types import ModuleType

from orchestrator.bind.resolve import import_module

MODULE = '''
import builtins

def first():
    return 1

builtins.loading_started.set()
builtins.loading_may_finish.wait(timeout=60)

def last():
    return 2
'''


def test_a_module_being_loaded_by_one_thread_is_handed_whole_to_another(tmp_path: Path, monkeypatch):
    (tmp_path / "slow_steps.py").write_text(MODULE)
    started, may_finish = threading.Event(), threading.Event()
    monkeypatch.setattr(builtins, "loading_started", started, raising=False)
    monkeypatch.setattr(builtins, "loading_may_finish", may_finish, raising=False)
    loaded: dict[str, ModuleType] = {}
    whole_when_handed: dict[str, bool] = {}

    def load(who: str) -> None:
        loaded[who] = import_module("slow_steps", tmp_path)
        whole_when_handed[who] = hasattr(loaded[who], "last")  # what a binding resolving the steps sees

    first = threading.Thread(target=load, args=("first",))
    first.start()
    started.wait(timeout=60)  # the first thread is inside the module's code, half way through
    second = threading.Thread(target=load, args=("second",))
    second.start()
    second.join(timeout=0.5)  # were it handed the half-made module, it would be done by now
    may_finish.set()
    first.join()
    second.join()

    assert whole_when_handed == {"first": True, "second": True}
    assert loaded["second"] is loaded["first"]
    assert (loaded["second"].first(), loaded["second"].last()) == (1, 2)

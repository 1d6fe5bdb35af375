"""The review app over a small, deterministic SQLite file of paused runs (see seed.py).

``build(history=True)`` adds three weeks of labelled dashboard-demo runs (seed_history.py,
r0005..r0015) for the dashboard and trace view snapshots; ``build(maps=True)`` two map runs paused at
``summarize[3]`` (r0005 over 6 documents, r0006 over 25) for the instance rows; ``build(tree=True)`` a
parent run paused inside its child run (r0005 at ``research > retrieve``, the child r0006).

Loaded by ``snap_compare`` (and runnable with ``textual run tests/tui/snapshot_app.py``):
run ids, timestamps and "now" are fixed, cursor blinking is off, the refresh timer is idle.
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from orchestrator.store import open_store  # noqa: E402
from tests.tui.seed import NOW, seed_demo, seed_maps, seed_tree  # noqa: E402
from tests.tui.seed_history import seed_history  # noqa: E402
from tui.app import ReviewApp, make_app  # noqa: E402


def build(*, history: bool = False, maps: bool = False, tree: bool = False) -> ReviewApp:
    folder = tempfile.mkdtemp(prefix="tui-snapshot-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    store = open_store(f"sqlite:///{folder}/review.db")
    seed_demo(store)
    if history:
        seed_history(store, first_id=5)
    if maps:
        seed_maps(store, first_id=5)
    if tree:
        seed_tree(store, first_id=5)
    review_app = make_app(store, reviewer="snapshot", clock=lambda: NOW, refresh_interval=3600,
                          cursor_blink=False)
    review_app.sub_title = "sqlite:///review.db"
    return review_app


app = build()

"""Datasets and experiments on the SQL store (:class:`~orchestrator.store.base.DatasetStore`).

Examples are written in one batch insert per addition (10 000 of them take about a second). A dataset's
version is bumped by one ``UPDATE ... SET version = version + 1`` inside the adding transaction, which
also holds the row: two processes adding to one dataset at once get versions N+1 and N+2, never the
same one. Rows are converted to and from the typed views by :mod:`orchestrator.store.rows`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from orchestrator.core.errors import InputError, NotFoundError
from orchestrator.spec.datasets import (
    DatasetView,
    ExampleView,
    ExperimentRunLink,
    ExperimentView,
    NewExample,
    NewExperiment,
)
from orchestrator.store.rows import (
    dataset_values,
    dataset_view,
    example_values,
    example_view,
    experiment_end_values,
    experiment_values,
    experiment_view,
    link_values,
    link_view,
)
from orchestrator.store.tables import TABLES, key, named


class SqlStore(Protocol):
    """What these functions need of a SQL store (named by shape, so the store imports this module and never
    the other way round): its held connection, the lock that serialises it, a read in one short
    transaction, and how to name the database in messages."""

    @property
    def conn(self) -> Connection: ...

    @property
    def lock(self) -> AbstractContextManager[Any]: ...

    @property
    def display_url(self) -> str: ...

    def read(self, *statements: Any) -> Any: ...


datasets_t = TABLES["datasets"]
examples_t = TABLES["dataset_examples"]
experiments_t = TABLES["experiments"]
links_t = TABLES["experiment_runs"]


def _no_dataset(store: SqlStore, name: str) -> NotFoundError:
    return NotFoundError(f"no dataset {name!r} in {store.display_url}; list them with `orchestrator dataset list`")


def _exists(name: str) -> InputError:
    return InputError(f"dataset {name!r} exists already; add examples to it with `orchestrator dataset add {name} "
                      "--file FILE`, or choose another name")


def add_examples(store: SqlStore, name: str, examples: Sequence[NewExample], *, create: bool,
                 description: str | None) -> DatasetView:
    now = time.time()
    for attempt in (1, 2):
        try:
            with store.lock, store.conn.begin():
                dataset_id = store.conn.execute(update(datasets_t).where(named(datasets_t, name)).values(
                    version=datasets_t.c.version + 1, updated_at=now).returning(key(datasets_t))).scalar()
                if dataset_id is not None and not create:
                    raise _exists(name)
                if dataset_id is None:
                    dataset_id = store.conn.execute(insert(datasets_t).values(dataset_values(name, description, now))
                                                    .returning(key(datasets_t))).scalar_one()
                version = store.conn.execute(select(datasets_t.c.version).where(key(datasets_t) == dataset_id)
                                             ).scalar_one()
                last = store.conn.execute(select(func.max(examples_t.c.position))
                                          .where(examples_t.c.dataset_id == dataset_id)).scalar()
                first = int(last or 0) + 1
                if examples:
                    store.conn.execute(insert(examples_t), [example_values(dataset_id, version, first + i, e, now)
                                                            for i, e in enumerate(examples)])
            break
        except IntegrityError:  # another process created the dataset between our UPDATE and INSERT
            if not create:
                raise _exists(name) from None
            if attempt == 2:
                raise
    return dataset(store, name)


def _dataset_views(store: SqlStore, where: Any) -> list[DatasetView]:
    sizes = dict(store.read(select(examples_t.c.dataset_id, func.count()).group_by(examples_t.c.dataset_id)))
    views = [dataset_view(row, int(sizes.get(row.id, 0))) for row in store.read(select(datasets_t).where(where))]
    return sorted(views, key=lambda view: view.name)


def datasets(store: SqlStore) -> list[DatasetView]:
    return _dataset_views(store, key(datasets_t).is_not(None))


def dataset(store: SqlStore, name: str) -> DatasetView:
    found = _dataset_views(store, named(datasets_t, name))
    if not found:
        raise _no_dataset(store, name)
    return found[0]


def examples(store: SqlStore, name: str, version: int | None) -> list[ExampleView]:
    view = dataset(store, name)
    if version is not None and not 1 <= version <= view.version:
        raise InputError(f"dataset {name!r} has versions 1 to {view.version}; got version {version}")
    upto = view.version if version is None else version
    rows = store.read(select(examples_t).where(and_(examples_t.c.dataset_id == view.id,
                                                    examples_t.c.version <= upto)).order_by(examples_t.c.position))
    return [example_view(row, name) for row in rows]


def create_experiment(store: SqlStore, new: NewExperiment) -> ExperimentView:
    view = dataset(store, new.dataset)
    try:
        with store.lock, store.conn.begin():
            store.conn.execute(insert(experiments_t).values(experiment_values(new, view.id, time.time())))
    except IntegrityError:
        raise InputError(f"an experiment named {new.name!r} exists already; choose another --name") from None
    return experiment(store, new.name)


def _experiment_views(store: SqlStore, where: Any) -> list[ExperimentView]:
    names = {view.id: view.name for view in datasets(store)}
    rows = store.read(select(experiments_t).where(where).order_by(key(experiments_t)))
    return [experiment_view(row, names[row.dataset_id]) for row in rows]


def experiments(store: SqlStore, dataset_name: str | None) -> list[ExperimentView]:
    if dataset_name is None:
        return _experiment_views(store, key(experiments_t).is_not(None))
    return _experiment_views(store, experiments_t.c.dataset_id == dataset(store, dataset_name).id)


def experiment(store: SqlStore, name: str) -> ExperimentView:
    found = _experiment_views(store, named(experiments_t, name))
    if not found:
        raise NotFoundError(f"no experiment {name!r} in {store.display_url}; list them with "
                            "`orchestrator experiment list`")
    return found[0]


def link_experiment_runs(store: SqlStore, name: str, links: Sequence[ExperimentRunLink]) -> None:
    if not links:
        return
    experiment_id = experiment(store, name).id
    with store.lock, store.conn.begin():
        store.conn.execute(insert(links_t), [link_values(experiment_id, link) for link in links])


def finish_experiment(store: SqlStore, name: str, status: str, summary: dict[str, Any]) -> None:
    with store.lock, store.conn.begin():
        changed = store.conn.execute(update(experiments_t).where(named(experiments_t, name)).values(
            experiment_end_values(status, summary, time.time()))).rowcount
    if changed != 1:
        raise NotFoundError(f"no experiment {name!r} in {store.display_url}")


def experiment_runs(store: SqlStore, name: str) -> list[ExperimentRunLink]:
    experiment_id = experiment(store, name).id
    rows = store.read(select(links_t).join(examples_t, key(examples_t) == links_t.c.example_id)
                      .where(links_t.c.experiment_id == experiment_id).order_by(examples_t.c.position))
    return [link_view(row) for row in rows]

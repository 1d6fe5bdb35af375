"""Datasets and experiments on the SQL store (:class:`~orchestrator.store.base.DatasetStore`).

Examples are written in one batch insert per addition (10 000 of them take well under a second on
SQLite). A dataset's version is bumped by one conditional ``UPDATE ... SET version = version + 1``
inside the adding transaction, which also holds the row: two processes adding to one dataset at once
get versions N+1 and N+2, never the same one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from orchestrator.core import jsonio
from orchestrator.core.errors import InputError, NotFoundError
from orchestrator.spec.datasets import (
    DatasetView,
    ExampleView,
    ExperimentRunLink,
    ExperimentView,
    NewExample,
    NewExperiment,
)
from orchestrator.store.tables import TABLES


class SqlStore(Protocol):
    """What these functions need of a SQL store (named by shape, so the store imports this module and never
    the other way round): its held connection, the lock that serialises it, a read in one short
    transaction, a run's integer key, and how to name the database in messages."""

    @property
    def conn(self) -> Connection: ...

    @property
    def lock(self) -> AbstractContextManager[Any]: ...

    @property
    def display_url(self) -> str: ...

    def read(self, *statements: Any) -> Any: ...

    def run_pk(self, run_id: str) -> int: ...

datasets_t = TABLES["datasets"]
examples_t = TABLES["dataset_examples"]
experiments_t = TABLES["experiments"]
links_t = TABLES["experiment_runs"]
runs_t = TABLES["runs"]


def _json_or_none(value: Any) -> str | None:
    return None if value is None else jsonio.dumps(value)


def _loaded(text: str | None) -> Any:
    return None if text is None else jsonio.loads(text)


def _no_dataset(store: SqlStore, name: str) -> NotFoundError:
    return NotFoundError(f"no dataset {name!r} in {store.display_url}; list them with `orchestrator dataset list`")


def add_examples(store: SqlStore, name: str, examples: Sequence[NewExample], *, create: bool,
                 description: str | None) -> DatasetView:
    now = time.time()
    for attempt in (1, 2):
        try:
            with store.lock, store.conn.begin():
                dataset_id = store.conn.execute(
                    update(datasets_t).where(datasets_t.c.name == name)
                    .values(version=datasets_t.c.version + 1, updated_at=now).returning(datasets_t.c.id)).scalar()
                if dataset_id is not None and not create:
                    raise InputError(f"dataset {name!r} exists already; add examples to it with "
                                     f"`orchestrator dataset add {name} --file FILE`, or choose another name")
                if dataset_id is None:
                    dataset_id = store.conn.execute(insert(datasets_t).values(
                        name=name, version=1, description=description, created_at=now, updated_at=now)
                        .returning(datasets_t.c.id)).scalar_one()
                version, last = store.conn.execute(
                    select(datasets_t.c.version, select(func.max(examples_t.c.position))
                           .where(examples_t.c.dataset_id == dataset_id).scalar_subquery())
                    .where(datasets_t.c.id == dataset_id)).one()
                first = int(last or 0) + 1
                if examples:
                    store.conn.execute(insert(examples_t), [
                        {"dataset_id": dataset_id, "version": version, "position": first + i,
                         "inputs": jsonio.dumps(e.inputs), "reference": _json_or_none(e.reference),
                         "label": _json_or_none(e.label), "source_run_id": e.source_run_id, "created_at": now}
                        for i, e in enumerate(examples)])
            break
        except IntegrityError:  # another process created the dataset between our UPDATE and INSERT
            if not create:
                raise InputError(f"dataset {name!r} exists already; choose another name") from None
            if attempt == 2:
                raise
    return dataset(store, name)


def _dataset_views(store: SqlStore, where: Any) -> list[DatasetView]:
    counted = (select(examples_t.c.dataset_id, func.count().label("n"))
               .group_by(examples_t.c.dataset_id).subquery())
    rows = store.read(select(datasets_t, counted.c.n).outerjoin(counted, counted.c.dataset_id == datasets_t.c.id)
                      .where(where).order_by(datasets_t.c.name))
    return [DatasetView(id=r.id, name=r.name, version=r.version, examples=int(r.n or 0), created_at=r.created_at,
                        updated_at=r.updated_at, description=r.description) for r in rows]


def datasets(store: SqlStore) -> list[DatasetView]:
    return _dataset_views(store, datasets_t.c.id.is_not(None))


def dataset(store: SqlStore, name: str) -> DatasetView:
    found = _dataset_views(store, datasets_t.c.name == name)
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
    return [ExampleView(id=r.id, dataset=name, version=r.version, position=r.position, inputs=jsonio.loads(r.inputs),
                        reference=_loaded(r.reference), label=_loaded(r.label), source_run_id=r.source_run_id,
                        created_at=r.created_at) for r in rows]


def create_experiment(store: SqlStore, new: NewExperiment) -> ExperimentView:
    view = dataset(store, new.dataset)
    now = time.time()
    try:
        with store.lock, store.conn.begin():
            store.conn.execute(insert(experiments_t).values(
                name=new.name, dataset_id=view.id, dataset_version=new.dataset_version, workflow_id=new.workflow_id,
                workflow=new.workflow, status="running", params=jsonio.dumps(new.params), summary=None,
                created_at=now, updated_at=now))
    except IntegrityError:
        raise InputError(f"an experiment named {new.name!r} exists already; choose another --name") from None
    return experiment(store, new.name)


def _experiment_views(store: SqlStore, where: Any) -> list[ExperimentView]:
    rows = store.read(select(experiments_t, datasets_t.c.name.label("dataset_name"))
                      .join(datasets_t, datasets_t.c.id == experiments_t.c.dataset_id)
                      .where(where).order_by(experiments_t.c.id))
    return [ExperimentView(id=r.id, name=r.name, dataset=r.dataset_name, dataset_version=r.dataset_version,
                           workflow_id=r.workflow_id, workflow=r.workflow, status=r.status,
                           params=jsonio.loads(r.params), summary=_loaded(r.summary) or {},
                           created_at=r.created_at, updated_at=r.updated_at) for r in rows]


def experiments(store: SqlStore, dataset_name: str | None) -> list[ExperimentView]:
    where = experiments_t.c.id.is_not(None) if dataset_name is None else datasets_t.c.name == dataset_name
    return _experiment_views(store, where)


def experiment(store: SqlStore, name: str) -> ExperimentView:
    found = _experiment_views(store, experiments_t.c.name == name)
    if not found:
        raise NotFoundError(f"no experiment {name!r} in {store.display_url}; list them with "
                            "`orchestrator experiment list`")
    return found[0]


def link_experiment_runs(store: SqlStore, name: str, links: Sequence[ExperimentRunLink]) -> None:
    if not links:
        return
    experiment_id = experiment(store, name).id
    run_pks = {link.run_id: store.run_pk(link.run_id) for link in links}
    with store.lock, store.conn.begin():
        store.conn.execute(insert(links_t), [
            {"experiment_id": experiment_id, "example_id": link.example_id, "run_pk": run_pks[link.run_id],
             "reused_steps": jsonio.dumps(list(link.reused_steps)), "saved_model_calls": link.saved_model_calls,
             "saved_tokens": link.saved_tokens, "saved_cost": link.saved_cost, "saved_seconds": link.saved_seconds}
            for link in links])


def finish_experiment(store: SqlStore, name: str, status: str, summary: dict[str, Any]) -> None:
    with store.lock, store.conn.begin():
        changed = store.conn.execute(update(experiments_t).where(experiments_t.c.name == name).values(
            status=status, summary=jsonio.dumps(summary), updated_at=time.time())).rowcount
    if changed != 1:
        raise NotFoundError(f"no experiment {name!r} in {store.display_url}")


def experiment_runs(store: SqlStore, name: str) -> list[ExperimentRunLink]:
    experiment_id = experiment(store, name).id
    rows = store.read(select(links_t, runs_t.c.run_id).join(runs_t, runs_t.c.id == links_t.c.run_pk)
                      .join(examples_t, examples_t.c.id == links_t.c.example_id)
                      .where(links_t.c.experiment_id == experiment_id).order_by(examples_t.c.position))
    return [ExperimentRunLink(example_id=r.example_id, run_id=r.run_id,
                              reused_steps=tuple(jsonio.loads(r.reused_steps)), saved_model_calls=r.saved_model_calls,
                              saved_tokens=int(r.saved_tokens), saved_cost=float(r.saved_cost),
                              saved_seconds=float(r.saved_seconds)) for r in rows]

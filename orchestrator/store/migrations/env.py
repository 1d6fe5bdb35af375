"""Alembic's environment: migrate the connection :mod:`orchestrator.store.migrate` passes in.

The orchestrator never reads an ``alembic.ini``: it builds the ``Config`` in code and puts an
open connection, already inside the transaction that holds the schema lock, in
``config.attributes["connection"]``. Run from the ``alembic`` command line instead (a
contributor checking a script), ``sqlalchemy.url`` in the config names the database.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from orchestrator.store.tables import metadata


def run_migrations() -> None:
    """Configure Alembic's context for the connection (or URL) it was given and run the scripts."""
    config = context.config
    connection = config.attributes.get("connection")

    if context.is_offline_mode():
        context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=metadata,
                          literal_binds=True, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    elif connection is not None:
        context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
        with context.begin_transaction():  # a no-op inside the caller's transaction
            context.run_migrations()
    else:
        engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
        with engine.connect() as own:
            context.configure(connection=own, target_metadata=metadata, render_as_batch=True)
            with context.begin_transaction():
                context.run_migrations()
        engine.dispose()


if hasattr(context, "config"):  # executed by Alembic; merely importing the module (a package walk) does nothing
    run_migrations()

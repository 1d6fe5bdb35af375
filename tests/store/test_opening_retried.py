"""Opening the database goes through the same retries as every later store call: connections dropped while a
command opens a PostgreSQL database are waited out, and a database that stays away past the retry window is
one clear line and exit 1 (a store error, not invalid input), as the README's exit codes say.

The connections go through a TCP proxy on 127.0.0.1 that closes the first ones at once, as a server
terminating them would; the proxy counts what it dropped.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from orchestrator.api import Orchestrator
from orchestrator.store import open_store


class DroppingProxy:
    """Forwards connections to ``target`` after closing the first ``drops`` of them as soon as they arrive."""

    def __init__(self, target: tuple[str, int], drops: int) -> None:
        self.target = target
        self.drops = drops
        self.dropped = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed: the test is over
                return
            if self.dropped < self.drops:
                self.dropped += 1
                client.close()
                continue
            server = socket.create_connection(self.target)
            self.sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self.pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.listener.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()


def through(proxy: DroppingProxy, url: str) -> str:
    parts = urlsplit(url)
    return url.replace(f"@{parts.hostname}:{parts.port}", f"@127.0.0.1:{proxy.port}", 1)


@pytest.fixture
def target(postgres_url: str) -> tuple[str, int]:
    """The PostgreSQL server, its schema created (so that commands that only read find a database)."""
    open_store(postgres_url).close()
    parts = urlsplit(postgres_url)
    return parts.hostname or "127.0.0.1", parts.port or 5432


@pytest.fixture
def dropping(target: tuple[str, int]) -> Iterator[type[DroppingProxy]]:
    made: list[DroppingProxy] = []

    def make(drops: int) -> DroppingProxy:
        proxy = DroppingProxy(target, drops)
        made.append(proxy)
        return proxy

    yield make  # type: ignore[misc]
    for proxy in made:
        proxy.close()


def test_a_command_opening_a_database_whose_connections_drop_waits_them_out(
        cli, postgres_url: str, dropping, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_DB_RETRY_SECONDS", "30")
    proxy = dropping(3)
    result = cli("runs", "--json", "--db", through(proxy, postgres_url), db=False)
    assert result.exit_code == 0, result.stderr
    assert result.json() == []
    assert proxy.dropped == 3


def test_the_python_api_opening_a_database_whose_connections_drop_waits_them_out(
        postgres_url: str, dropping, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_DB_RETRY_SECONDS", "30")
    proxy = dropping(3)
    with Orchestrator(through(proxy, postgres_url)) as orch:
        assert orch.list_runs().runs == []
    assert proxy.dropped == 3


def test_a_database_that_stays_away_past_the_retries_is_exit_1_with_one_clear_line(
        cli, postgres_url: str, dropping, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_DB_RETRY_SECONDS", "0.5")
    proxy = dropping(10_000)
    url = through(proxy, postgres_url)
    result = cli("runs", "--db", url, db=False)
    assert result.exit_code == 1, result.stderr
    *warnings, last = result.stderr.strip().splitlines()  # each try said on a warning line, as for any call
    assert last.startswith(f"error: cannot open the database 127.0.0.1:{proxy.port}/test"), last
    assert ": it did not answer (" in last and last.endswith("; check --db or ORCHESTRATOR_DB"), last
    assert all(line.startswith("warning: the database") for line in warnings), warnings
    assert proxy.dropped >= 2

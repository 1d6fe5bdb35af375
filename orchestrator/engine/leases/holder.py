"""Who holds a run's lease, and whether that process is known to be gone.

A lease names its holder as ``host:pid``, followed (where ``/proc`` tells) by the process's start time
and the identity of the machine and pid namespace it runs in: ``host:pid#START@MACHINE``. A run whose
holder died is otherwise taken over only once its lease expires (up to ``ORCHESTRATOR_LEASE_SECONDS``).
When the holder ran on this very machine, in this pid namespace, and no process with that pid and that
start time is alive any more, it is certainly dead, and ``resume`` takes the run at once, as a lock file
whose pid is gone is taken. The start time defeats pid reuse: a new process that got the same pid
started later. Anything else (another host, a container with its own pids, no ``/proc``) is never
judged from here: the lease then runs out as before.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import socket
import time
from pathlib import Path

_HOLDER = re.compile(r"^(?P<name>.*:(?P<pid>\d+))#(?P<start>\d+)@(?P<machine>[0-9a-f]+)$")

PROC = Path("/proc")


def this_holder() -> str:
    """This process as a lease names it: ``host:pid``, plus ``#START@MACHINE`` where ``/proc`` tells them."""
    return _holder(os.getpid())  # computed again in a forked child, whose pid differs


@functools.cache
def _holder(pid: int) -> str:
    name = f"{socket.gethostname()}:{pid}"
    start, machine = _start_ticks(pid), this_machine()
    if start is None or machine is None:
        return name
    return f"{name}#{start}@{machine}"


def holder_name(holder: str) -> str:
    """``host:pid`` of a holder, for messages (its start time and machine mean nothing to a reader)."""
    match = _HOLDER.match(holder)
    return match["name"] if match else holder


def executed_by(owner: str | None, lease_expires_at: float | None, now: float | None = None) -> str:
    """Who executes a run, from its stored row, for a refusal: ``being executed by host:pid (its lease runs 1.4 s
    more)``; for a run left ``running`` that no process holds (a decision stored without a lease to continue
    it), ``running with no process holding its lease``."""
    if owner is None or lease_expires_at is None:
        return "running with no process holding its lease"
    left = lease_expires_at - (time.time() if now is None else now)
    if left < 0:
        return f"being executed by {holder_name(owner)} (its lease lapsed {-left:.1f} s ago)"
    return f"being executed by {holder_name(owner)} (its lease runs {left:.1f} s more)"


def holder_is_gone(holder: str) -> bool:
    """Whether the process that holds a lease is certainly dead: it ran on this machine and pid namespace,
    and its pid is now free, a zombie, or another process's (started at another time)."""
    match = _HOLDER.match(holder)
    if match is None or match["machine"] != this_machine():
        return False
    pid = int(match["pid"])
    if pid == os.getpid():
        return False
    return _start_ticks(pid, alive_only=True) != int(match["start"])


@functools.cache
def this_machine() -> str | None:
    """This kernel's boot and this pid namespace, hashed: processes with the same value share one pid space,
    so a pid seen from here means the same process. None without ``/proc``."""
    try:
        boot = (PROC / "sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink(PROC / "self/ns/pid")
    except OSError:
        return None
    return hashlib.sha256(f"{boot}/{namespace}".encode()).hexdigest()[:16]


def _start_ticks(pid: int, *, alive_only: bool = False) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/PID/stat`` field 22); None when no
    such process exists (or, with ``alive_only``, when it is a zombie: killed, not yet reaped)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name, in parentheses, may hold spaces
    if alive_only and fields[0] in ("Z", "X"):
        return None
    return int(fields[19])

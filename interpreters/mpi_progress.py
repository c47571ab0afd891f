"""Where each process of an MPI run is, and who keeps whom waiting.

Each process rewrites one small file as it enters a collective, a send or a
receive: what it entered, on which communicator or channel, and how many
times it has entered each. MPI has every member of a communicator enter its
collectives in one order, and a channel (device s to device t) carries its
messages in order, so the n-th entry on one key is the same operation on
every party. A process waits in its n-th entry on a key exactly while some
other party of that key has made fewer than n: that party is the one to
blame, whatever else the job's other processes are doing (a pipeline's
later stage waiting in a receive while an earlier one computes is not
behind: the stage that has not sent is).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

START, DONE = "started", "done"


def group_key(members: Sequence[int], label: str = "") -> str:
    """A communicator's key: its processes (ranks in the whole job) and a
    label telling apart two communicators of the same processes."""
    return ",".join(map(str, members)) + (f"|{label}" if label else "")


def channel_key(source: int, to: int) -> str:
    """The key of the messages process `source` sends process `to`."""
    return f"{source}>{to}"


def parties(key: str) -> list[int]:
    if ">" in key:
        return [int(r) for r in key.split(">")]
    return [int(r) for r in key.split("|")[0].split(",")]


class ProgressFile:
    """This process's word on where it is, shared by every member (the
    whole job's, a stage's, a mesh axis') it runs collectives through."""

    def __init__(self, path: str | None):
        self.path, self.entered, self.counts = path, 0, dict[str, int]()

    def reached(self, what: str, on: str = "") -> None:
        """Say where this process is: `started`, `done`, or an entry on key
        `on`. One short line, rewritten in place (no fsync: the launcher on
        this machine reads the page cache)."""
        if on:
            self.counts[on] = self.counts.get(on, 0) + 1
            if what != DONE:
                self.entered += 1
        if self.path is None:
            return
        line = json.dumps({"pid": os.getpid(), "entered": self.entered, "what": what, "on": on,
                           "counts": self.counts})
        with open(self.path, "w") as f:
            f.write(line + "\n")


@dataclass
class Progress:
    """A process's last word: its process id, how many collectives, sends
    and receives it entered, the last and on which key, and how many
    entries it made on each key."""

    pid: int
    entered: int
    what: str
    on: str
    counts: dict[str, int]


def read_progress(at: Path, devices: int) -> dict[int, Progress]:
    """Each process's last word, for those that said one."""
    found = {}
    for rank in range(devices):
        try:
            said = json.loads((at / f"progress_{rank}.txt").read_text())
            found[rank] = Progress(int(said["pid"]), int(said["entered"]), str(said["what"]), str(said["on"]),
                                   {str(k): int(v) for k, v in said["counts"].items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):  # not written yet, or caught mid-write
            continue
    return found


@dataclass(frozen=True)
class Wait:
    """Process `waiter` in its `seq`-th entry on `key`, which `blockers`
    have not reached."""

    waiter: int
    key: str
    seq: int
    what: str
    blockers: tuple[int, ...]


def waits(progress: dict[int, Progress], devices: int) -> list[Wait]:
    """Every process that waits for another, and for which (a process that
    has said nothing yet has entered nothing)."""
    found = []
    for rank, p in sorted(progress.items()):
        if not p.on:
            continue
        seq = p.counts.get(p.on, 0)
        blockers = tuple(q for q in parties(p.on) if q != rank and q < devices and (
            q not in progress or progress[q].counts.get(p.on, 0) < seq))
        if blockers:
            found.append(Wait(rank, p.on, seq, p.what, blockers))
    return found


def _devices(ranks: Sequence[int]) -> str:
    return f"device{'s' if len(ranks) > 1 else ''} {', '.join(map(str, sorted(ranks)))}"


def describe(stuck: Sequence[Wait], devices: int, timeout: float) -> str:
    """Who kept whom waiting past `timeout`, one sentence per operation."""
    by_op: dict[tuple[str, int, str], list[Wait]] = {}
    for w in stuck:
        by_op.setdefault((w.key, w.seq, w.what), []).append(w)
    said = []
    for (key, seq, what), ws in by_op.items():
        waiters = [w.waiter for w in ws]
        late = sorted({b for w in ws for b in w.blockers})
        within = f"within --timeout {timeout:g} s, where {_devices(waiters)} waited"
        if ">" in key:
            source, to = parties(key)
            if waiters == [to]:
                said.append(f"device {source} did not send message {seq} to device {to} {within}")
            else:
                said.append(f"device {to} did not receive message {seq} from device {source} {within}")
            continue
        members = parties(key)
        if what == DONE:
            reach = "the end of the run"
        else:
            of = "" if sorted(members) == list(range(devices)) else f" of {_devices(members)}"
            reach = f"collective {seq}{of}"
        said.append(f"{_devices(late)} did not reach {reach} {within}")
    return "the MPI run was stopped: " + "; ".join(said)


def where(progress: dict[int, Progress]) -> str:
    """Each process's last word, a line each."""
    return "".join(f"\ndevice {rank}: " + (f"last {p.what}{_among(p.on, rank)}, {p.entered} entered in all"
                                            if p.on else p.what) for rank, p in sorted(progress.items()))


def _among(key: str, rank: int) -> str:
    if not key:
        return ""
    if ">" in key:
        source, to = parties(key)
        return f" to device {to}" if rank == source else f" from device {source}"
    return f" with {_devices(parties(key))}"

"""The `shard` collectives in numpy, for P simulated devices in one process
(one thread per device) or for real ones (one MPI process per device).

Every form sums in rank order, ((x0 + x1) + x2) + ..., so a simulation and
an MPI run of two devices agree to the bit (MPI's sum of two is x0 + x1 on
both). `all_slice` needs no communication: device k keeps block k.

On a grid of several axes (a mesh, `collectives-on-mesh`), a collective
names the grid axes it runs over: each device exchanges only with the
devices that share its coordinates on the other axes (`group_of`), through
`along`, a member of that group alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls
from xdsl.ir import Operation

from forge_opt.dialects import shard
from forge_opt.interpreters.mpi_progress import START, ProgressFile, channel_key, group_key


class Collectives(Protocol):
    rank: int
    size: int

    def all_reduce(self, x: np.ndarray, reduction: str = "sum") -> np.ndarray: ...

    def all_gather(self, x: np.ndarray, axis: int) -> np.ndarray: ...

    def along(self, shape: Sequence[int], axes: Sequence[int]) -> Collectives: ...


def group_of(shape: Sequence[int], axes: Sequence[int], rank: int) -> list[int]:
    """The ranks (row-major over a grid of `shape`) that share `rank`'s
    coordinates on every axis but `axes`, in the order of their linear
    index over `axes`: the group a collective over `axes` joins. Device
    (r, c) of an R×C mesh: over axis 1, its row's C devices; over axis 0,
    its column's R devices; over both, all of them."""
    coords = list(np.unravel_index(rank, tuple(shape)))
    ranks = []
    for index in np.ndindex(*(shape[a] for a in axes)):
        for a, i in zip(axes, index):
            coords[a] = i
        ranks.append(int(np.ravel_multi_index(tuple(coords), tuple(shape))))
    return ranks


def position(shape: Sequence[int], axes: Sequence[int], rank: int) -> tuple[int, int]:
    """`rank`'s index in its group over `axes` (`group_of`), and the
    group's size: which block of how many an `all_slice` over them gives it."""
    group = group_of(shape, axes, rank)
    return group.index(rank), len(group)


def block(x: np.ndarray, axis: int, rank: int, size: int) -> np.ndarray:
    """Device `rank`'s block of `x` along `axis`."""
    n = x.shape[axis] // size
    return np.take(x, np.arange(rank * n, (rank + 1) * n), axis=axis)


def rank_order_sum(parts: Sequence[np.ndarray], reduction: str = "sum") -> np.ndarray:
    """The parts summed in rank order, or (`reduction="max"`) their maximum."""
    shapes = {np.shape(p) for p in parts}
    if len(shapes) > 1:  # MPI says "Message truncated"; numpy would broadcast them silently
        raise ValueError(f"all_reduce of blocks of different shapes: {sorted(shapes)}")
    total = np.array(parts[0], copy=True)
    for p in parts[1:]:
        total = np.maximum(total, p) if reduction == "max" else total + p
    return total


class ThreadGroup:
    """P devices simulated by P threads: each collective is one exchange of
    every device's array through shared slots."""

    def __init__(self, size: int):
        self.size = size
        self.slots: list[Any] = [None] * size
        self.barrier = threading.Barrier(size)
        self._groups: dict[tuple[int, ...], ThreadGroup] = {}  # the groups of some of these devices
        self._lock = threading.Lock()

    def member(self, rank: int) -> ThreadMember:
        return ThreadMember(self, rank)

    def of(self, ranks: Sequence[int]) -> ThreadGroup:
        """The group of `ranks`, made by the first of them to ask."""
        with self._lock:
            group = self._groups.get(tuple(ranks))
            if group is None:
                group = self._groups[tuple(ranks)] = ThreadGroup(len(ranks))
                if self.barrier.broken:  # a device has failed: nobody may wait in a new group either
                    group.barrier.abort()
            return group

    def abort(self) -> None:
        """Release every device waiting, in this group or any of its groups."""
        with self._lock:
            self.barrier.abort()
            for group in self._groups.values():
                group.barrier.abort()


class ThreadMember:
    def __init__(self, group: ThreadGroup, rank: int):
        self.group, self.rank, self.size = group, rank, group.size

    def _exchange(self, x: np.ndarray) -> list[np.ndarray]:
        g = self.group
        g.slots[self.rank] = np.asarray(x)
        g.barrier.wait()
        parts = list(g.slots)
        g.barrier.wait()  # every device has read before any writes again
        return parts

    def all_reduce(self, x: np.ndarray, reduction: str = "sum") -> np.ndarray:
        return rank_order_sum(self._exchange(x), reduction)

    def all_gather(self, x: np.ndarray, axis: int) -> np.ndarray:
        return np.concatenate(self._exchange(x), axis=axis)

    def along(self, shape: Sequence[int], axes: Sequence[int]) -> ThreadMember:
        """This device as a member of its group over grid `axes`."""
        ranks = group_of(shape, axes, self.rank)
        return ThreadMember(self.group.of(ranks), ranks.index(self.rank))


class MpiMember:
    """This process's device in an MPI job (mpi4py's COMM_WORLD), or in a
    communicator split from it (`members`: its processes' ranks in the
    whole job). With `progress`, a file this process rewrites as it enters
    each collective, send and receive (`{rank}` in its name is the device):
    the launcher reads it to name a device the others wait for
    (`mpi_progress`)."""

    def __init__(self, comm=None, progress: str | None = None, *, members: Sequence[int] | None = None,
                 label: str = "", said: ProgressFile | None = None):
        from mpi4py import MPI  # the `distributed` extra

        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self._sum, self._max = MPI.SUM, MPI.MAX
        self.members = list(members) if members is not None else list(range(self.size))
        self.key = group_key(self.members, label)
        self._along: dict[tuple[int, ...], MpiMember] = {}
        if said is None:
            said = ProgressFile(None if progress is None else progress.replace("{rank}", str(self.rank)))
            said.reached(START)
        self.said = said

    def reached(self, what: str) -> None:
        """Say this process entered `what` (a collective, or `done`: the
        job's last barrier) on this member's communicator."""
        self.said.reached(what, self.key)

    def all_reduce(self, x: np.ndarray, reduction: str = "sum") -> np.ndarray:
        self.reached("all_reduce")
        x = np.ascontiguousarray(x)
        if x.dtype.kind == "V":  # bfloat16 is no MPI type: gathered as bits, combined as the threads combine
            return rank_order_sum(list(self._gathered(x)), reduction)
        out = np.empty_like(x)
        self.comm.Allreduce(x, out, op=self._max if reduction == "max" else self._sum)
        return out

    def all_gather(self, x: np.ndarray, axis: int) -> np.ndarray:
        self.reached("all_gather")
        return np.concatenate(list(self._gathered(np.ascontiguousarray(x))), axis=axis)

    def _gathered(self, x: np.ndarray) -> np.ndarray:
        """Every device's `x`, stacked in rank order; an element type MPI
        lacks (ml_dtypes' bfloat16) travels as unsigned integers of its size."""
        carrier = np.dtype(f"u{x.dtype.itemsize}") if x.dtype.kind == "V" else x.dtype
        out = np.empty((self.size, *x.shape), carrier)
        self.comm.Allgather(x.view(carrier), out)
        return out.view(x.dtype)

    def from_host(self, compute: Callable[[], Any]) -> Any:
        """What the host computes (process 0, once), on every device."""
        value = compute() if self.rank == 0 else None
        self.reached("broadcast")
        return self.comm.bcast(value, root=0)

    def from_rank(self, value: Any, root: int) -> Any:
        """`value` as process `root` has it, on every device (a pipeline's
        outputs, given to the host from the stage that made them)."""
        self.reached("broadcast")
        return self.comm.bcast(value if self.rank == root else None, root=root)

    def send(self, value: Any, to: int) -> None:
        """`value` to process `to` alone (a pipeline stage's activation, to
        the same device of a stage that reads it)."""
        self.said.reached("send", channel_key(self.members[self.rank], self.members[to]))
        self.comm.send(value, dest=to)

    def receive(self, source: int) -> Any:
        """What process `source` sends this one."""
        self.said.reached("receive", channel_key(self.members[source], self.members[self.rank]))
        return self.comm.recv(source=source)

    def group(self, color: int) -> MpiMember:
        """The processes of one `color` (a pipeline stage's P devices) as a
        job of their own, whose collectives are theirs alone."""
        comm = self.comm.Split(color, self.rank)
        return MpiMember(comm, members=comm.allgather(self.members[self.rank]), label=f"group {color}",
                         said=self.said)

    def along(self, shape: Sequence[int], axes: Sequence[int]) -> MpiMember:
        """This process as a member of its group over grid `axes`: a
        sub-communicator, split the first time the grid's collectives ask
        (every process reaches that collective, so all of them split)."""
        key = tuple(axes)
        if key not in self._along:
            ranks = group_of(shape, axes, self.rank)
            self._along[key] = MpiMember(self.comm.Split(ranks[0], ranks.index(self.rank)),
                                         members=[self.members[r] for r in ranks],
                                         label=f"{self.key} axes {','.join(map(str, axes))}", said=self.said)
        return self._along[key]

    def from_each(self, value: Any) -> list[Any]:
        """Every device's `value`, in rank order, on every device."""
        self.reached("all_gather")
        return self.comm.allgather(value)


def run_threads(size: int, work: Callable[[ThreadMember], Any]) -> list[Any]:
    """`work(member)` on `size` threads, one per device; their results in
    rank order. An error on one device is raised (the others are released)."""
    group = ThreadGroup(size)
    results: list[Any] = [None] * size
    errors: list[BaseException] = []

    def body(rank: int) -> None:
        try:
            results[rank] = work(group.member(rank))
        except BaseException as e:
            errors.append(e)
            group.abort()

    threads = [threading.Thread(target=body, args=(k,)) for k in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real or errors:
        raise (real or errors)[0]
    return results


@register_impls
class ShardFunctions(InterpreterFunctions):
    """The collectives for one device of the group `member` belongs to."""

    def __init__(self, member: Collectives):
        self.member = member

    def _group(self, op: Operation) -> Collectives:
        """This device's group over the op's grid axes."""
        grid, axes = shard.grid_of(op).shape.get_values(), shard.grid_axes(op)
        return self.member if len(axes) == len(grid) else self.member.along(grid, axes)

    @impl(shard.AllSliceOp)
    def run_all_slice(self, interpreter: Interpreter, op: shard.AllSliceOp, args):
        m = self._group(op)
        return (block(np.asarray(args[0]), op.axis, m.rank, m.size),)

    @impl(shard.AllGatherOp)
    def run_all_gather(self, interpreter: Interpreter, op: shard.AllGatherOp, args):
        return (self._group(op).all_gather(np.asarray(args[0]), op.axis),)

    @impl(shard.AllReduceOp)
    def run_all_reduce(self, interpreter: Interpreter, op: shard.AllReduceOp, args):
        return (self._group(op).all_reduce(np.asarray(args[0]), str(shard.reduction_of(op))),)

    @impl(shard.ReduceScatterOp)
    def run_reduce_scatter(self, interpreter: Interpreter, op: shard.ReduceScatterOp, args):
        m = self._group(op)
        return (block(m.all_reduce(np.asarray(args[0])), op.axis, m.rank, m.size),)

    @impl(shard.SendOp)
    def run_send(self, interpreter: Interpreter, op: shard.SendOp, args):
        return (args[0],)  # a pipeline's host view (`partition-for-forge{stages}`): the value leaves as it is

    @impl(shard.RecvOp)
    def run_recv(self, interpreter: Interpreter, op: shard.RecvOp, args):
        return (args[0],)  # ... and arrives as it left: its operand is the send's result

    @impl(shard.ShardOp)
    def run_shard(self, interpreter: Interpreter, op: shard.ShardOp, args):
        return (args[0],)  # an annotation: the global value is unchanged

    @impl(shard.ShardingOp)
    def run_sharding(self, interpreter: Interpreter, op: shard.ShardingOp, args):
        return (None,)

"""Who keeps whom waiting in an MPI run, read from the devices' progress
files (`interpreters/mpi_progress.py`): counted per communicator and per
channel, so a process is blamed only by the parties of what it waits in."""

from __future__ import annotations

import json

from forge_opt.interpreters.mpi_progress import (
    DONE,
    Progress,
    ProgressFile,
    channel_key,
    describe,
    group_key,
    read_progress,
    waits,
)

WORLD = group_key([0, 1, 2, 3])
STAGE_0 = group_key([0, 1], "group 0")


def progress(*entries: tuple[str, str, dict[str, int]]) -> dict[int, Progress]:
    return {rank: Progress(100 + rank, sum(c.values()), what, on, c) for rank, (what, on, c) in enumerate(entries)}


def test_a_stage_computing_after_its_collectives_is_not_blamed_by_the_next_waiting_to_receive():
    seen = progress(
        ("all_reduce", STAGE_0, {STAGE_0: 2}),  # stage 0: both through their all-reduces, computing
        ("all_reduce", STAGE_0, {STAGE_0: 2}),
        ("receive", channel_key(0, 2), {channel_key(0, 2): 1}),  # stage 1: each waits for its device of stage 0
        ("receive", channel_key(1, 3), {channel_key(1, 3): 1}),
    )
    found = waits(seen, 4)
    assert [(w.waiter, w.blockers) for w in found] == [(2, (0,)), (3, (1,))]
    assert describe(found, 4, 5) == (
        "the MPI run was stopped: device 0 did not send message 1 to device 2 within --timeout 5 s, where device 2 "
        "waited; device 1 did not send message 1 to device 3 within --timeout 5 s, where device 3 waited")


def test_a_collective_completed_by_every_member_keeps_nobody_waiting():
    seen = progress(*[("all_reduce", WORLD, {WORLD: 3})] * 4)
    assert waits(seen, 4) == []


def test_a_member_short_of_the_collective_is_named_with_its_group():
    seen = progress(("all_gather", STAGE_0, {WORLD: 1, STAGE_0: 2}), ("all_gather", STAGE_0, {WORLD: 1, STAGE_0: 1}),
                    ("all_reduce", WORLD, {WORLD: 1}), ("all_reduce", WORLD, {WORLD: 1}))
    found = waits(seen, 4)
    assert [(w.waiter, w.blockers) for w in found] == [(0, (1,))]
    assert "device 1 did not reach collective 2 of devices 0, 1 within --timeout 5 s, where device 0 waited" in \
        describe(found, 4, 5)


def test_a_deadlock_names_both_sides():
    """Device 0 waits in a collective device 1 never enters, because device
    1 waits for a message device 0 never sends."""
    pair = group_key([0, 1])
    seen = progress(("all_reduce", pair, {pair: 1}), ("receive", channel_key(0, 1), {channel_key(0, 1): 1}))
    text = describe(waits(seen, 2), 2, 5)
    assert "device 1 did not reach collective 1 within --timeout 5 s, where device 0 waited" in text
    assert "device 0 did not send message 1 to device 1 within --timeout 5 s, where device 1 waited" in text


def test_a_device_not_yet_started_or_not_done_is_behind():
    three = group_key([0, 1, 2])
    seen = {0: Progress(100, 1, DONE, three, {three: 2}), 1: Progress(101, 1, "all_reduce", three, {three: 1})}
    assert describe(waits(seen, 3), 3, 5) == (
        "the MPI run was stopped: devices 1, 2 did not reach the end of the run within --timeout 5 s, where device "
        "0 waited; device 2 did not reach collective 1 within --timeout 5 s, where device 1 waited")


def test_the_file_is_the_one_the_launcher_reads(tmp_path):
    file = ProgressFile(str(tmp_path / "progress_0.txt"))
    file.reached("started")
    file.reached("all_reduce", WORLD)
    file.reached("send", channel_key(0, 2))
    read = read_progress(tmp_path, 2)
    assert list(read) == [0] and read[0].entered == 2 and read[0].on == "0>2"
    assert read[0].counts == {WORLD: 1, "0>2": 1}
    (tmp_path / "progress_1.txt").write_text(json.dumps({"pid": 1})[:5])  # caught mid-write: not read
    assert list(read_progress(tmp_path, 2)) == [0]

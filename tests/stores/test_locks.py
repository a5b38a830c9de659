"""StoreLocks: retrievals share the store, a commit has it alone (in this process and across
processes), nested retrievals re-enter, one writing process at a time."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from llama_index_e2rag.stores.locks import STATE_LOCK, WRITER_LOCK, StoreLocks


def test_a_commit_waits_for_readers_and_readers_wait_for_a_commit() -> None:
    locks = StoreLocks()
    events: list[str] = []
    reading = threading.Event()
    release = threading.Event()

    def reader() -> None:
        with locks.reading():
            events.append("read start")
            reading.set()
            release.wait(5)
            events.append("read end")

    def committer() -> None:
        reading.wait(5)
        with locks.committing():
            events.append("commit")

    threads = [threading.Thread(target=reader), threading.Thread(target=committer)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    assert events == ["read start"]  # the commit is held back by the read
    release.set()
    for t in threads:
        t.join(5)
    assert events == ["read start", "read end", "commit"]


def test_a_nested_read_does_not_queue_behind_a_waiting_commit() -> None:
    locks = StoreLocks()
    inner_done = threading.Event()
    commit_waiting = threading.Event()

    def commit() -> None:
        commit_waiting.set()
        with locks.committing():
            pass

    with locks.reading():
        worker = threading.Thread(target=commit)
        worker.start()
        commit_waiting.wait(5)
        time.sleep(0.05)
        with locks.reading():  # would deadlock if it queued behind the commit
            inner_done.set()
    worker.join(5)
    assert inner_done.is_set() and not worker.is_alive()


def test_async_readers_and_commits_exclude_each_other_on_one_loop() -> None:
    locks = StoreLocks()
    inside: list[str] = []
    overlaps: list[tuple[str, ...]] = []

    async def read(i: int) -> None:
        async with locks.areading():
            inside.append(f"r{i}")
            await asyncio.sleep(0.01)
            if "c" in inside:
                overlaps.append(tuple(inside))
            inside.remove(f"r{i}")

    async def commit() -> None:
        async with locks.acommitting():
            inside.append("c")
            await asyncio.sleep(0.02)
            if len(inside) > 1:
                overlaps.append(tuple(inside))
            inside.remove("c")

    async def main() -> None:
        await asyncio.gather(*(read(i) for i in range(5)), commit(), *(read(i) for i in range(5, 9)))

    asyncio.run(main())
    assert overlaps == []


HOLD = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_SH if sys.argv[2] == "shared" else fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
    """
)


def _hold(path: Path, mode: str, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), mode, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_commit_waits_for_another_processs_reader(tmp_path: Path) -> None:
    locks = StoreLocks(tmp_path)
    other = _hold(tmp_path / STATE_LOCK, "shared", 0.5)
    start = time.monotonic()
    with locks.committing():
        waited = time.monotonic() - start
    other.wait(5)
    assert waited > 0.3
    with locks.reading():  # and the other process's shared lock did not block a read of ours
        pass


def test_a_second_writing_process_waits_for_the_first(tmp_path: Path) -> None:
    locks = StoreLocks(tmp_path)
    other = _hold(tmp_path / WRITER_LOCK, "exclusive", 0.5)
    start = time.monotonic()
    with locks.writer():
        waited = time.monotonic() - start
        with locks.writer():  # re-entrant within the process
            pass
    other.wait(5)
    assert waited > 0.3


def _unwritable_by_mode(parent: Path) -> None:
    parent.mkdir()
    parent.chmod(0o500)
    if os.access(parent, os.W_OK):  # root ignores the mode
        parent.chmod(0o700)
        pytest.skip("permission bits do not stop this user (root) from writing")


def _unwritable_by_a_file(parent: Path) -> None:
    parent.write_text("a file where the store's parent folder would be\n")


@pytest.mark.parametrize("unwritable", [_unwritable_by_mode, _unwritable_by_a_file],
                         ids=["read-only folder", "file in the way"])
def test_a_read_only_store_is_read_without_lock_files(tmp_path: Path, unwritable) -> None:
    """Where no lock file can be created, a reader still reads, locking within its process,
    and leaves nothing behind."""
    parent = tmp_path / "ro"
    unwritable(parent)
    home = parent / "e2rag"
    try:
        locks = StoreLocks(home)
        with locks.reading():
            with locks.reading():  # re-entrant, still without a file
                pass
        assert not os.path.lexists(home / STATE_LOCK) and not os.path.lexists(home)
    finally:
        if parent.is_dir():
            parent.chmod(0o700)

"""Freed memory handed back between a write's steps (glibc's ``malloc_trim``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from llama_index_e2rag import heap


def test_give_back_is_a_no_op_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert heap.give_back() is False


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or heap._malloc_trim() is None, reason="glibc only"
)
def test_free_pages_of_many_small_objects_go_back_to_the_system() -> None:
    """Small objects freed in the middle of the heap stay mapped until trimmed (a fresh
    interpreter: nothing else of the test run in its heap)."""
    script = textwrap.dedent(
        """
        from llama_index_e2rag import heap
        def rss():
            for line in open("/proc/self/status"):
                if line.startswith("VmRSS"):
                    return int(line.split()[1]) // 1024
        held = [bytes(600) for _ in range(400_000)]  # ~250 MB through malloc, not mmap
        keep = held[-1:]  # the heap's top stays in use, so free() alone cannot shrink it
        del held
        before = rss()
        returned = heap.give_back()
        print(before, rss(), returned)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.split()
    before, after, returned = int(out[0]), int(out[1]), out[2] == "True"
    assert returned and before - after > 100

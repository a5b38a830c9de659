"""Checked array files: a file is used only when it is the one its sum was recorded for, and
what is mapped or read is the very file that was summed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from llama_index_e2rag.disk.array_files import (
    ChecksumMismatch, checked, drop_pages, head_path, map_npy, map_rows, read_head,
    save_with_head,
)
from llama_index_e2rag.disk.checksums import content_sum

from resident import HAS_SMAPS, resident_kb


def test_checked_opens_only_the_file_its_sum_names(tmp_path):
    path = tmp_path / "rows.f32"
    data = np.arange(12, dtype="<f4").tobytes()
    path.write_bytes(data)
    with checked(path, content_sum(data)) as f:
        assert f.read() == data  # at its start after the sum
    with checked(path, None) as f:  # no sum recorded (a file saved before sums): unchecked
        assert f.read() == data
    for wrong in (content_sum(data[:-4]), content_sum(data[:-1] + b"\0")):
        with pytest.raises(ChecksumMismatch, match="rows.f32 does not match its checksum"):
            with checked(path, wrong):
                pass
    with pytest.raises(ValueError, match="gone.f32 is missing"):
        with checked(tmp_path / "gone.f32", content_sum(data)):
            pass


def test_what_is_mapped_is_the_file_that_was_summed(tmp_path):
    """Another process's save renaming a new file over the path after the check changes
    nothing: the open file is mapped, not the path."""
    path, other = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(path, np.ones((4, 3), np.float32))
    np.save(other, np.zeros((4, 3), np.float32))
    with checked(path, content_sum(path.read_bytes())) as f:
        other.replace(path)
        assert np.array_equal(map_npy(f), np.ones((4, 3), np.float32))
    raw = tmp_path / "raw.f32"
    raw.write_bytes(np.full(6, 2, "<f4").tobytes())
    with checked(raw, content_sum(raw.read_bytes())) as f:
        other.write_bytes(np.zeros(6, "<f4").tobytes())
        other.replace(raw)
        assert np.array_equal(map_rows(f, "<f4", (3, 2)), np.full((3, 2), 2, np.float32))


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(4, 3),
    np.zeros((0, 5), np.float32),
    np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)),
    np.arange(7, dtype=np.int32),
])
def test_map_npy_maps_what_np_load_maps(tmp_path, array):
    path = tmp_path / "a.npy"
    np.save(path, array)
    expected = np.load(path, mmap_mode="r")
    for got in (map_npy(path), map_npy(open(path, "rb"))):
        assert isinstance(got, np.memmap) and not got.flags.writeable
        assert (got.dtype, got.shape, got.flags.f_contiguous) == (
            expected.dtype, expected.shape, expected.flags.f_contiguous)
        assert np.array_equal(got, array)


def test_map_npy_reads_version_2_headers_and_refuses_objects(tmp_path):
    path = tmp_path / "v2.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array(f, np.arange(5, dtype=np.int64), version=(2, 0))
    assert map_npy(path).tolist() == [0, 1, 2, 3, 4]
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="objects"):
        map_npy(path)


def test_map_rows_of_nothing_is_an_empty_array(tmp_path):
    path = tmp_path / "empty.f32"
    path.write_bytes(b"")
    with open(path, "rb") as f:
        for shape in ((0, 4), (3, 0)):
            got = map_rows(f, "<f4", shape)
            assert got.shape == shape and got.dtype == np.float32


def test_save_with_head_writes_the_file_then_a_head_naming_it(tmp_path):
    path = tmp_path / "m.bin"
    save_with_head(path, lambda tmp: tmp.write_bytes(b"abc"),
                   lambda sum_: {"key": "k", "sum": sum_, "after": 1})
    assert path.read_bytes() == b"abc"
    assert head_path(path).name == "m.bin.json"
    assert head_path(path).read_text(encoding="utf-8") == json.dumps(
        {"key": "k", "sum": content_sum(b"abc"), "after": 1})  # the head's order as given
    assert read_head(path)["sum"] == content_sum(b"abc")

    def fail(tmp):
        tmp.write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_with_head(path, fail, lambda sum_: {"sum": sum_})
    assert path.read_bytes() == b"abc" and read_head(path)["sum"] == content_sum(b"abc")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.bin", "m.bin.json"]
    head_path(path).write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match="not a JSON object"):
        read_head(path)


@pytest.mark.skipif(not HAS_SMAPS, reason="reads Linux's smaps")
def test_drop_pages_lets_a_mapping_s_pages_go_and_keeps_its_rows(tmp_path):
    """A read over a mapped file holds its pages in the process until ``drop_pages``, called
    on the mapped array or on any view of it; the rows read afterwards are the same."""
    path = tmp_path / "rows.f32"
    rows = np.random.default_rng(3).standard_normal((4096, 64)).astype("<f4")
    rows.tofile(path)
    with open(path, "rb") as f:
        mapped = map_rows(f, "<f4", rows.shape)
    for view in (mapped, np.ascontiguousarray(mapped[1:]), mapped[::2].view()):
        assert float(np.abs(mapped).sum()) > 0  # every page read
        assert resident_kb(path) >= rows.nbytes // 1024 - 4
        drop_pages(view)
        assert resident_kb(path) == 0
        assert np.array_equal(mapped, rows)
    drop_pages(rows)  # an array in memory: nothing to let go
    assert np.array_equal(mapped, rows)

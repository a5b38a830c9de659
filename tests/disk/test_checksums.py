"""The checksum registry: a file replaced through it is accepted at every instant, and a file
changed behind its back is named."""

from __future__ import annotations

import os
from pathlib import Path

from llama_index_e2rag.disk.checksums import Checksums, content_sum


def test_a_file_written_through_the_registry_checks_and_a_changed_one_is_named(tmp_path: Path) -> None:
    sums = Checksums(tmp_path)
    sums.write("docstore.json", b'{"a": 1}')
    assert sums.check("docstore.json") is None
    (tmp_path / "docstore.json").write_bytes(b'{"a": 2}')
    assert "docstore.json does not match" in (sums.check("docstore.json") or "")
    (tmp_path / "docstore.json").unlink()
    assert "docstore.json is missing" in (sums.check("docstore.json") or "")
    assert sums.check("never_registered.json") is None


def test_both_contents_are_accepted_while_a_replacement_is_under_way(tmp_path: Path, monkeypatch) -> None:
    sums = Checksums(tmp_path)
    sums.write("f.json", b"old")
    seen: list[list[list[int]]] = []
    real_replace = os.replace

    def replace(src, dst):  # the instant before the rename: the registry must accept both
        if str(dst).endswith("f.json"):
            seen.append(sums.read()["f.json"])
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    sums.write("f.json", b"new")
    assert content_sum(b"old") in seen[0] and content_sum(b"new") in seen[0]
    assert sums.read()["f.json"] == [content_sum(b"new")]


def test_a_damaged_registry_checks_nothing_rather_than_everything(tmp_path: Path) -> None:
    sums = Checksums(tmp_path)
    sums.write("f.json", b"x")
    sums.path.write_text("{cut")
    assert sums.read() == {} and sums.check("f.json") is None

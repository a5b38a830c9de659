"""``python -m benchmarks litbank`` as a user runs it: a folder laid out like LitBank in, the
results JSON, the markdown section and the report's LitBank section out; bad input refused in
one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.litbank.report import HEADING, splice

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "benchmarks", "litbank", *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)


def test_cli_scores_a_folder_and_rewrites_only_its_section(tiny_litbank, tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\n## Speed\n\nkeep me\n\n## Method\n\n- rules\n")
    results = tmp_path / "results"
    done = _run("--data-root", str(tiny_litbank), "--results", str(results), "--out", str(doc))
    assert done.returncode == 0, done.stderr
    saved = json.loads((results / "litbank.json").read_text())
    assert saved["works"] == ["901_the_lodger"] and len(saved["per_work"]) == 1
    assert set(saved["systems"]) == {"project", "spacy-ner", "exact-name", "name+pronoun",
                                     "every-verb"}
    assert "events" in saved["systems"]["project"] and "mentions" in saved["systems"]["project"]
    assert "mentions" not in saved["systems"]["every-verb"]
    assert [c["name"] for c in saved["chains"]] == ["Holmes"]  # the six-mention chain's name
    text = doc.read_text()
    assert text.index("keep me") < text.index(HEADING) < text.index("## Method")
    assert (results / "litbank.md").read_text().strip() in text
    again = _run("--data-root", str(tiny_litbank), "--results", str(results), "--out", str(doc),
                 "--systems", "spacy-ner", "--only", "901")
    assert again.returncode == 0, again.stderr
    text = doc.read_text()
    assert text.count(HEADING) == 1 and "keep me" in text and "| project |" not in text
    doc.write_text("# Benchmarks\n")
    rendered = _run("--render-only", "--results", str(results), "--out", str(doc))
    assert rendered.returncode == 0, rendered.stderr
    assert (results / "litbank.md").read_text().strip() in doc.read_text()


def test_cli_refuses_a_folder_that_is_not_litbank(tmp_path):
    done = _run("--data-root", str(tmp_path), "--results", str(tmp_path / "r"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(f"not a LitBank folder: {tmp_path} "
                                                         "has no coref/ folder")
    assert not (tmp_path / "r").exists()
    nothing = _run("--render-only", "--results", str(tmp_path / "r"))
    assert nothing.returncode == 2 and "no saved results to render" in nothing.stderr


def test_splice_places_a_new_section_before_method_and_replaces_an_old_one():
    section = f"{HEADING}\n\nnew figures\n"
    first = splice("# B\n\n## Speed\n\nx\n\n## Method\n\ny\n", section)
    assert first.index("## Speed") < first.index("new figures") < first.index("## Method")
    second = splice(first, f"{HEADING}\n\nnewer\n")
    assert "new figures" not in second and second.count(HEADING) == 1 and "x" in second
    assert splice("# B\n", section).endswith("new figures\n")


def test_the_whole_report_keeps_the_saved_litbank_section(tmp_path, monkeypatch):
    """``python -m benchmarks full --render-only`` rewrites docs/benchmarks.md from its own
    results: the LitBank section comes back from benchmarks/results/litbank.md."""
    from benchmarks import report
    from benchmarks.__main__ import main
    from benchmarks.litbank import report as litbank_report

    saved_md = tmp_path / "litbank.md"
    saved_md.write_text(f"{HEADING}\n\nfigures of the last LitBank run\n")
    monkeypatch.setattr(litbank_report, "RESULTS_MD", saved_md)
    saved = {"profile": "full", "machine": report.machine_info(), "embed_model": "hash",
             "modes": ["grounded"], "multihop_budget": 100, "runs": {}}
    (tmp_path / "full.json").write_text(json.dumps(saved))
    out = tmp_path / "benchmarks.md"
    assert main(["full", "--render-only", "--results", str(tmp_path), "--out", str(out)]) == 0
    text = out.read_text()
    assert text.index("figures of the last LitBank run") < text.index("## Method")

"""The novel experiment driver: its cache (keyed, resumable, never stale), evaluation on cached
stores with the real offline default, and book-level cross-validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.loaders import load_literaryqa
from benchmarks.novels.__main__ import main
from benchmarks.novels.cache import BOOK_MANIFEST, BookCache, build_code_fingerprint
from benchmarks.novels.cv import CROSS_VALIDATED, cross_validate
from benchmarks.novels.evaluate import DEFAULT, Config, ablations, evaluate
from benchmarks.protocol import Row, place_books

STORIES = {
    "901": ("The Lamp", (
        "Mara kept the lighthouse lamp on the northern cliff. Every evening she climbed the "
        "iron stairs and trimmed the wick while the gulls circled. One winter night a storm "
        "broke the great window and the lamp went dark. A fishing boat struck the rocks below. "
        "After the wreck Mara refused to leave the tower. She sewed canvas over the broken "
        "window and burned whale oil in a kitchen pan until dawn. The fishermen she had saved "
        "brought her bread and a new pane of glass in the spring."),
        [("What did Mara do after the wreck?", "burned whale oil in a kitchen pan"),
         ("What broke the great window?", "a storm")]),
    "902": ("The Orchard", (
        "Old Tobias grew pears behind the mill. His grandson Elin picked the fruit each autumn "
        "and sold it at the market by the bridge. When the miller's dog dug under the fence, "
        "Tobias built a stone wall. Before the wall was finished, the dog ate every pear on the "
        "lowest branches. Elin laughed and planted a second tree by the river, far from the "
        "mill, where no dog would wander. Years later the river tree bore the sweetest pears in "
        "the valley, and Elin gave the first basket to the miller."),
        [("Where did Elin plant the second tree?", "by the river"),
         ("What did the dog do before the wall was finished?", "ate every pear")]),
}


def _data_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    folder = root / "literaryqa"
    (folder / "books").mkdir(parents=True)
    lines = []
    for gid, (title, text, qas) in STORIES.items():
        (folder / "books" / f"pg{gid}_story.txt").write_text(text, encoding="utf-8")
        lines.append(json.dumps({"gutenberg_id": int(gid), "title": title,
                                 "qas": [{"question": q, "answers": [a, a]} for q, a in qas]}))
    (folder / "validation.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_the_build_fingerprint_ignores_query_time_code_only(tmp_path):
    library = tmp_path / "lib"
    for name in ("ranking/narrative.py", "retrievers/narrative.py", "extract/passages.py",
                 "index.py"):
        (library / name).parent.mkdir(parents=True, exist_ok=True)
        (library / name).write_text("x = 1\n")
    first = build_code_fingerprint(library)
    (library / "ranking" / "narrative.py").write_text("x = 2\n")
    (library / "retrievers" / "narrative.py").write_text("x = 2\n")
    assert build_code_fingerprint(library) == first
    (library / "extract" / "passages.py").write_text("x = 2\n")
    second = build_code_fingerprint(library)
    assert second != first
    (library / "index.py").write_text("x = 2\n")
    assert build_code_fingerprint(library) != second


def test_configurations_parse_from_json_and_refuse_unknown_weights():
    config = Config.parse('{"weights": {"anchor": 0.0}, "disable": ["edge"]}')
    assert config.mode == "narrative" and config.weights == {"anchor": 0.0}
    assert config.options == {"disable": ["edge"]}
    assert config.name == '{"disable":["edge"],"weights":{"anchor":0.0}}'
    with pytest.raises(ValueError, match="unknown NarrativeWeights"):
        Config.parse({"weights": {"anchr": 1.0}})
    names = [c.name for c in ablations()]
    assert names[0] == "narrative" and len(set(names)) == len(names)
    assert "-anchor" in names and "-anchor -mention" in names


@pytest.mark.minilm  # the build subprocess embeds with the offline default
def test_books_are_built_once_resumed_after_a_kill_and_evaluated_from_the_cache(tmp_path):
    root = _data_root(tmp_path)
    books = sorted(load_literaryqa(root), key=lambda b: b.doc_id)
    cache = BookCache(tmp_path / "cache")
    cache.build(books[:1], root)
    first = cache.cached(books[0])
    assert first is not None
    stamp = (first / BOOK_MANIFEST).stat().st_mtime_ns
    killed = cache.book_dir(books[1])  # what a build killed mid-way leaves: no bench.json
    killed.mkdir(parents=True)
    (killed / "docstore.json").write_text("{")
    log: list[str] = []
    cache.build(books, root, log=log.append)
    assert (first / BOOK_MANIFEST).stat().st_mtime_ns == stamp  # not built again
    assert any("pg901: cached" in line for line in log)
    manifest = cache.manifest(books[1])
    assert manifest["doc_id"] == "pg902" and manifest["build_seconds"] > 0
    assert manifest["settings_key"] == cache.key

    configs = [DEFAULT, Config("-anchor", options={"disable": ("anchor",)})]
    rows, per_book = evaluate(cache, books, configs, log=log.append)
    assert [b["doc_id"] for b in per_book] == ["pg901", "pg902"]
    systems = {r.system for r in rows}
    assert systems == {"bm25", "dense", "hybrid", "random", "narrative", "-anchor"}
    assert len(rows) == 4 * len(systems)
    assert all(r.atr is not None for r in rows)

    out, md = tmp_path / "run.json", tmp_path / "novels.md"
    grid = '[{"name": "narrative"}, {"name": "no edge", "disable": ["edge"]}]'
    assert main(["--data-root", str(root), "--cache", str(cache.root), "cv", "--config", grid,
                 "--signals", "--out", str(out), "--markdown", str(md)]) == 0
    saved = json.loads(out.read_text())
    assert saved["settings_key"] == cache.key and len(saved["books"]) == 2
    assert {r["system"] for r in saved["rows"]} == {"bm25", "dense", "hybrid", "random",
                                                      "narrative", "no edge"}
    assert {f: fold["reported_on"] for f, fold in saved["cv"]["folds"].items()} == \
        {"A": "B", "B": "A"}
    assert len(saved["signals"]) == 4
    assert {s["third"] for s in saved["signals"]} == {"short", "medium"}
    text = md.read_text()
    assert "| no edge |" in text and "2 of 2 books" in text and "partial" not in text
    assert "| cross-validated |" in text and "mention fires / touches" in text

    # a run resumed from saved results scores only the books they lack, and pools them all
    one, resumed = tmp_path / "one.json", tmp_path / "resumed.json"
    base = ["--data-root", str(root), "--cache", str(cache.root), "evaluate", "--config", grid]
    assert main([*base, "--books", "1", "--out", str(one)]) == 0
    first_rows = json.loads(one.read_text())["rows"]
    assert main([*base, "--resume", str(one), "--out", str(resumed)]) == 0
    again = json.loads(resumed.read_text())
    assert again["resumed"]["books"] == ["pg901"] and len(again["books"]) == 2
    assert [r for r in again["rows"] if r["doc_id"] == "pg901"] == first_rows
    assert sorted(map(json.dumps, again["rows"])) == sorted(map(json.dumps, saved["rows"]))
    with pytest.raises(SystemExit, match="configurations differ"):
        main([*base[:-2], "--resume", str(one)])

    changed = BookCache(cache.root, settings={**cache.settings, "passage_words": 80})
    assert changed.cached(books[0]) is None
    assert [s.differs for s in changed.stale(books[0])] == [("passage_words",)]
    rows, per_book = evaluate(changed, books, configs, log=log.append)
    assert rows == [] and "stale builds differ in passage_words" in log[-1]


def test_cross_validation_reports_each_folds_choice_on_the_other_fold():
    places = place_books([("a0", 10), ("b1", 20), ("a2", 30), ("b3", 40)])
    assert [places[d].fold for d in ("a0", "b1", "a2", "b3")] == ["A", "B", "A", "B"]
    atr = {  # x wins on fold A's books, y on fold B's
        "hybrid": {"a0": 0.5, "b1": 0.5, "a2": 0.5, "b3": 0.5},
        "x": {"a0": 0.9, "b1": 0.4, "a2": 0.7, "b3": 0.4},
        "y": {"a0": 0.5, "b1": 0.8, "a2": 0.5, "b3": 0.6},
        "z": {"a0": 0.9, "b1": 0.4, "a2": 0.7, "b3": 0.4},  # ties x: the earlier one wins
    }
    rows = [Row(f"{doc}-q", doc, system, value, doc in ("a2", "b3"))
            for system, books in atr.items() for doc, value in books.items()]
    cv = cross_validate(rows, places, ["x", "y", "z"])
    assert cv["folds"]["A"]["chosen"] == "x" and cv["folds"]["A"]["reported_on"] == "B"
    assert cv["folds"]["B"]["chosen"] == "y"
    assert cv["folds"]["A"]["report"]["atr_vs_hybrid"] == pytest.approx(0.8)  # x on b1, b3
    pooled = cv["by_third"][CROSS_VALIDATED]["all"]
    assert pooled["atr"] == pytest.approx((0.5 + 0.4 + 0.5 + 0.4) / 4)  # y on A, x on B
    assert pooled["atr_time"] == pytest.approx((0.5 + 0.4) / 2)
    assert cross_validate(rows, places, ["x", "y"], "atr+time")["folds"]["B"]["chosen"] == "y"
    with pytest.raises(ValueError, match="both folds"):
        cross_validate([r for r in rows if places[r.doc_id].fold == "A"], places, ["x"])


def test_a_bad_configuration_is_one_clear_line(tmp_path, capsys):
    root = _data_root(tmp_path)
    for bad, says in (("{bad", "bad --config"), ('{"weights": {"anchr": 1}}', "anchr")):
        with pytest.raises(SystemExit) as exit_info:
            main(["--data-root", str(root), "--cache", str(tmp_path / "c"), "evaluate",
                  "--config", bad])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert says in err[-1] and "Traceback" not in "\n".join(err)
    assert not (tmp_path / "c").exists()

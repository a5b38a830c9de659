"""The benchmark harness: scoring definitions on hand-made inputs, loaders and a tiny run on the
shared data (skipped without it)."""

from __future__ import annotations

import json

import pytest

from benchmarks import scoring
from benchmarks.baselines import WindowBaselines, make_windows, rrf
from benchmarks.loaders import (
    concatenated_words,
    load_fairytaleqa,
    load_literaryqa,
    load_multihop,
    strip_gutenberg,
)
from benchmarks.runner.quality import (
    DatasetSpec,
    evaluate_multihop,
    evaluate_narratives,
)
from benchmarks.scaling import growth_exponent


# -- scoring (no data needed) -------------------------------------------------------------------
def test_budget_takes_passages_in_order_and_cuts_the_overflowing_one():
    context = scoring.apply_budget(["one two three", "four five six", "seven"], 5)
    assert context.split() == ["one", "two", "three", "four", "five"]


def test_budget_larger_than_all_text_keeps_everything():
    assert scoring.apply_budget(["a b", "c"], 100).split() == ["a", "b", "c"]


def test_atr_drops_stop_words_and_takes_the_best_reference():
    context = "Peter lost his blue jacket in the garden."
    # "the", "of" are stop words: the first reference is {peter, jacket, shoes} -> 2/3.
    recall = scoring.answer_token_recall(context, ["the jacket of Peter, shoes"])
    assert recall == pytest.approx(2 / 3)
    assert scoring.answer_token_recall(context, ["shoes", "blue jacket"]) == 1.0


def test_atr_of_a_stop_word_only_answer_uses_all_its_words():
    assert scoring.answer_token_recall("he did not", ["not"]) == 1.0
    assert scoring.answer_token_recall("he did", ["not"]) == 0.0
    assert scoring.answer_token_recall("anything", ["", "  "]) is None


def test_exact_containment_needs_the_whole_answer_on_word_boundaries():
    context = "Mr. McGregor chased Peter out of the garden!"
    assert scoring.exact_containment(context, ["chased peter"]) == 1.0
    assert scoring.exact_containment(context, ["Peter out of the house"]) == 0.0
    assert scoring.exact_containment(context, ["eter"]) == 0.0


def test_section_quoted_needs_a_shared_run_of_eight_words():
    section = "once upon a time there lived a poor miller who had three sons"
    eight = "there lived a poor miller who had three"
    seven = "lived a poor miller who had three"
    assert scoring.unit_recall(f"blah {eight} blah", [section]) == 1.0
    assert scoring.unit_recall(f"blah {seven} blah", [section]) == 0.0
    assert scoring.unit_recall(eight, [section, "something else entirely here now ok"]) == 0.5


def test_short_gold_units_must_appear_whole():
    assert scoring.unit_recall("It was released in 1968.", ["It was released in 1968."]) == 1.0
    assert scoring.unit_recall("It was released in 1969.", ["It was released in 1968."]) == 0.0


def test_time_questions_follow_the_chronorag_definition():
    assert scoring.is_time_question("What happened after the ball?")
    assert scoring.is_time_question("When did Peter return?")
    assert not scoring.is_time_question("Who is the afterlife keeper?")


def test_rrf_rewards_items_ranked_high_by_both():
    assert rrf([[1, 2, 3], [3, 1, 2]])[0] == 1
    assert set(rrf([[1], [2]])) == {1, 2}


def test_windows_are_consecutive_and_cover_the_text():
    windows = make_windows(" ".join(str(i) for i in range(25)), 10)
    assert [len(w.split()) for w in windows] == [10, 10, 5]
    assert windows[1].split()[0] == "10"


def test_bm25_ranks_the_matching_window_first(hash_embed):
    windows = ["the cat sat on the mat", "a dragon guarded the gold", "rain fell on the town"]
    ranked = WindowBaselines(windows, hash_embed).rank_all(["q1"], ["who guarded the gold?"])
    assert ranked["bm25"][0][0] == "a dragon guarded the gold"
    assert set(ranked) == {"bm25", "dense", "hybrid", "random"}
    assert sorted(ranked["random"][0]) == sorted(windows)


def test_gutenberg_header_and_footer_are_stripped():
    raw = ("Title: X\r\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\r\nBody line.\r\n"
           "More body.\r\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\r\nLicence text\r\n")
    assert strip_gutenberg(raw) == "Body line.\nMore body."


def test_growth_exponent_of_a_quadratic_is_two():
    assert growth_exponent([10, 100, 1000], [1, 100, 10000]) == pytest.approx(2.0)
    assert growth_exponent([10], [1]) is None


def test_failing_index_becomes_an_error_row_not_a_crash(hash_embed):
    from benchmarks.loaders import Narrative, Question

    story = Narrative(doc_id="s", title="s", text="Peter ran home. " * 40,
                      questions=[Question(qid="q", question="Where did Peter run?",
                                          answers=["home"])])

    def broken(documents, questions):
        raise RuntimeError("boom")

    spec = DatasetSpec("tiny", "test", budget=20, window=10, modes=("grounded",))
    result = evaluate_narratives(spec, [story], hash_embed, broken)
    assert "boom" in result["systems"]["grounded"]["error"]
    assert result["systems"]["bm25"]["atr"] == 1.0


# -- the real data (skips without it) -----------------------------------------------------------
@pytest.mark.shared_data
def test_loaders_read_the_real_files(shared_data):
    books = load_literaryqa(shared_data)
    assert len(books) == 44 and sum(len(b.questions) for b in books) == 1327
    assert all("*** START OF" not in b.text and "\r" not in b.text for b in books)
    stories = load_fairytaleqa(shared_data, "val")
    assert len(stories) == 23 and sum(len(s.questions) for s in stories) == 1025
    multi_section = [q for s in stories for q in s.questions if len(q.gold_sections) > 1]
    assert multi_section, "cor_section lists like '1,2' must give several gold sections"
    multihop = load_multihop(shared_data)
    assert {k: len(v) for k, v in multihop.items()} == {"hotpotqa": 100, "2wiki": 82,
                                                         "musique": 100}
    for item in multihop["hotpotqa"][:10]:
        joined = " ".join(body for _, body in item.paragraphs)
        assert all(scoring.unit_recall(joined, [g]) == 1.0 for g in item.gold_units)
    assert len(concatenated_words(books, 10_000).split()) == 10_000


@pytest.mark.shared_data
def test_harness_runs_on_a_tiny_slice(shared_data, hash_embed, tmp_path):
    story = load_fairytaleqa(shared_data, "val")[0]
    story.questions = story.questions[:5]
    spec = DatasetSpec("fairytaleqa", "val", budget=200, window=50, modes=())
    result = evaluate_narratives(spec, [story], hash_embed, None)
    systems = result["systems"]
    assert systems["whole text"]["recall"] == 1.0
    assert systems["bm25"]["words"] == 200
    assert 0.0 <= systems["hybrid"]["atr"] <= 1.0
    item = load_multihop(shared_data)["musique"][0]
    spec = DatasetSpec("musique", "dev", budget=100, window=50, modes=())
    recall = evaluate_multihop(spec, [item], hash_embed, None)["systems"]
    assert recall["whole text"]["recall"] == 1.0
    assert recall["random"]["words"] <= 100
    json.dumps(result)  # results must serialise as JSON


@pytest.mark.shared_data
def test_report_renders_error_rows_and_tables(shared_data, hash_embed, tmp_path):
    from benchmarks import report

    story = load_fairytaleqa(shared_data, "val")[1]
    story.questions = story.questions[:3]
    spec = DatasetSpec("fairytaleqa", "val", budget=200, window=50, modes=("grounded",))
    quality = evaluate_narratives(spec, [story], hash_embed, None)
    results = {"profile": "test", "machine": report.machine_info(), "embed_model": "hash",
               "modes": ["grounded"], "multihop_budget": 100, "quality": {"fairytaleqa": quality}}
    text = report.render(results, tmp_path / "img", tmp_path / "benchmarks.md")
    assert "| grounded | **error**: index not available" in text
    assert "| hybrid |" in text and (tmp_path / "img" / "quality.png").is_file()


def test_replayed_passages_stop_where_the_budget_is_spent():
    from benchmarks.speed import _within_budget

    passages = ["a b c", "d e", "f g h i", "j"]
    assert _within_budget(passages, 4) == ["a b c", "d e"]
    assert _within_budget(passages, None) == passages


def test_timed_embedding_returns_the_inner_vectors_and_counts_texts(hash_embed):
    from benchmarks.systems import TimedEmbedding

    timed = TimedEmbedding(hash_embed)
    texts = ["Peter ran home.", "Mr. McGregor shouted."]
    assert timed.get_text_embedding_batch(texts) == hash_embed.get_text_embedding_batch(texts)
    assert timed.texts == 2
    timed.reset()
    assert timed.texts == 0 and timed.seconds == 0.0


def test_a_timed_build_chunks_like_the_build_a_user_gets_with_the_same_model(hash_embed):
    from benchmarks.systems import TimedEmbedding
    from llama_index_e2rag.extract.chunking import default_chunk_size
    from llama_index_e2rag.embeddings import MiniLMEmbedding

    for limit in (128, 256):
        model = MiniLMEmbedding(max_length=limit)
        assert default_chunk_size(TimedEmbedding(model)) == default_chunk_size(model) == limit
    assert default_chunk_size(TimedEmbedding(hash_embed)) == default_chunk_size(hash_embed)


def test_lightrag_prompts_are_fully_formatted_around_the_chunk():
    pytest.importorskip("lightrag")
    from benchmarks.llm_cost import lightrag_prompts

    system, user, cont = lightrag_prompts("Peter squeezed under the gate.")
    assert "Peter squeezed under the gate." in user
    for prompt in (system, user, cont):
        assert "{tuple_delimiter}" not in prompt and "{language}" not in prompt
    assert "<|#|>" in system and "English" in user


def test_e2rag_cost_counts_two_calls_per_chunk_and_one_when_combined():
    from llama_index.core.schema import TextNode

    from benchmarks.llm_cost import e2rag_cost

    chunks = [TextNode(text="Peter met Benjamin in the wood. They ran home.", id_=f"c{i}")
              for i in range(3)]
    count = len  # characters stand in for tokens: only the call structure is checked here
    separate, combined = e2rag_cost(chunks, False, count), e2rag_cost(chunks, True, count)
    assert separate["calls"] == 6 and combined["calls"] == 3
    assert combined["prompt_tokens"] < separate["prompt_tokens"]


def test_a_partial_rerun_keeps_the_other_parts_with_their_own_stamp(tmp_path):
    from benchmarks import report
    from benchmarks.__main__ import merge_results

    def machine(date: str, commit: str) -> dict:
        return {"nproc": 2, "ram_gib": 24.0, "cpu": "cpu", "date_utc": date, "git_commit": commit}

    old_run = {"machine": machine("2026-01-01 10:00 UTC", "aaa111"), "command": "old",
               "wall_seconds": 60.0}
    previous = {"profile": "full", "machine": old_run["machine"], "runs": {"scaling": old_run},
                "scaling": {"sizes": [1], "rows": [], "exponents": {}},
                "llm_cost": {"stale": True}}
    new_run = {"machine": machine("2026-02-02 11:00 UTC", "bbb222"), "command": "new",
               "wall_seconds": 120.0}
    new = {"profile": "full", "machine": new_run["machine"], "embed_model": "hash",
           "modes": [], "multihop_budget": 100, "runs": {"llm_cost": new_run},
           "llm_cost": {"stale": False}}
    merged = merge_results(previous, new, ["llm_cost"])
    assert merged["scaling"] == previous["scaling"]
    assert merged["llm_cost"] == {"stale": False}
    assert set(merged["runs"]) == {"scaling", "llm_cost"}
    assert merge_results({**previous, "profile": "quick"}, new, ["llm_cost"]) is new
    assert "2026-01-01 10:00 UTC" in report._stamp(merged, part="scaling")
    assert "`aaa111`" in report._stamp(merged, part="scaling")
    assert "2026-02-02 11:00 UTC" in report._stamp(merged, part="llm_cost")
    header = "\n".join(report._runs(merged))
    assert "| scaling | `old` |" in header and "| llm_cost | `new` |" in header


def test_a_quality_rerun_of_some_datasets_keeps_the_others_with_their_own_stamp():
    from benchmarks import report
    from benchmarks.__main__ import merge_results, quality_run_key

    def machine(date: str, commit: str) -> dict:
        return {"nproc": 2, "ram_gib": 24.0, "cpu": "cpu", "date_utc": date, "git_commit": commit}

    old_run = {"machine": machine("2026-01-01 10:00 UTC", "aaa111"), "command": "old",
               "wall_seconds": 60.0}
    previous = {"profile": "full", "machine": old_run["machine"], "runs": {"quality": old_run},
                "quality": {"literaryqa": {"old": True}, "hotpotqa": {"old": True}},
                "speed": {"rows": ["book"]}}
    key = quality_run_key(["hotpotqa", "2wiki"])
    assert key == "quality (hotpotqa, 2wiki)" and quality_run_key(
        ["musique", "2wiki", "hotpotqa", "fairytaleqa", "literaryqa"]) == "quality"
    new_run = {"machine": machine("2026-02-02 11:00 UTC", "bbb222"), "command": "new",
               "wall_seconds": 120.0}
    new = {"profile": "full", "machine": new_run["machine"], "embed_model": "hash",
           "modes": [], "multihop_budget": 100, "runs": {key: new_run},
           "quality": {"hotpotqa": {"run": key}, "2wiki": {"run": key}}}
    merged = merge_results(previous, new, ["quality"])
    assert list(merged["quality"]) == ["literaryqa", "hotpotqa", "2wiki"]
    assert merged["quality"]["literaryqa"] == {"old": True}
    assert merged["quality"]["hotpotqa"] == {"run": key}
    assert merged["speed"] == {"rows": ["book"]}
    assert set(merged["runs"]) == {"quality", key}
    assert "`aaa111`" in report._stamp(merged, part="quality")
    assert "`bbb222`" in report._stamp(merged, part=key)
    # a later run of every dataset retires the partial run's entry
    everything = {**new, "runs": {"quality": new_run},
                  "quality": {"literaryqa": {}, "hotpotqa": {}, "2wiki": {}},
                  "speed": {"rows": []}}
    assert set(merge_results(merged, everything, ["quality"])["runs"]) == {"quality"}


def test_sentence_graph_is_a_benchmarked_mode_with_its_builder_in_the_offline_build():
    from benchmarks.systems import MODES, doc_builders

    assert "sentence_graph" in MODES
    assert "SentenceGraphBuilder" in {type(b).__name__ for b in doc_builders()}


def test_books_must_be_positive(tmp_path, capsys):
    from benchmarks.__main__ import main

    with pytest.raises(SystemExit):
        main(["full", "--books", "0", "--data-root", str(tmp_path), "--results", str(tmp_path)])
    assert "--books must be at least 1" in capsys.readouterr().err
    assert not (tmp_path / "full.json").exists()


def test_runs_header_says_whether_the_library_is_the_same_at_every_commit(monkeypatch):
    from benchmarks import report

    def machine(commit: str) -> dict:
        return {"date_utc": "2026-01-01 10:00 UTC", "git_commit": commit}

    results = {"profile": "full", "runs": {
        "scaling": {"machine": machine("aaa111"), "command": "a", "wall_seconds": 1.0},
        "quality": {"machine": machine("bbb222"), "command": "b", "wall_seconds": 1.0}}}
    monkeypatch.setattr(report, "_library_tree", lambda commit: "tree1")
    assert "is the same at all these commits" in "\n".join(report._runs(results))
    monkeypatch.setattr(report, "_library_tree", lambda commit: f"tree-{commit}")
    assert "differs between these commits" in "\n".join(report._runs(results))
    monkeypatch.setattr(report, "_library_tree", lambda commit: None)
    assert "differs between these commits" in "\n".join(report._runs(results))


def test_render_only_rewrites_the_report_from_saved_results(tmp_path):
    from benchmarks import report
    from benchmarks.__main__ import main

    saved = {"profile": "full", "machine": report.machine_info(), "embed_model": "hash",
             "modes": ["grounded"], "multihop_budget": 100, "runs": {},
             "llm_cost": {"sources": ["pg1"], "source_tokens": 10, "tokenizer": "t",
                          "index_chunk_size_overlap": [1200, 100],
                          "rows": {"E²RAG": {"error": "boom"}},
                          "paper": {"e2rag": 2, "lightrag": 1, "ratio": 2.0}}}
    (tmp_path / "full.json").write_text(json.dumps(saved))
    out = tmp_path / "docs" / "benchmarks.md"
    assert main(["full", "--render-only", "--results", str(tmp_path), "--out", str(out)]) == 0
    assert "| E²RAG | **error**: boom |" in out.read_text()
    with pytest.raises(SystemExit):
        main(["full", "--render-only", "--results", str(tmp_path / "none"), "--out", str(out)])


def test_a_render_keeps_the_notes_measured_by_hand(tmp_path, monkeypatch):
    from benchmarks import report
    from benchmarks.__main__ import main

    note = tmp_path / "first-answer.md"
    note.write_text("**First answer (by hand).** cold query 9.5 s\n")
    monkeypatch.setattr(report, "FIRST_ANSWER_MD", note)
    saved = {"profile": "full", "machine": report.machine_info(), "embed_model": "hash",
             "modes": ["grounded"], "multihop_budget": 100, "runs": {}}
    (tmp_path / "full.json").write_text(json.dumps(saved))
    out = tmp_path / "docs" / "benchmarks.md"
    assert main(["full", "--render-only", "--results", str(tmp_path), "--out", str(out)]) == 0
    assert "**First answer (by hand).** cold query 9.5 s" in out.read_text()
    note.unlink()
    assert main(["full", "--render-only", "--results", str(tmp_path), "--out", str(out)]) == 0
    assert "First answer" not in out.read_text()

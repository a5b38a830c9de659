"""``e2rag index`` on an existing store (layers added without extracting again, unchanged files
skipped), ``--encoding``, and messages that say what to run rather than what to call."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hash_embedding import HashEmbedding
from llama_index.core import Settings
from scripted_llm import ScriptedLLM
from extract.test_chrono import HARBOUR, MOUNTAIN
from persisted_demo import forbid
from test_index import NAMES, STORY

from llama_index_e2rag.cli.entry import build_parser, main
from llama_index_e2rag.cli.store import load_store
from llama_index_e2rag.schema import NodeKind

from .conftest import EXTRACTION_KINDS, extractions

#: Python advice the command line must not give.
PYTHON_ADVICE = re.compile(r"from_documents|doc_builders|Settings\.|llm=|\(\)")


def _ours(out: str) -> list[str]:
    """Our lines of stdout (llama-index's splitter prints warnings about tiny chunks there)."""
    return [line for line in out.splitlines() if not line.startswith("Metadata length")]


def test_a_flag_on_an_existing_store_adds_its_layer_without_extracting_again(
    llm: ScriptedLLM, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    harbour, mountain = tmp_path / "harbour.txt", tmp_path / "mountain.txt"
    harbour.write_text(HARBOUR, encoding="utf-8")
    mountain.write_text(MOUNTAIN, encoding="utf-8")
    store = tmp_path / "store"
    files = [str(harbour), str(mountain)]
    assert main(["index", *files, "--store", str(store), "--chunk-size", "40", "--quiet"]) == 0
    capsys.readouterr()
    extracted = extractions(llm)
    assert extracted > 0
    before = load_store(store)
    ids = [n.id for n in before.graph_store.nodes()]
    vectors = before.stores.embeddings(ids)
    cache = store / "llm_cache.json"  # without it, extracting again would reach the LLM
    cache.unlink()

    assert main(["index", *files, "--store", str(store), "--chrono", "--quiet"]) == 0
    out = _ours(capsys.readouterr().out)
    assert out[0].startswith("indexed 0 document(s) (2 unchanged, not extracted again) into ")
    assert out[1].startswith("added ChronoRAG's layers to 2 document(s) (")
    assert extractions(llm) == extracted
    after = load_store(store)
    kept = after.stores.embeddings(ids)
    assert kept.keys() == vectors.keys()
    assert all(np.allclose(kept[i], vectors[i], atol=1e-6) for i in vectors)
    for path in (harbour, mountain):
        assert after.graph_store.nodes(NodeKind.FACT, str(path.resolve()))
    assert main(["query", "Who lit the lamp?", "--store", str(store), "--mode", "chrono",
                 "--quiet"]) == 0
    assert "\nEvidence:\n[1] " in capsys.readouterr().out

    # a changed file is extracted again (with the store's layers); the unchanged one is not
    mountain.write_text(MOUNTAIN + " Alice thanked Bob at the summit.", encoding="utf-8")
    cache.unlink(missing_ok=True)
    extracted = extractions(llm)
    assert main(["index", *files, "--store", str(store), "--quiet"]) == 0
    out = _ours(capsys.readouterr().out)
    assert out[0].startswith("indexed 1 document(s) (1 unchanged, not extracted again) into ")
    assert len(out) == 1  # no layer to add
    changed = load_store(store).graph_store
    mountain_chunks = changed.nodes(NodeKind.CHUNK, str(mountain.resolve()))
    extraction_chunks = [c for c in mountain_chunks if c.attrs.get("layer") != 0]
    assert extractions(llm) == extracted + len(EXTRACTION_KINDS) * len(extraction_chunks)
    assert any("summit" in f.text for f in changed.nodes(NodeKind.FACT, str(mountain.resolve())))


LATIN1 = (
    "Noël arriva au café de la gare. Hélène lui offrit une crème brûlée, et ils parlèrent "
    "de l'été passé à Besançon, des forêts, des rivières glacées et du thé très sucré."
)


@pytest.fixture
def latin1(tmp_path: Path) -> Path:
    path = tmp_path / "noel.txt"
    path.write_bytes(LATIN1.encode("latin-1"))
    return path


def test_a_latin1_file_is_refused_in_one_line_naming_the_flag(
    llm: ScriptedLLM, latin1: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert main(["index", str(latin1), "--store", str(store), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"e2rag: error: {latin1} is not UTF-8 text ") and err.count("\n") == 1
    assert "--encoding latin-1" in err and "--encoding auto" in err
    assert not store.exists()
    assert main(["index", str(latin1), "--store", str(store), "--encoding", "klingon"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("e2rag: error: unknown encoding --encoding klingon")
    assert not store.exists()


@pytest.mark.parametrize("encoding", ["latin-1", "auto"])
def test_encoding_reads_the_file_as_its_text(
    llm: ScriptedLLM, latin1: Path, tmp_path: Path, encoding: str
) -> None:
    store = tmp_path / "store"
    assert main(["index", str(latin1), "--store", str(store), "--encoding", encoding,
                 "--quiet"]) == 0
    chunks = load_store(store).stores.get_chunks(
        [n.id for n in load_store(store).graph_store.nodes(NodeKind.CHUNK)]
    )
    assert "".join(c.get_content() for c in chunks).startswith(LATIN1[:60])


def test_utf8_files_pass_auto_detection_unchanged(llm: ScriptedLLM, tmp_path: Path) -> None:
    path = tmp_path / "story.txt"
    path.write_text(STORY + " Café.", encoding="utf-8")
    for encoding, store in (("utf-8", tmp_path / "a"), ("auto", tmp_path / "b")):
        assert main(["index", str(path), "--store", str(store), "--encoding", encoding,
                     "--quiet"]) == 0
    texts = [
        sorted(n.text for n in load_store(tmp_path / name).graph_store.nodes(NodeKind.CHUNK))
        for name in ("a", "b")
    ]
    assert texts[0] == texts[1]


# -- messages say what to run --------------------------------------------------------------------
@pytest.fixture
def plain_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store without layers, then no LLM configured (the CLI's offline set-up)."""
    (tmp_path / "one.txt").write_text(STORY, encoding="utf-8")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(Settings, "_embed_model", HashEmbedding())
    monkeypatch.setattr(Settings, "_llm", ScriptedLLM(names=NAMES))
    store = tmp_path / "store"
    assert main(["index", str(tmp_path / "one.txt"), "--store", str(store), "--quiet"]) == 0
    monkeypatch.setattr(Settings, "_llm", None)
    return store


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["query", "Who?", "--quiet", "--mode", "chrono"], "--chrono"),
        (["query", "Who?", "--quiet", "--mode", "sentence_graph"], "--sentence-graph"),
        (["query", "Who?", "--quiet", "--mode", "event_graph"], "--event-graph"),
        (["timeline", "Harry"], "--event-graph"),
    ],
)
def test_a_missing_layer_names_the_index_command_that_adds_it(
    plain_store: Path, capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    capsys.readouterr()
    assert main([*argv, "--store", str(plain_store)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not PYTHON_ADVICE.search(err)
    assert err.rstrip().endswith(f"e2rag index --store {plain_store} {flag}")


def test_hyde_without_an_llm_says_how_to_configure_one_from_a_shell(
    plain_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    argv = ["query", "Who?", "--store", str(plain_store), "--quiet", "--hyde", "comb_extraction"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "OPENAI_API_KEY" in err and not PYTHON_ADVICE.search(err)


def test_help_texts_show_no_rst_markup(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    texts = [parser.format_help()] + [sub.format_help() for sub in commands.values()]
    assert len(texts) > 5
    assert not any("``" in text or ":func:" in text for text in texts)


def test_index_saves_the_narrative_read_model_of_what_it_wrote(plain_store: Path) -> None:
    from llama_index_e2rag.retrievers import passage_file
    from llama_index_e2rag.retrievers.passage_cache import narrative_state
    from llama_index_e2rag.schema import sort_by_position

    index = load_store(plain_store)
    stores = index.stores
    with stores.reading():
        passages = sort_by_position(stores.graph.nodes(NodeKind.PASSAGE))
        key = passage_file.content_key(stores, stores.version)
        saved = passage_file.read(stores, key, [p.id for p in passages])
        assert saved is not None  # written by `e2rag index`, for the state it committed
        state = narrative_state(stores)
    rebuilt = passage_file.encode(state.table, state.chunk_metadata)
    assert saved == json.loads(json.dumps(rebuilt))  # (tuples are lists in JSON)


def test_index_lets_the_embedding_runtime_go_before_its_read_models(
    plain_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read models are derived from stored vectors, so ``e2rag index`` drops the loaded
    embedding sessions (and their arenas) first rather than carry them through every step."""
    from llama_index_e2rag import embeddings
    from llama_index_e2rag.retrievers import passage_cache

    monkeypatch.setitem(embeddings._RUNTIMES, ("model", "tokenizer", 1), object())
    loaded_at_read_models: list[int] = []
    real = passage_cache.save_read_model
    monkeypatch.setattr(passage_cache, "save_read_model", lambda stores: (
        loaded_at_read_models.append(len(embeddings._RUNTIMES)), real(stores))[1])
    assert main(["index", "--store", str(plain_store), "--chrono", "--quiet"]) == 0
    assert loaded_at_read_models == [0]


@pytest.mark.parametrize(
    ("flag", "mode", "derivation"),
    [("--event-graph", "event_graph", ("event_graph", "_derive")),
     ("--sentence-graph", "sentence_graph", ("sentence_graph_file", "derive"))],
)
def test_index_saves_a_layer_view_only_with_the_layer(
    plain_store: Path, monkeypatch: pytest.MonkeyPatch, flag: str, mode: str,
    derivation: tuple[str, str],
) -> None:
    import importlib

    from llama_index_e2rag.stores.read_model_file import READ_MODELS_DIR

    path = plain_store / "e2rag" / READ_MODELS_DIR / f"{mode}.jsonl"
    assert not path.exists()  # no layer, no derivation
    assert main(["index", "--store", str(plain_store), flag, "--quiet"]) == 0
    assert path.is_file()
    derives = importlib.import_module(f"llama_index_e2rag.retrievers.{derivation[0]}")
    forbid(monkeypatch, derives, derivation[1], f"the {mode} view was derived again")
    view = importlib.import_module(f"llama_index_e2rag.retrievers.{mode}")._VIEW
    got = view.get(load_store(plain_store).stores)  # read: written by the index
    rows = got.events if mode == "event_graph" else got.nodes
    assert len(rows) > 0

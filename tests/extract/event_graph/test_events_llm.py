"""E²GraphRAG's event pass with the scripted LLM: updates refine instead of duplicating, ids are
deterministic, R_event reaches the neighbours' events, waves keep neighbours apart, one ego
network's bad answers cost only its own steps, and the limits bound the calls."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Callable

import pytest
from scripted_llm import ScriptedLLM

from llama_index_e2rag.extract.event_graph import prompts
from llama_index_e2rag.extract.event_graph.events_llm import (
    EgoInput,
    EventPass,
    entity_chunks,
    entity_order,
    extract_events,
    neighbour_sets,
    waves,
)
from llama_index_e2rag.llm.runner import LLMRunner
from llama_index_e2rag.schema import EdgeKind, GraphNode, NodeKind, make_id

DOC = "d1"
KIND = prompts.EVENTGRAPH_UPDATE
TRAIN = "Tom missed the train at dawn."
TRAIN_AGAIN = "Tom missed the train at dawn because the bridge was closed."
ANNA = "Anna waited at the station for hours."
ZED = "Zed sailed across the northern sea alone."


def chunk(i: int, text: str) -> GraphNode:
    start = 1000 * i
    return GraphNode(
        id=f"c{i}",
        kind=NodeKind.CHUNK,
        text=text,
        doc_id=DOC,
        pos=(0, start, 0),
        span=(start, start + len(text)),
        chunk_id=f"c{i}",
    )


def entity(name: str, mentions: int, first: int) -> GraphNode:
    return GraphNode(
        id=f"e-{name}",
        kind=NodeKind.ENTITY,
        text=name,
        doc_id=DOC,
        pos=(0, first, 0),
        name=name,
        attrs={"event_graph": "entity", "mentions": mentions, "aliases": [name]},
    )


def ego(
    entities: list[GraphNode], weights: dict[str, dict[str, int]], chunks: list[GraphNode]
) -> EgoInput:
    return EgoInput(
        doc_id=DOC,
        entities=entities,
        chunk_weights={f"e-{name}": w for name, w in weights.items()},
        chunks={c.id: c for c in chunks},
    )


def run(llm: ScriptedLLM, data: EgoInput, **options: Any) -> EventPass:
    runner = LLMRunner(llm, max_retries=0)
    return asyncio.run(extract_events(runner, prompts.UPDATE_PROMPT, data, **options))


def events(result: EventPass) -> dict[str, GraphNode]:
    return {n.attrs["title"]: n for n in result.nodes if n.kind == NodeKind.GRAPH_EVENT}


def edges_of(result: EventPass, kind: EdgeKind) -> set[tuple[str, str, Any]]:
    return {(e.source, e.target, e.role) for e in result.edges if e.kind == kind}


def answering(answers: Callable[[str], dict[str, Any]]) -> dict[str, Callable[[str], str]]:
    return {KIND: lambda prompt: json.dumps(answers(prompt))}


def tom_story() -> EgoInput:
    """Tom in two chunks telling the same event; Anna shares the first; Zed is alone."""
    chunks = [chunk(0, f"{TRAIN} {ANNA}"), chunk(1, TRAIN_AGAIN), chunk(2, ZED)]
    return ego(
        [entity("Tom", 3, 0), entity("Anna", 1, 30), entity("Zed", 1, 2000)],
        {"Tom": {"c0": 2, "c1": 1}, "Anna": {"c0": 1}, "Zed": {"c2": 1}},
        chunks,
    )


def test_an_update_refines_the_event_instead_of_duplicating_it() -> None:
    data = ego(
        [entity("Tom", 2, 0)], {"Tom": {"c0": 2, "c1": 1}}, [chunk(0, TRAIN), chunk(1, TRAIN_AGAIN)]
    )
    result = run(ScriptedLLM(), data)
    found = events(result)
    assert list(found) == ["Tom missed the train at dawn"]
    event = found["Tom missed the train at dawn"]
    assert event.attrs["description"] == f"{TRAIN} {TRAIN_AGAIN}"
    assert event.attrs["chunks"] == ["c0", "c1"]
    assert event.attrs["updates"] == 1
    assert event.text == f"Tom missed the train at dawn: {TRAIN} {TRAIN_AGAIN}"
    assert (event.chunk_id, event.pos, event.span) == ("c0", (0, 0, 0), (0, len(TRAIN)))
    assert edges_of(result, EdgeKind.GROUNDED_IN) == {
        (event.id, "c0", None),
        (event.id, "c1", None),
    }
    assert edges_of(result, EdgeKind.PARTICIPATES) == {("e-Tom", event.id, "source")}
    assert all(
        e.attrs == {"event_graph": "extracted"}
        for e in result.edges
        if e.kind == EdgeKind.PARTICIPATES
    )
    assert result.failures == [] and result.calls == 2


def test_chunks_are_walked_heaviest_first_and_the_call_lists_the_known_events() -> None:
    data = ego(
        [entity("Tom", 2, 0)], {"Tom": {"c0": 1, "c1": 5}}, [chunk(0, TRAIN), chunk(1, TRAIN_AGAIN)]
    )
    assert [c.id for c in entity_chunks(data, "e-Tom")] == ["c1", "c0"]
    llm = ScriptedLLM()
    run(llm, data)
    first, second = llm.prompts
    assert "Existing Events:\nNONE\nText:\n" + TRAIN_AGAIN in first
    assert f"- Tom missed the train at dawn: {TRAIN_AGAIN}\nText:\n{TRAIN}" in second


def test_new_events_get_deterministic_ids() -> None:
    first, second = run(ScriptedLLM(), tom_story()), run(ScriptedLLM(), tom_story())
    assert [n.model_dump() for n in first.nodes] == [n.model_dump() for n in second.nodes]
    assert [e.model_dump() for e in first.edges] == [e.model_dump() for e in second.edges]
    found = events(first)
    anna = found["Anna waited at the station for"]
    assert anna.id == make_id(DOC, "graph_event", (0, 0, 1), "Anna waited at the station for")
    assert anna.pos == (0, 0, 1)
    assert found["Tom missed the train at dawn"].pos == (0, 0, 0)


def test_a_rebuild_sends_the_same_prompts() -> None:
    first, second = ScriptedLLM(), ScriptedLLM()
    run(first, tom_story())
    run(second, tom_story())
    assert sorted(first.prompts) == sorted(second.prompts)


def test_a_later_entity_lists_its_neighbours_events_not_the_others() -> None:
    llm = ScriptedLLM()
    result = run(llm, tom_story())
    assert result.waves == 2  # Tom and Zed together, then Anna (Tom's neighbour)
    (anna_prompt,) = [p for p in llm.prompts if "Text:\n" + TRAIN in p and "- Tom missed" in p]
    assert "- Anna waited at the station for:" in anna_prompt
    assert "Zed sailed" not in anna_prompt.split("Text:")[0]
    found = events(result)
    anna_event = found["Anna waited at the station for"]
    assert anna_event.attrs["updates"] == 1  # Anna refined the event Tom's walk told
    assert len(found) == 3
    links = edges_of(result, EdgeKind.PARTICIPATES)
    assert {("e-Tom", anna_event.id, None), ("e-Anna", anna_event.id, "source")} <= links
    assert ("e-Anna", found["Tom missed the train at dawn"].id, None) in links


def test_waves_never_put_neighbours_together_and_are_deterministic() -> None:
    names = ["A", "B", "C", "D", "E"]
    nodes = [entity(n, 10 - i, i) for i, n in enumerate(names)]
    pairs = [("A", "B"), ("C", "D"), ("A", "E")]
    neighbours = {f"e-{n}": set() for n in names}
    for a, b in pairs:
        neighbours[f"e-{a}"].add(f"e-{b}")
        neighbours[f"e-{b}"].add(f"e-{a}")
    plan = waves(nodes, neighbours, wave_size=8)
    assert [[e.name for e in wave] for wave in plan] == [["A", "C"], ["B", "D", "E"]]
    assert plan == waves(nodes, neighbours, wave_size=8)
    for wave in plan:
        ids = {e.id for e in wave}
        assert all(not (neighbours[e.id] & ids) for e in wave)
    assert [[e.name for e in w] for w in waves(nodes, neighbours, wave_size=1)] == [
        [n] for n in names
    ]
    with pytest.raises(ValueError):
        waves(nodes, neighbours, wave_size=0)


def test_neighbours_default_to_entities_sharing_a_chunk_and_order_is_by_mentions() -> None:
    data = tom_story()
    assert neighbour_sets(data) == {"e-Tom": {"e-Anna"}, "e-Anna": {"e-Tom"}, "e-Zed": set()}
    tie = ego([entity("Late", 2, 50), entity("Early", 2, 10), entity("Most", 5, 90)], {}, [])
    assert [e.name for e in entity_order(tie)] == ["Most", "Early", "Late"]


def test_a_wave_runs_its_entities_concurrently() -> None:
    data = ego(
        [entity("Tom", 1, 0), entity("Zed", 1, 2000)],
        {"Tom": {"c0": 1}, "Zed": {"c2": 1}},
        [chunk(0, TRAIN), chunk(2, ZED)],
    )
    llm = ScriptedLLM(async_delay=0.05)
    assert run(llm, data).waves == 1
    assert llm.max_in_flight == 2


@pytest.mark.parametrize("marker", ["malformed_marker", "fail_marker"])
def test_one_ego_networks_bad_output_loses_nothing_else(marker: str) -> None:
    intact = run(ScriptedLLM(), tom_story())
    broken = run(ScriptedLLM(**{marker: "Zed sailed"}), tom_story())
    zed = {t for t, n in events(intact).items() if n.chunk_id == "c2"}
    assert zed == {"Zed sailed across the northern sea"}
    assert set(events(broken)) == set(events(intact)) - zed
    kept = [n.model_dump() for n in intact.nodes if n.attrs["title"] not in zed]
    assert [n.model_dump() for n in broken.nodes] == kept
    (failure,) = broken.failures
    assert failure["chunk_id"] == "c2"
    assert failure["reason"].startswith("event_graph update for Zed failed: ")
    error = "LLMOutputError" if marker == "malformed_marker" else "RuntimeError"
    assert error in failure["reason"]
    assert broken.calls == intact.calls == 4


def test_a_failure_reason_is_capped() -> None:
    long = "x" * 2000

    def fail(prompt: str) -> str:
        raise RuntimeError(long)

    data = ego([entity("Tom", 1, 0)], {"Tom": {"c0": 1}}, [chunk(0, TRAIN)])
    (failure,) = run(ScriptedLLM(handlers={KIND: fail}), data).failures
    assert len(failure["reason"]) == 400 and failure["reason"].endswith("...")


def test_cancellation_is_not_a_failure() -> None:
    def cancel(prompt: str) -> str:
        raise asyncio.CancelledError

    data = ego([entity("Tom", 1, 0)], {"Tom": {"c0": 1}}, [chunk(0, TRAIN)])
    with pytest.raises(asyncio.CancelledError):
        run(ScriptedLLM(handlers={KIND: cancel}), data)


def test_an_unknown_original_title_becomes_a_new_event() -> None:
    def answer(prompt: str) -> dict[str, Any]:
        return {
            "updated_events": [
                {
                    "original_title": "Never listed",
                    "title": "The lost event",
                    "description": "Lost.",
                    "date": "1997",
                }
            ],
            "new_events": [],
        }

    data = ego([entity("Tom", 1, 0)], {"Tom": {"c0": 1}}, [chunk(0, TRAIN)])
    result = run(ScriptedLLM(handlers=answering(answer)), data)
    (event,) = result.nodes
    assert event.attrs["title"] == "The lost event"
    assert (event.attrs["description"], event.attrs["date"], event.attrs["updates"]) == (
        "Lost.",
        "1997",
        0,
    )
    assert event.attrs["source"] == "Tom"


def test_an_update_sets_the_new_title_and_date_and_keeps_the_first_title_in_the_id() -> None:
    def answer(prompt: str) -> dict[str, Any]:
        if "Existing Events:\nNONE\n" in prompt:
            return {
                "new_events": [
                    {"title": "Missed train", "description": "Tom missed it.", "source": ""}
                ]
            }
        return {
            "updated_events": [
                {
                    "original_title": "missed  TRAIN!",
                    "title": "Tom misses the dawn train",
                    "description": "Tom missed it; the bridge was closed.",
                    "date": "2001-05-03",
                }
            ]
        }

    data = ego(
        [entity("Tom", 2, 0)], {"Tom": {"c0": 2, "c1": 1}}, [chunk(0, TRAIN), chunk(1, TRAIN_AGAIN)]
    )
    (event,) = run(ScriptedLLM(handlers=answering(answer)), data).nodes
    assert event.name == event.attrs["title"] == "Tom misses the dawn train"
    assert event.attrs["date"] == "2001-05-03"
    assert event.attrs["description"] == "Tom missed it; the bridge was closed."
    assert event.id == make_id(DOC, "graph_event", (0, 0, 0), "Missed train")


def test_a_source_naming_another_entity_links_it_as_source() -> None:
    def answer(prompt: str) -> dict[str, Any]:
        return {
            "new_events": [
                {"title": "The warning", "description": "Anna warned Tom.", "source": "anna"}
            ]
        }

    data = ego([entity("Tom", 2, 0), entity("Anna", 0, 5)], {"Tom": {"c0": 1}}, [chunk(0, TRAIN)])
    result = run(ScriptedLLM(handlers=answering(answer)), data)
    (event,) = result.nodes
    assert event.attrs["source"] == "anna"
    assert edges_of(result, EdgeKind.PARTICIPATES) == {
        ("e-Tom", event.id, None),
        ("e-Anna", event.id, "source"),
    }


def test_descriptions_are_capped_keeping_the_newest_words() -> None:
    def answer(prompt: str) -> dict[str, Any]:
        return {"new_events": [{"title": "Long", "description": "one two three four five"}]}

    data = ego([entity("Tom", 1, 0)], {"Tom": {"c0": 1}}, [chunk(0, TRAIN)])
    (event,) = run(ScriptedLLM(handlers=answering(answer)), data, max_description_words=2).nodes
    assert event.attrs["description"] == "four five"


def test_min_mentions_and_max_chunks_per_entity_limit_calls() -> None:
    llm = ScriptedLLM()
    run(llm, tom_story())
    assert llm.calls_by_kind[KIND] == 4
    llm = ScriptedLLM()
    run(llm, tom_story(), min_mentions=2)
    assert llm.calls_by_kind[KIND] == 2  # only Tom has two mentions or more
    llm = ScriptedLLM()
    result = run(llm, tom_story(), max_chunks_per_entity=1)
    assert llm.calls_by_kind[KIND] == 3 and result.calls == 3
    assert "Tom missed the train at dawn because" not in " ".join(llm.prompts)


def test_wave_mates_updating_one_event_keep_both_additions() -> None:
    """A and B are not neighbours but share C's event; B's update, based on the description
    before A's, adds its own text after A's instead of replacing it."""

    def answer(prompt: str) -> dict[str, Any]:
        listed = re.search(r"^- Meeting: (.*)$", prompt, re.MULTILINE)
        word = prompt.rsplit("Text:\n", 1)[1].split()[0]
        if listed is None:
            return {"new_events": [{"title": "Meeting", "description": "Base."}]}
        update = {"original_title": "Meeting", "description": f"{listed.group(1)} {word}"}
        return {"updated_events": [update]}

    data = ego(
        [entity("C", 5, 0), entity("A", 2, 10), entity("B", 2, 1010)],
        {"C": {"c0": 2, "c1": 1}, "A": {"c0": 1}, "B": {"c1": 1}},
        [chunk(0, "Alpha met here."), chunk(1, "Beta met here.")],
    )
    result = run(ScriptedLLM(handlers=answering(answer)), data)
    assert result.waves == 2
    (event,) = result.nodes
    assert event.attrs["description"] == "Base. Beta Alpha Beta"
    assert event.attrs["updates"] == 3 and event.attrs["chunks"] == ["c0", "c1"]


def test_a_call_lists_at_most_the_cap_own_events_first_then_the_nearest() -> None:
    """Tom tells one event per chunk; Anna, his neighbour, walks later. With a cap of 2, Tom's
    fifth call lists his two events nearest to that chunk; Anna's lists the two nearest to hers
    (she has none of her own): Tom's last clue and the reading Tom's own walk told there."""
    colours = ["red", "blue", "green", "brown", "white"]
    texts = [f"Tom found the {colour} clue near the old mill." for colour in colours]
    chunks = [chunk(i, text) for i, text in enumerate(texts)]
    chunks.append(chunk(5, "Anna and Tom read every clue again."))
    data = ego(
        [entity("Tom", 6, 0), entity("Anna", 1, 5000)],
        {"Tom": {c.id: 6 - i for i, c in enumerate(chunks)}, "Anna": {"c5": 1}},
        chunks,
    )
    llm = ScriptedLLM(names=["Tom", "Anna"])
    run(llm, data, max_listed_events=2, wave_size=1)

    def listed(prompt: str) -> list[str]:
        block = prompt.split("Existing Events:\n")[1].split("\nText:\n")[0]
        lines = [] if block == "NONE" else block.splitlines()
        found = [re.search(r"the (\w+) clue", line) for line in lines]
        return [m.group(1) if m else "reading" for m in found]

    by_text = {p.split("\nText:\n")[1].split("\n")[0]: listed(p) for p in llm.prompts}
    assert all(len(found) <= 2 for found in by_text.values())
    assert by_text[texts[4]] == ["green", "brown"]  # Tom's own nearest chunk 4, story order
    assert by_text["Anna and Tom read every clue again."] == ["white", "reading"]

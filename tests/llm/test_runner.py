"""LLMRunner: JSON parsing and repair, retries, concurrency, the persistent cache, accounting."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter

import pytest
from llama_index.core import Settings
from pydantic import BaseModel
from scripted_llm import ScriptedLLM

from llama_index_e2rag.llm import runner as llm_module
from llama_index_e2rag.errors import LLMOutputError, LLMTimeoutError
from llama_index_e2rag.extract.prompts import (
    ENTITY_EXTRACTION_PROMPT,
    EVENT_EXTRACTION_PROMPT,
    HYPOTHETICAL_ANSWER_PROMPT,
    QUERY_CUE_PROMPT,
    EntityExtraction,
    EventExtraction,
    QueryCues,
)
from llama_index_e2rag.llm.runner import (
    LLMRunner,
    OutputParseError,
    ResponseCache,
    count_tokens,
    parse_json_output,
    parse_with_repair,
    resolve_llm,
)

TEXT = "Harry caught the Snitch on Saturday. Snape glared at Harry from the stands."


def entities(runner: LLMRunner, text: str = TEXT) -> EntityExtraction:
    return runner.structured(
        ENTITY_EXTRACTION_PROMPT, EntityExtraction, kind="entity_extraction", text=text
    )


# -- parsing ------------------------------------------------------------------------------------


def test_parse_tolerates_prose_fences_and_bare_lists():
    fenced = 'Sure!\n```json\n{"entities": [{"name": "Harry"}]}\n```\nAnything else?'
    assert parse_json_output(fenced, EntityExtraction).entities[0].name == "Harry"
    prose = 'The answer is {"events": [{"title": "Match", "participants": "Harry, Snape"}]} ok'
    event = parse_json_output(prose, EventExtraction).events[0]
    assert event.participants == ["Harry", "Snape"] and event.date is None
    bare = '[{"name": "Ron", "type": "Person", "description": null}]'
    assert parse_json_output(bare, EntityExtraction).entities[0].description == ""


def test_parse_skips_json_that_does_not_fit_and_reports_why():
    text = 'Schema: {"type": "object"} Answer: {"entities": [{"name": "Ron"}]}'
    assert parse_json_output(text, EntityExtraction).entities[0].name == "Ron"
    with pytest.raises(OutputParseError, match="no JSON"):
        parse_json_output("I could not find any entities.", EntityExtraction)

    class Strict(BaseModel):
        count: int

    with pytest.raises(OutputParseError, match="does not match Strict"):
        parse_json_output('{"count": "many"}', Strict)


def test_malformed_then_fixed_answer_succeeds_with_two_calls():
    llm = ScriptedLLM(malformed_marker="Snitch", malformed_times=1)
    runner = LLMRunner(llm)
    result = entities(runner)
    assert [e.name for e in result.entities] == llm.names_in(TEXT) == ["Harry", "Snitch", "Snape"]
    assert runner.stats.calls == 2 and runner.stats.repairs == 1
    assert llm.calls_by_kind == {"entity_extraction": 1, "json_repair": 1}
    repair_prompt = llm.prompts[1]
    assert "unterminated" in repair_prompt  # the bad answer is shown back
    assert "no JSON" in repair_prompt or "does not match" in repair_prompt  # with the error
    assert TEXT in repair_prompt  # and the original task


def test_fenced_answers_with_prose_need_no_repair():
    llm = ScriptedLLM(fenced=True)
    runner = LLMRunner(llm)
    assert [e.name for e in entities(runner).entities] == llm.names_in(TEXT)
    assert runner.stats.calls == 1 and runner.stats.repairs == 0


def test_malformed_twice_raises_llm_output_error():
    llm = ScriptedLLM(malformed_marker="Snitch")
    runner = LLMRunner(llm)
    with pytest.raises(LLMOutputError, match="EntityExtraction"):
        entities(runner)
    assert runner.stats.calls == 2 and runner.stats.failures == 1


async def test_parse_with_repair_asks_once_and_names_what_failed():
    asked: list[str] = []

    async def ask(prompt: str) -> str:
        asked.append(prompt)
        return '{"entities": [{"name": "Ron"}]}'

    parsed, text = await parse_with_repair(
        '{"entities": [', EntityExtraction, prompt="ORIGINAL", ask=ask, what="entity_extraction"
    )
    assert [e.name for e in parsed.entities] == ["Ron"]
    assert len(asked) == 1 and "ORIGINAL" in asked[0] and '{"entities": [' in asked[0]
    assert text == '{"entities": [{"name": "Ron"}]}'  # the answer that parsed, for caching

    fine, same = await parse_with_repair(
        '{"entities": []}', EntityExtraction, prompt="P", ask=ask, what="x"
    )
    assert fine.entities == [] and same == '{"entities": []}' and len(asked) == 1

    async def still_bad(prompt: str) -> str:
        return "no idea"

    with pytest.raises(LLMOutputError, match="event_extraction answer could not be parsed"):
        await parse_with_repair(
            "?", EventExtraction, prompt="P", ask=still_bad, what="event_extraction"
        )


def test_cache_and_parser_modules_are_the_ones_llm_reexports():
    from llama_index_e2rag.llm import cache as llm_cache
    from llama_index_e2rag.llm import parsing as llm_parsing

    assert llm_module.ResponseCache is llm_cache.ResponseCache
    assert llm_module.parse_json_output is llm_parsing.parse_json_output
    assert llm_module.parse_with_repair is llm_parsing.parse_with_repair


# -- retries and concurrency --------------------------------------------------------------------


def test_exceptions_are_retried_with_exponential_backoff(monkeypatch):
    delays: list[float] = []

    async def record_sleep(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr(llm_module.asyncio, "sleep", record_sleep)
    llm = ScriptedLLM(fail_marker="Snitch", fail_times=3)
    runner = LLMRunner(llm, max_retries=3, backoff=0.01)
    assert entities(runner).entities
    assert delays == pytest.approx([0.01, 0.02, 0.04])
    assert runner.stats.retries == 3 and runner.stats.calls == 4 and runner.stats.failures == 0


def test_retries_exhausted_reraise_the_last_error():
    llm = ScriptedLLM(fail_marker="Snitch")
    runner = LLMRunner(llm, max_retries=2, backoff=0.0)
    with pytest.raises(RuntimeError, match="scripted failure"):
        entities(runner)
    assert runner.stats.calls == 3 and runner.stats.failures == 1


async def test_concurrency_is_bounded_by_num_workers():
    llm = ScriptedLLM(async_delay=0.02)
    runner = LLMRunner(llm, num_workers=3)
    texts = [f"Harry met Ron number {i} at the gate." for i in range(12)]
    results = await asyncio.gather(
        *[
            runner.astructured(
                ENTITY_EXTRACTION_PROMPT, EntityExtraction, kind="entity_extraction", text=t
            )
            for t in texts
        ]
    )
    assert len(results) == 12 and runner.stats.calls == 12
    assert llm.max_in_flight == 3


async def test_slot_is_released_when_a_call_fails():
    llm = ScriptedLLM(fail_marker="BROKEN")
    runner = LLMRunner(llm, num_workers=1, max_retries=0)
    with pytest.raises(RuntimeError):
        await runner.astructured(
            ENTITY_EXTRACTION_PROMPT, EntityExtraction, kind="entity_extraction", text="BROKEN"
        )
    result = await asyncio.wait_for(
        runner.astructured(
            ENTITY_EXTRACTION_PROMPT, EntityExtraction, kind="entity_extraction", text=TEXT
        ),
        timeout=5,
    )
    assert result.entities


def test_one_runner_serves_several_event_loops():
    llm = ScriptedLLM(async_delay=0.005)
    runner = LLMRunner(llm, num_workers=1)

    async def burst(tag: str) -> list[EntityExtraction]:
        return await asyncio.gather(
            *[
                runner.astructured(
                    ENTITY_EXTRACTION_PROMPT,
                    EntityExtraction,
                    kind="entity_extraction",
                    text=f"{tag} Harry met Ron {i} times.",
                )
                for i in range(3)
            ]
        )

    # contended semaphores in two different loops (a bound asyncio.Semaphore would raise)
    assert len(asyncio.run(burst("first"))) == len(asyncio.run(burst("second"))) == 3
    assert llm.max_in_flight == 1 and runner.stats.calls == 6 and runner.stats.retries == 0


class _ParkingLoop(asyncio.SelectorEventLoop):
    """A loop that, once closed, parks the first thread that asks whether it is closed: it waits
    until ``resume`` is set, or a second has passed (a runner that serialises its table of loops
    makes the other thread wait for this one, so nobody sets ``resume``)."""

    def __init__(self, park_thread: str) -> None:
        super().__init__()
        self.park_thread = park_thread
        self.parked = threading.Event()
        self.resume = threading.Event()

    def is_closed(self) -> bool:
        closed = super().is_closed()
        if closed and threading.current_thread().name == self.park_thread:
            if not self.parked.is_set():
                self.parked.set()
                self.resume.wait(timeout=1.0)
        return closed


def test_threads_registering_their_loops_at_once_keep_one_semaphore_per_loop(monkeypatch):
    """Thread A registers its loop while thread B registers its own: neither may drop the
    other's semaphore, or B's next call would get a fresh one and run beside the first."""
    created: Counter = Counter()

    class RecordingSemaphore(asyncio.Semaphore):
        def __init__(self, value: int = 1) -> None:
            super().__init__(value)
            created[id(asyncio.get_running_loop())] += 1

    monkeypatch.setattr(llm_module.asyncio, "Semaphore", RecordingSemaphore)
    runner = LLMRunner(ScriptedLLM(), num_workers=1)
    stale = _ParkingLoop(park_thread="A")  # a finished loop the runner still knows
    stale.run_until_complete(runner.acomplete("stale {x}", kind="t", x=0))
    stale.close()
    loops: dict[str, asyncio.AbstractEventLoop] = {}
    a_done = threading.Event()

    def thread_a() -> None:
        loop = loops["A"] = asyncio.new_event_loop()
        try:
            loop.run_until_complete(runner.acomplete("A {x}", kind="t", x=1))
        finally:
            a_done.set()
            loop.close()

    def thread_b() -> None:
        assert stale.parked.wait(timeout=5)  # A is registering its loop right now
        loop = loops["B"] = asyncio.new_event_loop()
        try:
            loop.run_until_complete(runner.acomplete("B {x}", kind="t", x=1))
            stale.resume.set()
            assert a_done.wait(timeout=5)
            loop.run_until_complete(runner.acomplete("B {x}", kind="t", x=2))
        finally:
            loop.close()

    threads = [threading.Thread(target=thread_a, name="A"), threading.Thread(target=thread_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert runner.stats.calls == 4 and runner.stats.failures == 0
    assert created[id(loops["A"])] == 1
    assert created[id(loops["B"])] == 1  # B's second call waited on B's one semaphore


def test_invalid_settings_are_rejected():
    with pytest.raises(ValueError, match="num_workers"):
        LLMRunner(ScriptedLLM(), num_workers=0)
    with pytest.raises(ValueError):
        LLMRunner(ScriptedLLM(), backoff=-1)
    with pytest.raises(ValueError, match="timeout"):
        LLMRunner(ScriptedLLM(), timeout=0)


# -- timeouts -----------------------------------------------------------------------------------
# A hung LLM sleeps 30 s (ScriptedLLM.hang_seconds) against a 0.2 s timeout: a runner that did
# not enforce it would make these tests take minutes, not fail quietly.


async def test_a_hung_async_call_times_out_and_the_retry_answers():
    llm = ScriptedLLM(hang_marker="Snitch", hang_times=1)
    runner = LLMRunner(llm, timeout=0.2, backoff=0.0)
    result = await runner.astructured(
        ENTITY_EXTRACTION_PROMPT, EntityExtraction, kind="entity_extraction", text=TEXT
    )
    assert [e.name for e in result.entities] == llm.names_in(TEXT)
    assert llm.hung_calls == 1
    stats = runner.stats
    assert (stats.timeouts, stats.retries, stats.calls, stats.failures) == (1, 1, 2, 0)


def test_a_hung_blocking_call_is_abandoned_and_reported_after_the_retries():
    llm = ScriptedLLM(hang_marker="glared")  # TEXT's second sentence, not the prompt's examples
    runner = LLMRunner(llm, timeout=0.2, max_retries=1, backoff=0.0, num_workers=1)
    try:
        expected = r"timed out after 0\.2 s \(attempt 2 of 2"
        with pytest.raises(LLMTimeoutError, match=expected) as err:
            entities(runner)  # the sync method: the LLM's blocking complete() never returns
        assert isinstance(err.value, TimeoutError)
        assert llm.hung_calls == 2
        assert runner.stats.as_dict()["timeouts"] == 2 and runner.stats.failures == 1
        # the abandoned threads hold no concurrency slot: the one slot serves the next call
        assert [e.name for e in entities(runner, "Ron met Harry.").entities] == ["Ron", "Harry"]
    finally:
        llm.release()


def test_no_timeout_waits_for_a_slow_llm():
    llm = ScriptedLLM(hang_marker="Snitch", hang_seconds=0.3)
    runner = LLMRunner(llm, timeout=None)
    assert entities(runner).entities and runner.stats.timeouts == 0 and llm.hung_calls == 1


def test_the_llms_own_timeout_error_is_not_taken_for_the_runners():
    def provider_timeout(prompt: str) -> str:
        raise TimeoutError("read timeout from the provider")

    llm = ScriptedLLM(handlers={"entity_extraction": provider_timeout})
    runner = LLMRunner(llm, timeout=5.0, max_retries=0)
    with pytest.raises(TimeoutError, match="provider") as err:
        entities(runner)
    assert not isinstance(err.value, LLMTimeoutError) and runner.stats.timeouts == 0


def test_a_hung_function_call_is_a_timeout_not_an_output_error():
    llm = ScriptedLLM(function_calling=True, hang_marker="Snitch")
    runner = LLMRunner(llm, timeout=0.2, max_retries=0)
    try:
        with pytest.raises(LLMTimeoutError, match="timed out after 0.2 s"):
            entities(runner)
    finally:
        llm.release()
    assert runner.stats.timeouts == 1 and llm.hung_calls == 1


# -- bounded parsing through the runner ----------------------------------------------------------


def test_a_deeply_nested_answer_takes_the_repair_round_then_is_an_output_error():
    deep = "[" * 5_000
    fixed = ScriptedLLM(malformed_marker="Snitch", malformed_times=1, malformed_text=deep)
    runner = LLMRunner(fixed)
    assert [e.name for e in entities(runner).entities] == fixed.names_in(TEXT)
    assert fixed.calls_by_kind == {"entity_extraction": 1, "json_repair": 1}
    assert "levels deep" in fixed.prompts[1]  # the repair prompt says what was wrong

    broken = ScriptedLLM(malformed_marker="Snitch", malformed_text=deep)
    runner = LLMRunner(broken)
    with pytest.raises(LLMOutputError, match="even after one repair round.*levels deep"):
        entities(runner)
    assert runner.stats.repairs == 1 and runner.stats.failures == 1


def test_a_deeply_nested_tool_call_is_an_output_error():
    llm = ScriptedLLM(function_calling=True, malformed_marker="Snitch", malformed_text="[" * 5_000)
    runner = LLMRunner(llm, max_retries=0)
    with pytest.raises(LLMOutputError, match="function call"):
        entities(runner)


# -- cache --------------------------------------------------------------------------------------


def test_second_run_makes_no_calls_and_a_new_runner_reloads_the_cache(tmp_path):
    path = tmp_path / "cache" / "llm.json"
    llm = ScriptedLLM()
    runner = LLMRunner(llm, cache=str(path))
    first = [entities(runner, f"Harry met Ron {i} times.") for i in range(3)]
    assert llm.calls_by_kind["entity_extraction"] == 3
    again = [entities(runner, f"Harry met Ron {i} times.") for i in range(3)]
    assert again == first and sum(llm.calls_by_kind.values()) == 3
    assert runner.stats.cache_hits == 3

    # No flush: the journal alone must carry the answers (an interrupted build).
    fresh_llm = ScriptedLLM()
    reloaded = LLMRunner(fresh_llm, cache=ResponseCache(path))
    assert [entities(reloaded, f"Harry met Ron {i} times.") for i in range(3)] == first
    assert fresh_llm.prompts == [] and reloaded.stats.cache_hits == 3

    reloaded.flush()
    assert path.exists() and not ResponseCache(path).journal_path.exists()
    assert json.loads(path.read_text())["version"] == 1
    assert len(ResponseCache(path)) == 3


def test_interrupted_build_resumes_with_calls_only_for_unfinished_prompts(tmp_path):
    path = tmp_path / "llm.json"
    texts = ["Harry flew over the lake.", "Ron lost his rat Scabbers.", "BROKEN Hermione read."]
    crashing = LLMRunner(ScriptedLLM(fail_marker="BROKEN"), cache=path, max_retries=0)
    for text in texts:
        try:
            entities(crashing, text)
        except RuntimeError:
            pass
    assert crashing.stats.failures == 1

    llm = ScriptedLLM()
    resumed = LLMRunner(llm, cache=path)
    for text in texts:
        entities(resumed, text)
    assert len(llm.prompts) == 1 and "BROKEN" in llm.prompts[0]
    assert resumed.stats.cache_hits == 2


def test_cache_survives_a_torn_journal_line_and_compacts(tmp_path):
    path = tmp_path / "llm.json"
    cache = ResponseCache(path, compact_every=2)
    cache.put("a", "1")
    assert cache.journal_path.exists() and not path.exists()
    cache.put("b", "2")  # compaction: snapshot written, journal dropped
    assert path.exists() and not cache.journal_path.exists()
    cache.put("c", "3")
    with open(cache.journal_path, "a", encoding="utf-8") as journal:
        journal.write('{"k": "d", "v"')  # interrupted mid-write
    reloaded = ResponseCache(path)
    assert {k: reloaded.get(k) for k in "abcd"} == {"a": "1", "b": "2", "c": "3", "d": None}


@pytest.mark.parametrize(
    "name, text",
    [
        ("llm.json", "my own notes, not JSON\n"),
        ("llm.json", '{"version": 99, "entries": {}}'),
        ("llm.json", '["a", "list"]'),
        ("llm.json.journal", "my journal\nof days\n"),
        ("llm.json.journal", '{"k": "a", "v": "1"}\nnot a record\n{"k": "b", "v": "2"}\n'),
    ],
)
def test_cache_refuses_a_file_it_cannot_read_and_leaves_it_as_it_was(tmp_path, name, text):
    """A file under the cache's names that is not ours is never rewritten (nor dropped)."""
    from llama_index_e2rag.errors import E2RAGError

    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(E2RAGError, match="not an LLM answer cache"):
        ResponseCache(tmp_path / "llm.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert (tmp_path / name).read_text(encoding="utf-8") == text


def test_cache_key_depends_on_model_kind_and_prompt():
    base = ResponseCache.make_key("m", "k", "p")
    assert base == ResponseCache.make_key("m", "k", "p")
    others = {
        ResponseCache.make_key(*args)
        for args in [("m2", "k", "p"), ("m", "k2", "p"), ("m", "k", "p2")]
    }
    assert len(others | {base}) == 4


def test_complete_returns_text_and_is_cached(tmp_path):
    llm = ScriptedLLM(hypothetical_text="Quirrell jinxed the broom.")
    runner = LLMRunner(llm, cache=tmp_path / "c.json")
    for _ in range(2):
        answer = runner.complete(
            HYPOTHETICAL_ANSWER_PROMPT, kind="hypothetical_answer", query="Who jinxed it?"
        )
        assert answer == "Quirrell jinxed the broom."
    assert llm.calls_by_kind == {"hypothetical_answer": 1} and runner.stats.cache_hits == 1


def test_query_cues_and_hypothetical_answers_come_from_the_query():
    llm = ScriptedLLM(hypothetical_text="Snape brewed it.")
    runner = LLMRunner(llm)
    cues = runner.structured(
        QUERY_CUE_PROMPT, QueryCues, kind="query_cues",
        query="Why did Hermione Granger steal from Snape's stores?",
    )
    assert cues.entities == ["Hermione Granger", "Snape"]
    assert cues.events == ["steal stores"]
    assert runner.complete(HYPOTHETICAL_ANSWER_PROMPT, kind="hypothetical_answer", query="?") == (
        "Snape brewed it."
    )


# -- accounting ---------------------------------------------------------------------------------


def test_token_counting_is_offline_cl100k():
    # cl100k_base: "hello world" is 2 tokens; the fallback estimate would say 4.
    assert count_tokens("hello world") == 2


def test_accounting_uses_reported_usage_when_present():
    llm = ScriptedLLM(report_usage=True)
    runner = LLMRunner(llm)
    entities(runner)
    runner.structured(EVENT_EXTRACTION_PROMPT, EventExtraction, kind="event_extraction", text=TEXT)
    stats = runner.stats.as_dict()
    assert stats["prompt_tokens"] == llm.usage["prompt_tokens"] > 0
    assert stats["completion_tokens"] == llm.usage["completion_tokens"] > 0
    assert stats["calls"] == 2
    assert stats["calls_by_kind"] == {"entity_extraction": 1, "event_extraction": 1}


def test_accounting_counts_tokens_when_usage_is_missing():
    llm = ScriptedLLM()
    runner = LLMRunner(llm)
    result = entities(runner)
    assert runner.stats.prompt_tokens == count_tokens(llm.prompts[0])
    assert runner.stats.completion_tokens == count_tokens(
        json.dumps({"entities": [e.model_dump() for e in result.entities]})
    )


# -- function calling ---------------------------------------------------------------------------


async def test_function_calling_models_go_through_structured_predict():
    llm = ScriptedLLM(function_calling=True)
    runner = LLMRunner(llm)
    assert runner.function_calling
    sync_result = entities(runner)
    async_result = await runner.astructured(
        EVENT_EXTRACTION_PROMPT, EventExtraction, kind="event_extraction", text=TEXT
    )
    assert [e.name for e in sync_result.entities] == llm.names_in(TEXT)
    assert [e.description for e in async_result.events] == [
        e["description"] for e in llm.events_of(TEXT)
    ]
    assert llm.calls_by_kind == {"entity_extraction": 1, "event_extraction": 1}
    assert runner.stats.prompt_tokens > 0 and runner.stats.completion_tokens > 0


def test_function_calling_bad_tool_call_is_retried_then_reported():
    flaky = LLMRunner(
        ScriptedLLM(function_calling=True, malformed_marker="Snitch", malformed_times=1),
        backoff=0.0,
    )
    assert entities(flaky).entities and flaky.stats.retries == 1
    broken = LLMRunner(
        ScriptedLLM(function_calling=True, malformed_marker="Snitch"), max_retries=1, backoff=0.0
    )
    with pytest.raises(LLMOutputError, match="function call"):
        entities(broken)


# -- resolve_llm --------------------------------------------------------------------------------


def test_resolve_llm_order(monkeypatch):
    explicit = ScriptedLLM()
    monkeypatch.setattr(Settings, "_llm", None)
    assert resolve_llm(explicit) is explicit
    assert resolve_llm() is None  # no Settings, no key: no LLM (and no OpenAI default built)

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    from llama_index.llms.openai import OpenAI

    default = resolve_llm()
    assert isinstance(default, OpenAI) and default.model == "gpt-4o-mini"

    user = ScriptedLLM()
    monkeypatch.setattr(Settings, "_llm", user)
    assert resolve_llm() is user
    Settings.llm = None  # llama-index's "no LLM" (a MockLLM) beats the API key
    assert resolve_llm() is None

"""``E2RAGIndex.as_chat_engine()``: llama-index's chat engines over our retrievers, and one that
needs no LLM.

With an LLM the chat engine is llama-index's own (``condense_plus_context`` by default, as in
``BaseIndex.as_chat_engine``) over ``as_retriever(mode=…)``. Without one, llama-index's engines
cannot run (each condenses or answers with an LLM, and its default is OpenAI), so
``ExtractiveChatEngine`` answers every message with the index's offline query engine (the
extractive answer: evidence sentences with their positions and sources) and keeps the history.
It does not rewrite a follow-up question from the history: that rewriting is an LLM's job.
"""

from __future__ import annotations

import inspect
from typing import Any, AsyncGenerator, Callable, Generator, List, Optional

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
from llama_index.core.base.response.schema import RESPONSE_TYPE
from llama_index.core.chat_engine import (
    CondensePlusContextChatEngine,
    CondenseQuestionChatEngine,
    ContextChatEngine,
    SimpleChatEngine,
)
from llama_index.core.chat_engine.types import (
    AgentChatResponse,
    BaseChatEngine,
    ChatMode,
    StreamingAgentChatResponse,
)
from llama_index.core.tools import ToolOutput

from llama_index_e2rag.errors import MissingModelError

#: chat mode -> (llama-index engine class, what it is built over)
LLM_CHAT_ENGINES: dict[ChatMode, tuple[type, str]] = {
    ChatMode.BEST: (CondensePlusContextChatEngine, "retriever"),
    ChatMode.CONDENSE_PLUS_CONTEXT: (CondensePlusContextChatEngine, "retriever"),
    ChatMode.CONTEXT: (ContextChatEngine, "retriever"),
    ChatMode.CONDENSE_QUESTION: (CondenseQuestionChatEngine, "query_engine"),
    ChatMode.SIMPLE: (SimpleChatEngine, ""),
}


#: Chat engine arguments the offline chat honours (the rest configure an LLM's part).
_OFFLINE_CHAT_ARGS = frozenset({"chat_history", "node_postprocessors", "verbose"})


def chat_engine_args(engine_cls: type) -> frozenset[str]:
    """The keyword arguments ``engine_cls.from_defaults`` takes (read from its signature)."""
    params = inspect.signature(engine_cls.from_defaults).parameters
    return frozenset(
        name for name, p in params.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ) - {"retriever", "query_engine", "llm"}


def chat_mode_of(chat_mode: Any) -> ChatMode:
    """``chat_mode`` as a ``ChatMode``, refused in one line when we do not build it."""
    try:
        mode = ChatMode(chat_mode)
    except ValueError:
        mode = None
    if mode not in LLM_CHAT_ENGINES:
        raise ValueError(
            f"unknown chat_mode {chat_mode!r}; choose one of "
            f"{', '.join(m.value for m in LLM_CHAT_ENGINES)}"
        )
    return mode


class ExtractiveChatEngine(BaseChatEngine):
    """A chat engine without an LLM: each message is answered by ``query_engine`` (the offline
    extractive answer), and the exchange is kept in ``chat_history``."""

    def __init__(
        self, query_engine: BaseQueryEngine, chat_history: Optional[List[ChatMessage]] = None
    ) -> None:
        self._query_engine = query_engine
        self._history: List[ChatMessage] = list(chat_history or [])

    @property
    def chat_history(self) -> List[ChatMessage]:
        return list(self._history)

    def reset(self) -> None:
        self._history = []

    def _record(self, message: str, response: RESPONSE_TYPE) -> tuple[str, AgentChatResponse]:
        text = str(response)
        self._history += [
            ChatMessage(role=MessageRole.USER, content=message),
            ChatMessage(role=MessageRole.ASSISTANT, content=text),
        ]
        source = ToolOutput(
            tool_name="query_engine",
            content=text,
            raw_input={"query": message},
            raw_output=response,
        )
        reply = AgentChatResponse(
            response=text, sources=[source], source_nodes=list(response.source_nodes)
        )
        return text, reply

    def chat(
        self, message: str, chat_history: Optional[List[ChatMessage]] = None
    ) -> AgentChatResponse:
        self._use(chat_history)
        return self._record(message, self._query_engine.query(message))[1]

    async def achat(
        self, message: str, chat_history: Optional[List[ChatMessage]] = None
    ) -> AgentChatResponse:
        self._use(chat_history)
        return self._record(message, await self._query_engine.aquery(message))[1]

    def stream_chat(
        self, message: str, chat_history: Optional[List[ChatMessage]] = None
    ) -> StreamingAgentChatResponse:
        """The answer is complete at once (nothing generates it token by token); it streams as
        one delta so code written for streaming chat engines works unchanged."""
        reply = self.chat(message, chat_history)
        return StreamingAgentChatResponse(
            chat_stream=_once(reply.response),
            sources=reply.sources,
            source_nodes=reply.source_nodes,
            is_writing_to_memory=False,
        )

    async def astream_chat(
        self, message: str, chat_history: Optional[List[ChatMessage]] = None
    ) -> StreamingAgentChatResponse:
        reply = await self.achat(message, chat_history)
        return StreamingAgentChatResponse(
            achat_stream=_aonce(reply.response),
            sources=reply.sources,
            source_nodes=reply.source_nodes,
            is_writing_to_memory=False,
        )

    def _use(self, chat_history: Optional[List[ChatMessage]]) -> None:
        if chat_history is not None:  # llama-index's convention: a given history replaces ours
            self._history = list(chat_history)


def _delta(text: str) -> ChatResponse:
    return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=text)


def _once(text: str) -> Generator[ChatResponse, None, None]:
    yield _delta(text)


async def _aonce(text: str) -> AsyncGenerator[ChatResponse, None]:
    yield _delta(text)


def build_chat_engine(
    chat_mode: Any,
    llm: Any,
    retriever: Callable[[dict[str, Any]], Any],
    query_engine: Callable[[dict[str, Any]], BaseQueryEngine],
    kwargs: dict[str, Any],
) -> BaseChatEngine:
    """The chat engine of ``chat_mode``; ``retriever(kw)`` / ``query_engine(kw)`` build ours from
    the arguments left after the chat engine took its own (``system_prompt``, ``memory`` …)."""
    mode = chat_mode_of(chat_mode)
    if llm is None:
        history = kwargs.pop("chat_history", None)
        engine_cls = LLM_CHAT_ENGINES[mode][0]
        needing = sorted(
            k for k in kwargs if k in chat_engine_args(engine_cls) - _OFFLINE_CHAT_ARGS
        )
        if needing:
            raise MissingModelError(
                f"{', '.join(needing)} shape{'s' if len(needing) == 1 else ''} what a chat LLM "
                "does, and no LLM is configured: pass llm=... (or set Settings.llm), or leave "
                f"{'it' if len(needing) == 1 else 'them'} out for the offline extractive chat"
            )
        return ExtractiveChatEngine(query_engine(kwargs), chat_history=history)
    engine_cls, over = LLM_CHAT_ENGINES[mode]
    own = chat_engine_args(engine_cls)
    chat_kwargs = {k: v for k, v in kwargs.items() if k in own}
    rest = {k: v for k, v in kwargs.items() if k not in own or k == "verbose"}
    if over == "retriever":
        chat_kwargs["retriever"] = retriever(rest)
    elif over == "query_engine":
        chat_kwargs["query_engine"] = query_engine(rest)
    elif rest:
        raise TypeError(f"chat_mode='simple' takes no {', '.join(sorted(rest))}")
    return engine_cls.from_defaults(llm=llm, **chat_kwargs)

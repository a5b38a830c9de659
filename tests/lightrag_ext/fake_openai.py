"""A local OpenAI-compatible endpoint answered by the offline fakes, for real server processes.

LightRAG's server only talks to models over HTTP, so its tests point ``LLM_BINDING_HOST`` and
``EMBEDDING_BINDING_HOST`` here. Chat requests are mapped back to LightRAG's call shape (system
prompt, history, last user message = prompt) and answered by ``ScriptedLightRAGLLM``, which records
every call by kind; embeddings are the deterministic ``hash_vector``. The server runs in a
background thread of the test process, so tests read the very recorder that answered.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections import Counter
from typing import Any, AsyncIterator, Literal, Optional, Union

import numpy as np
import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from hash_embedding import hash_vector
from pydantic import BaseModel

from lightrag_fakes import EMBED_DIM, ScriptedLightRAGLLM

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 10.0


class Message(BaseModel):
    role: str
    content: str


class ChatRequest(BaseModel):
    model: str
    messages: list[Message]
    stream: bool = False


class EmbeddingRequest(BaseModel):
    model: str
    input: Union[str, list[str]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Optional[int] = None


class FakeOpenAI:
    """``/v1/chat/completions`` (plain and SSE) and ``/v1/embeddings`` on 127.0.0.1, any port.

    Use as a context manager; ``base_url`` is what ``*_BINDING_HOST`` should be.
    """

    def __init__(self, llm: ScriptedLightRAGLLM, dim: int = EMBED_DIM) -> None:
        self.llm = llm
        self.dim = dim
        #: Requests by transport: "chat", "chat_stream", "embeddings".
        self.requests: Counter[str] = Counter()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(self._app(), log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def calls_by_kind(self) -> Counter[str]:
        """Chat calls by the scripted LLM's prompt kind (e.g. "lightrag_extract",
        "event_extraction"), so tests can tell which prompts the server sent."""
        return Counter(self.llm.kinds())

    def __enter__(self) -> "FakeOpenAI":
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._sock.close()
                raise RuntimeError("the fake OpenAI server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(_STOP_TIMEOUT)
        self._sock.close()

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: ChatRequest) -> Any:
            self.requests["chat_stream" if request.stream else "chat"] += 1
            *context, last = request.messages
            system = context[0].content if context and context[0].role == "system" else None
            history = [m.model_dump() for m in context[1 if system is not None else 0 :]]
            answer = await self.llm(
                last.content, system_prompt=system, history_messages=history, stream=request.stream
            )
            if request.stream:
                return StreamingResponse(
                    _sse(request.model, answer), media_type="text/event-stream"
                )
            assert isinstance(answer, str)
            prompt_tokens = sum(len(m.content.split()) for m in request.messages)
            return _completion(request.model, answer, prompt_tokens)

        @app.post("/v1/embeddings")
        async def embeddings(request: EmbeddingRequest) -> dict[str, Any]:
            self.requests["embeddings"] += 1
            texts = [request.input] if isinstance(request.input, str) else request.input
            dim = request.dimensions or self.dim
            data = []
            for i, text in enumerate(texts):
                vector = hash_vector(text, dim)
                encoded: Any = vector
                if request.encoding_format == "base64":
                    encoded = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
                data.append({"object": "embedding", "index": i, "embedding": encoded})
            tokens = sum(len(t.split()) for t in texts)
            return {
                "object": "list",
                "data": data,
                "model": request.model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }

        return app


def _completion(model: str, text: str, prompt_tokens: int) -> dict[str, Any]:
    completion_tokens = len(text.split())
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


async def _sse(model: str, answer: str | AsyncIterator[str]) -> AsyncIterator[str]:
    """The answer as ``chat.completion.chunk`` events, a closing chunk and ``[DONE]``."""

    def event(delta: dict[str, str], finish: Optional[str]) -> str:
        chunk = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(chunk)}\n\n"

    yield event({"role": "assistant", "content": ""}, None)
    async for piece in _pieces_of(answer):
        yield event({"content": piece}, None)
    yield event({}, "stop")
    yield "data: [DONE]\n\n"


async def _pieces_of(answer: str | AsyncIterator[str]) -> AsyncIterator[str]:
    """A streamed answer as it comes; one that is not (e.g. keywords) as a single piece."""
    if isinstance(answer, str):
        yield answer
        return
    async for piece in answer:
        yield piece

"""``e2rag serve`` (run the HTTP API of ``server.py`` with uvicorn) and ``e2rag query --server``
(ask it). The server binds its socket itself, so a port in use is one clear error line and
``--port 0`` picks a free port, which the first line printed names."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path
from typing import Any

from llama_index_e2rag.app.query import QueryOptions
from llama_index_e2rag.cli.store import load_store
from llama_index_e2rag.errors import E2RAGError

#: ``e2rag serve``'s port unless ``--port`` is given.
DEFAULT_PORT = 8765
#: Seconds ``e2rag query --server`` waits for an answer (an LLM answer may take a while).
ASK_TIMEOUT = 300.0


def add_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = commands.add_parser(
        "serve", help="keep a store loaded and answer queries over HTTP (OpenAPI page at /docs)"
    )
    parser.add_argument("--store", required=True, type=Path, help="the store folder to serve")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only)",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0 picks a free one"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no request log")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return serve(args.store, args.host, args.port, quiet=args.quiet)


def serve(store: Path, host: str, port: int, quiet: bool = False) -> int:
    """Load ``store`` once, then answer HTTP requests on ``host:port`` until Ctrl-C."""
    import uvicorn  # deferred: the [serve] extra, only for this command

    from llama_index_e2rag.app.server import create_app  # deferred: pydantic, FastAPI

    sock = _listen(host, port)
    try:
        app = create_app(load_store(store, progress=not quiet), str(store))
        bound = sock.getsockname()[1]
        base = f"http://{host if ':' not in host else f'[{host}]'}:{bound}"
        print(f"serving {store} at {base} (API page: {base}/docs); Ctrl-C stops it", flush=True)
        config = uvicorn.Config(app, log_level="warning" if quiet else "info")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (requests wait in its backlog until the app
    runs)."""
    if not 0 <= port <= 65535:
        raise E2RAGError(f"--port must be between 0 and 65535, got {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise E2RAGError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); pass another --port "
            "(0 picks a free one) or --host"
        ) from exc
    return sock


def ask_server(url: str, options: QueryOptions) -> dict[str, Any]:
    """``POST url/query``: the answer and sources as ``app.query.run_query`` returns them."""
    import httpx  # deferred: only for --server

    payload = {
        "query": options.question,
        "mode": options.mode,
        "hyde": options.hyde,
        "top_k": options.top_k,
        "budget_words": options.budget_words,
    }
    try:
        response = httpx.post(f"{url.rstrip('/')}/query", json=payload, timeout=ASK_TIMEOUT)
    except httpx.HTTPError as exc:
        raise E2RAGError(
            f"cannot reach an e2rag server at {url} ({_one_line(exc)}); start one with: "
            "e2rag serve --store DIR"
        ) from exc
    if response.status_code != 200:
        status = response.status_code
        raise E2RAGError(f"the server at {url} answered {status}: {_detail(response)}")
    try:
        return response.json()
    except ValueError as exc:
        raise E2RAGError(f"{url} did not answer as an e2rag server (no JSON)") from exc


def _detail(response: Any) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = None
    if isinstance(detail, list):  # FastAPI's validation errors
        detail = "; ".join(
            f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg')}" for d in detail
        )
    return _one_line(detail if detail is not None else response.text or response.reason_phrase)


def _one_line(value: object) -> str:
    return " ".join(str(value).split()) or type(value).__name__

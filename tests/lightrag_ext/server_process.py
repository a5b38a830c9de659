"""Run a real LightRAG server process (the stock one or ours) against a local fake endpoint.

The server is started as a subprocess from a fresh directory holding a minimal ``.env`` (its
``check_env_file()`` wants one), with a hermetic environment: only the variables below plus a few
OS basics, so a developer's shell (``LLM_MODEL``, ``LIGHTRAG_*``, proxies) cannot change what a
test runs. Readiness is ``GET /health`` within ``READY_TIMEOUT``; teardown is SIGTERM, then
SIGKILL, to the process group the server was started in.

Offline, the server needs tiktoken's BPE files (its default tokenizer is ``gpt-4o-mini``, i.e.
o200k_base, and OpenAI embedding truncation falls back to cl100k_base), which tiktoken would
download at start-up. Run as a script, this module fills the git-ignored ``.cache/tiktoken`` with
our ``e2rag-lightrag-tiktoken`` (``lightrag_ext.tiktoken_files``) from litellm's wheel, which
ships both files (``scripts/test.sh`` does so)::

    python tests/lightrag_ext/server_process.py [--wheel litellm-1.109.1-....whl]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, TypeVar

import httpx
import pytest

from lightrag_ext.tiktoken_files import complete, fill_from

REPO = Path(__file__).resolve().parents[2]
TIKTOKEN_CACHE = REPO / ".cache" / "tiktoken"


def console_script(entry: str) -> tuple[str, ...]:
    """What pip's ``e2rag-lightrag-<entry>`` script runs (``lightrag_ext.commands.<entry>``,
    under that name), from this checkout whether or not it is installed."""
    code = (
        f"import sys; sys.argv[0] = 'e2rag-lightrag-{entry}'; "
        f"from lightrag_ext.commands import {entry}; sys.exit({entry}())"
    )
    return (sys.executable, "-c", code)


#: The stock server; ours (``e2rag-lightrag-server``) takes the same flags and ``.env``.
STOCK_SERVER: tuple[str, ...] = (sys.executable, "-m", "lightrag.api.lightrag_server")
E2RAG_SERVER = console_script("server")
BACKFILL = console_script("backfill")
BACKFILL_TIMEOUT = 120.0
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
REQUEST_TIMEOUT = 30.0
PIPELINE_TIMEOUT = 60.0
POLL_INTERVAL = 0.1
_PORT_TRIES = 3
_PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV")
_DONE = frozenset({"processed", "failed"})

T = TypeVar("T")


# -- tiktoken's BPE files --------------------------------------------------------------------------
def require_tiktoken_cache() -> Path:
    """A directory holding both BPE files (``$TIKTOKEN_CACHE_DIR``, else ``.cache/tiktoken``).

    Without one the server dies at start-up trying to download them, so tests skip; under CI
    (``CI`` set) they fail instead, since CI runs ``scripts/test.sh``, which fills the cache.
    """
    given = os.environ.get("TIKTOKEN_CACHE_DIR")
    for directory in ([Path(given)] if given else []) + [TIKTOKEN_CACHE]:
        if complete(directory):
            return directory
    reason = (
        f"tiktoken BPE files missing from {TIKTOKEN_CACHE} "
        "(fill it with `python tests/lightrag_ext/server_process.py`, as scripts/test.sh does)"
    )
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def fill_tiktoken_cache(wheel: Optional[Path] = None) -> Path:
    """Extract the BPE files from litellm's wheel (``pip download``-ed unless given)."""
    fill_from(TIKTOKEN_CACHE, wheel=wheel, download=wheel is None)
    return TIKTOKEN_CACHE


# -- the server process ---------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _poll(check: Callable[[], Optional[T]], timeout: float, what: Callable[[], str]) -> T:
    """``check()`` every ``POLL_INTERVAL`` until it returns something; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / POLL_INTERVAL) + 1):
        result = check()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            break
        time.sleep(POLL_INTERVAL)
    pytest.fail(f"{what()} (waited {timeout:.0f} s)")


class ServerProcess:
    """One server command, its directories and environment; ``client`` talks to it over HTTP.

    ``restart()`` stops it and starts the same command on the same working and input dirs (on a
    fresh port), so a test can check what survives a restart.
    """

    def __init__(
        self,
        command: Sequence[str],
        env: dict[str, str],
        run_dir: Path,
        working_dir: Path,
        input_dir: Path,
    ) -> None:
        self.command = list(command)
        self.env = env
        self.run_dir = run_dir
        self.working_dir = working_dir
        self.input_dir = input_dir
        self.port = 0
        self._process: Optional[subprocess.Popen[bytes]] = None
        self._client: Optional[httpx.Client] = None
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / ".env").write_text(
            "# The test environment comes from tests/lightrag_ext/server_process.py.\n"
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def client(self) -> httpx.Client:
        assert self._client is not None, "the server is not running"
        return self._client

    @property
    def stderr_path(self) -> Path:
        return self.run_dir / "stderr.log"

    def stderr_tail(self, lines: int = 40) -> str:
        if not self.stderr_path.exists():
            return ""
        text = self.stderr_path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def start(self) -> None:
        """Start on a free port and wait for ``/health``; retry if another process took the port."""
        for _ in range(_PORT_TRIES):
            self.port = _free_port()
            self._spawn()
            if self._wait_ready():
                self._client = httpx.Client(
                    base_url=self.url, timeout=REQUEST_TIMEOUT, trust_env=False
                )
                return
            tail = self.stderr_tail()
            self.stop()
            if "address already in use" not in tail.lower():
                break
        pytest.fail(
            f"server {' '.join(self.command)} did not become ready on {self.url} within "
            f"{READY_TIMEOUT:.0f} s\n--- stderr tail ({self.stderr_path}) ---\n{tail}"
        )

    def stop(self) -> Optional[int]:
        """SIGTERM the server's process group, SIGKILL it if still there; the exit code."""
        if self._client is not None:
            self._client.close()
            self._client = None
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            self._signal(process, signal.SIGTERM)
            try:
                return process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._signal(process, signal.SIGKILL)
        return process.wait(STOP_TIMEOUT)

    def restart(self) -> None:
        self.stop()
        self.start()

    def _spawn(self) -> None:
        env = dict(self.env, PORT=str(self.port))
        with open(self.run_dir / "stdout.log", "ab") as out, open(self.stderr_path, "ab") as err:
            self._process = subprocess.Popen(
                self.command,
                cwd=self.run_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own process group: teardown reaches any children
            )

    def _wait_ready(self) -> bool:
        process = self._process
        assert process is not None
        deadline = time.monotonic() + READY_TIMEOUT
        with httpx.Client(base_url=self.url, timeout=2.0, trust_env=False) as probe:
            for _ in range(int(READY_TIMEOUT / POLL_INTERVAL) + 1):
                if process.poll() is not None or time.monotonic() > deadline:
                    return False
                try:
                    if probe.get("/health").status_code == 200:
                        return True
                except httpx.TransportError:
                    pass
                time.sleep(POLL_INTERVAL)
        return False

    @staticmethod
    def _signal(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass


def server_env(
    *,
    endpoint: str,
    embedding_dim: int,
    working_dir: Path,
    input_dir: Path,
    tiktoken_dir: Path,
) -> dict[str, str]:
    """What the server reads from its environment to run offline on the fake endpoint
    (``PORT`` is added at each start)."""
    env = {key: os.environ[key] for key in _PASSED_THROUGH if key in os.environ}
    env.update(
        PYTHONPATH=str(REPO),  # our packages import from the checkout, installed or not
        HOST="127.0.0.1",
        WORKING_DIR=str(working_dir),
        INPUT_DIR=str(input_dir),
        LLM_BINDING="openai",
        LLM_BINDING_HOST=endpoint,
        LLM_BINDING_API_KEY="fake",
        LLM_MODEL="fake-llm",
        EMBEDDING_BINDING="openai",
        EMBEDDING_BINDING_HOST=endpoint,
        EMBEDDING_BINDING_API_KEY="fake",
        EMBEDDING_MODEL="fake-embedding",
        EMBEDDING_DIM=str(embedding_dim),
        TIKTOKEN_CACHE_DIR=str(tiktoken_dir),
        HF_HUB_OFFLINE="1",  # as in every test: no model hub
    )
    return env


class ServerFactory:
    """Starts server commands under ``root`` on one fake endpoint; ``stop_all()`` at teardown."""

    def __init__(self, root: Path, endpoint: str, embedding_dim: int, tiktoken_dir: Path) -> None:
        self.root = root
        self.endpoint = endpoint
        self.embedding_dim = embedding_dim
        self.tiktoken_dir = tiktoken_dir
        self.servers: list[ServerProcess] = []

    def __call__(
        self,
        command: Sequence[str] = STOCK_SERVER,
        *,
        working_dir: Optional[Path] = None,
        input_dir: Optional[Path] = None,
        env: Optional[dict[str, str]] = None,
    ) -> ServerProcess:
        """Start ``command`` and wait until it is ready.

        ``working_dir``/``input_dir`` default to fresh folders; pass an earlier server's to start
        another command on its data. ``env`` adds or overrides variables (e.g. ``MAX_GLEANING``).
        """
        n = len(self.servers)
        working_dir = working_dir or self.root / f"rag-{n}"
        input_dir = input_dir or self.root / f"inputs-{n}"
        environment = server_env(
            endpoint=self.endpoint,
            embedding_dim=self.embedding_dim,
            working_dir=working_dir,
            input_dir=input_dir,
            tiktoken_dir=self.tiktoken_dir,
        )
        environment.update(env or {})
        server = ServerProcess(
            command, environment, self.root / f"server-{n}", working_dir, input_dir
        )
        self.servers.append(server)
        server.start()
        return server

    def stop_all(self) -> None:
        for server in self.servers:
            server.stop()


def run_with_configuration(
    server: "ServerProcess", command: Sequence[str]
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` to its end with a server's configuration (its directory and environment,
    on a port of its own), as a deployer runs it beside or after that server."""
    return subprocess.run(
        command,
        cwd=server.run_dir,
        env=dict(server.env, PORT=str(_free_port())),
        capture_output=True,
        text=True,
        timeout=BACKFILL_TIMEOUT,
    )


def run_backfill(server: "ServerProcess") -> subprocess.CompletedProcess[str]:
    """``e2rag-lightrag-backfill`` with a server's configuration."""
    return run_with_configuration(server, BACKFILL)


# -- documents over HTTP --------------------------------------------------------------------------
def pipeline_idle(server: ServerProcess) -> Optional[dict[str, Any]]:
    """The pipeline status if nothing is running or queued, else None."""
    status = server.client.get("/documents/pipeline_status").raise_for_status().json()
    busy = status["busy"] or status["scanning"] or status["pending_enqueues"]
    return None if busy else status


def insert_text(
    server: ServerProcess,
    text: str,
    file_source: str,
    *,
    chunking: Optional[dict[str, Any]] = None,
    timeout: float = PIPELINE_TIMEOUT,
) -> dict[str, Any]:
    """``POST /documents/text``, then wait until its documents are processed or failed and the
    pipeline is idle; the final ``/documents/track_status`` answer."""
    body: dict[str, Any] = {"text": text, "file_source": file_source}
    if chunking is not None:
        body["chunking"] = chunking
    response = server.client.post("/documents/text", json=body).raise_for_status().json()
    assert response["status"] == "success", response
    track_id = response["track_id"]
    last: dict[str, Any] = {}

    def done() -> Optional[dict[str, Any]]:
        last.update(server.client.get(f"/documents/track_status/{track_id}").json())
        docs = last.get("documents") or []
        finished = docs and all(d["status"] in _DONE for d in docs)
        return dict(last) if finished and pipeline_idle(server) else None

    return _poll(
        done,
        timeout,
        lambda: (
            f"{file_source!r} was not processed; last track status: {last}\n"
            f"--- stderr tail ---\n{server.stderr_tail()}"
        ),
    )


def documents(server: ServerProcess) -> list[dict[str, Any]]:
    """Every document the server lists (``POST /documents/paginated``, at most 200)."""
    page = server.client.post("/documents/paginated", json={"page_size": 200})
    return page.raise_for_status().json()["documents"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Fill .cache/tiktoken from litellm's wheel.")
    parser.add_argument("--wheel", type=Path, help="an already downloaded litellm wheel")
    print(fill_tiktoken_cache(parser.parse_args().wheel))

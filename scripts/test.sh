#!/usr/bin/env bash
# The test command of README.md: installs what the tests need on a fresh machine, then runs them.
# PostgreSQL (Debian's server) is needed by the postgres-marked tests; everything else is PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

bash .ci/postgres.sh install
bash .ci/chromium.sh install  # Debian's chromium for the story page's browser tests
python -m pip install -q -e ".[test]"
# LightRAG's server downloads tiktoken's BPE files at start-up; its tests read them from the
# git-ignored .cache/tiktoken, filled here from litellm's wheel (a no-op once filled).
python tests/lightrag_ext/server_process.py
# LightRAG's own test suite runs against E2LightRAG (tests/lightrag_ext/test_rag_upstream_suite.py) from
# the pinned, sha256-checked lightrag-hku sdist, pip-downloaded here into the git-ignored
# .cache/lightrag-sdist (a no-op once there).
python tests/lightrag_ext/lightrag_upstream.py
# Two workers (pytest-xdist): the suite is mostly subprocesses and parsing, and CI has 2 cores.
exec python -m pytest -q -n 2 --durations=25 "$@"

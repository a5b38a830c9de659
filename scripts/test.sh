#!/usr/bin/env bash
# The test command of README.md: installs what the tests need on a fresh machine, then runs them.
# PostgreSQL (Debian's server) is needed by the postgres-marked tests; everything else is PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

bash .ci/postgres.sh install
python -m pip install -q -e ".[test]"
exec python -m pytest -q "$@"

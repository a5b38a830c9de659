#!/usr/bin/env bash
# The test command of README.md: installs what the tests need on a fresh machine, then runs them.
# PostgreSQL (Debian's server) is needed by the LightRAG storage tests; everything else is PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "PostgreSQL server binaries missing and not root: the postgres tests will skip" >&2
  fi
fi

python -m pip install -q -e ".[test]"
exec python -m pytest -q "$@"

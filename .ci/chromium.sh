#!/usr/bin/env bash
# Debian's Chromium for the browser tests of the story page (tests/visualize/test_render_browser.py).
#
#   .ci/chromium.sh install    install Debian's chromium if /usr/bin/chromium is missing
#                              (as root; otherwise it says so and exits 0)
#
# playwright (the `test` extra) drives this binary through `executable_path`, so no browser
# is downloaded from playwright's CDN. Idempotent: a no-op once the binary is there.
set -euo pipefail

CHROMIUM="${E2RAG_CHROMIUM:-/usr/bin/chromium}"

cmd="${1:-}"
case "$cmd" in
  install)
    if [[ -x "$CHROMIUM" ]]; then
      echo "chromium.sh: found $CHROMIUM"
      exit 0
    fi
    if [[ "$(id -u)" != "0" ]]; then
      # not fatal: without a browser the browser tests skip (and fail under CI=true)
      echo "chromium.sh: $CHROMIUM missing and not root: the browser tests will skip" >&2
      exit 0
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    echo "chromium.sh: installed Debian's chromium"
    ;;
  *)
    echo "usage: $0 install" >&2
    exit 64
    ;;
esac

#!/usr/bin/env bash
# Install everything and run the whole test suite: lint, unit tests, every notebook (nbval), the browser test.
# Usage (from the repository root):  bash tests/run.sh      (extra arguments go to pytest)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ]; then
  [ -d .venv ] || python3 -m venv .venv
  # shellcheck disable=SC1091
  . .venv/bin/activate
fi
python install.py -q   # the torch build for this machine (kept when present), then requirements.txt
export HF_HUB_OFFLINE=1 INFERLAB_MODEL=bundled   # CI and this suite run on the bundled model, no network
ruff check .
python -m inferlab.tools.notebook_tools check
# Two workers: a notebook (its cells share one kernel) or a test file stays on one worker. INFERLAB_TEST_WORKERS=0
# runs everything in this process, in order.
python -m pytest -n "${INFERLAB_TEST_WORKERS:-2}" --dist loadfile "$@"

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
# One process by default: on 2 cores two workers made the timing cells 4x slower (05's cache comparison 212 s
# against 49 s alone) and the whole run longer. INFERLAB_TEST_WORKERS=N runs N workers (a notebook, whose cells
# share one kernel, or a test file stays on one worker), for machines with cores to spare.
python -m pytest -n "${INFERLAB_TEST_WORKERS:-0}" --dist loadfile "$@"

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
# The torch build for this machine (kept when present), then requirements-dev.txt. --no-compile: pip byte-compiles
# every file it installs (about a minute on 2 cores, most of it for modules nothing imports); Python compiles a module
# the first time it is imported instead, and keeps it, which needs bytecode writing allowed:
unset PYTHONDONTWRITEBYTECODE
python install.py -q --no-compile --dev   # requirements-dev.txt: the course and the suite's extras
export HF_HUB_OFFLINE=1 INFERLAB_MODEL=bundled   # CI and this suite run on the bundled model, no network
# The notebooks' test scale (inferlab/scale.py): the same cells with smaller sizes. nbval compares the checked cells
# with the stored outputs, which are full-scale: the checked cells say the same at both scales.
export INFERLAB_SCALE=test
ruff check .
python -m inferlab.tools.notebook_tools check
# Workers: one per core, at most 4 (INFERLAB_TEST_WORKERS=N overrides; 0 = one process), each with its share of
# the cores as torch threads. Threads must not outnumber cores: two workers of two threads each on 2 cores made the
# timing cells 4x slower; two workers of one thread each took the suite from 16 to 10 minutes. A notebook (its
# cells share one kernel) or a test file stays on one worker. The order is the conftest's (--no-loadscope-reorder;
# xdist would sort files by their number of tests, which put the two browser files, a few tests each and 80 s each,
# last, and one worker then ran its browser file for half a minute after the other had finished): the English
# notebooks, then the Chinese (each finds what its twin measured or compiled), then the browser files, then the other
# files, whose short ones fill in at the end.
# Only the timing cells' numbers change with the thread count, and no test reads them.
cores=$(python -c "import os; print(len(os.sched_getaffinity(0)))")
workers=${INFERLAB_TEST_WORKERS:-$(( cores < 4 ? cores : 4 ))}
[ "$workers" -gt 1 ] || workers=0
threads=$(( workers > 0 ? cores / workers : cores ))
export OMP_NUM_THREADS=$(( threads > 0 ? threads : 1 )) MKL_NUM_THREADS=$(( threads > 0 ? threads : 1 ))
echo "pytest: $([ "$workers" -gt 0 ] && echo "$workers workers" || echo "one process"), $OMP_NUM_THREADS torch thread(s) each, $cores cores"
echo "run.sh: installed, linted and checked in ${SECONDS} s; pytest next (it prints its own time last)"
python -m pytest -n "$workers" --dist loadfile --no-loadscope-reorder "$@"

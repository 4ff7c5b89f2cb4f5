"""Command-line tools for contributors and teachers; none of them is part of the course's reading path.

``python -m inferlab.tools.notebook_tools execute|check`` runs the notebooks and stores them executed, or
checks that every stored notebook is executed and fresh; ``python -m inferlab.tools.export_html`` writes
the offline HTML edition; ``python -m inferlab.tools.download gpt2 --out models/gpt2`` fetches a checkpoint
once for machines with no network; ``python -m inferlab.tools.bench`` measures this machine's decode speed;
``python -m inferlab.tools.gpu_check`` runs the GPU checks on a CUDA machine (and says so and exits 0 elsewhere).
"""

import argparse
import sys


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` that answers a bad value with the one line that matters (the option, the value,
    the range, the fix) and a pointer to ``--help``, not with the whole usage block first."""

    def error(self, message: str):
        sys.stderr.write(f"{self.prog}: error: {message} (usage: {self.prog} --help)\n")
        raise SystemExit(2)

"""Where the course's files live: the repository, its bundled model and its notebooks."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUNDLED_DIR = REPO / "data" / "models" / "tiny-gpt2-shakespeare"  # the bundled tiny GPT-2 (and GPT-2's tokenizer)

"""Where the course's files live: the repository, its bundled model, its notebooks and its held-out text."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUNDLED_DIR = REPO / "data" / "models" / "tiny-gpt2-bilingual"  # the bundled tiny GPT-2 (and GPT-2's tokenizer)
HELDOUT_PATH = REPO / "data" / "heldout_excerpt.txt"  # text the bundled model never trained on


def heldout_text() -> str:
    """Antony's funeral speech, *Julius Caesar* III.2 (Project Gutenberg text, public domain).

    The bundled model's training left *Julius Caesar* and *Twelfth Night* out, so this is unseen text.
    """
    return HELDOUT_PATH.read_text(encoding="utf-8")

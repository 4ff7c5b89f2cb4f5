"""Download a GPT-2-family checkpoint once, into a folder you can copy to machines with no network.

    python -m inferlab.download gpt2 --out models/gpt2            # needs a network, once
    INFERLAB_MODEL=models/gpt2 HF_HUB_OFFLINE=1 jupyter lab        # anywhere, offline

Only safetensors weights, the config, the generation config and the tokenizer files are fetched
(no pickle files). The folder is then checked by loading it offline.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PATTERNS = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
            "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json", "README.md"]


def download(name: str, out: Path, revision: str | None = None) -> Path:
    """Fetch ``name`` from the Hugging Face Hub into ``out`` and return the folder."""
    from huggingface_hub import snapshot_download

    out.mkdir(parents=True, exist_ok=True)
    snapshot_download(repo_id=name, revision=revision, local_dir=str(out), allow_patterns=PATTERNS)
    return out


def verify(folder: Path) -> str:
    """Load the folder with the hub forced offline; returns the model's one-line description."""
    import os

    os.environ["HF_HUB_OFFLINE"] = "1"
    from .models import load

    m = load(str(folder), verbose=False)
    return repr(m.info)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name", help="hub name: gpt2, distilgpt2, gpt2-medium, gpt2-large, gpt2-xl")
    ap.add_argument("--out", type=Path, required=True, help="folder to write (copy it to the class machines)")
    ap.add_argument("--revision", default=None, help="a commit hash or tag to pin (default: main)")
    args = ap.parse_args(argv)
    folder = download(args.name, args.out, args.revision)
    print(f"downloaded {args.name} to {folder}")
    print("checked offline:", verify(folder))
    print(f"use it with: INFERLAB_MODEL={folder.resolve()} HF_HUB_OFFLINE=1 jupyter lab")
    return 0


if __name__ == "__main__":
    sys.exit(main())

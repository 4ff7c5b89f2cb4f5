"""Download a GPT-2-family checkpoint once, into a folder you can copy to machines with no network.

    python -m inferlab.tools.download gpt2 --out models/gpt2       # needs a network, once
    INFERLAB_MODEL=models/gpt2 HF_HUB_OFFLINE=1 jupyter lab         # anywhere, offline

Only safetensors weights, the config, the generation config and the tokenizer files are fetched
(no pickle files). The folder is then checked by loading it offline. The files go to a temporary
folder beside ``--out`` that is renamed to ``--out`` only once the model loads, so a failed or
interrupted download ends with one line saying why, exit status 1, and no folder left behind.
``--out`` must not exist yet (or be an empty folder): an existing model is never overwritten.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from ..errors import one_line
from . import Parser

PATTERNS = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
            "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json", "README.md"]


class DownloadError(RuntimeError):
    """A download that cannot start or did not finish; the message is one line with the fix."""


def check_out(out: Path) -> Path:
    """Refuse an ``--out`` that holds anything; returns its nearest existing folder (where the download goes)."""
    if out.is_dir() and any(out.iterdir()):
        raise DownloadError(f"--out {out}: the folder exists and is not empty. "
                            "Fix: choose a new folder, or delete this one first.")
    for folder in (out, *out.parents):
        if folder.exists() and not folder.is_dir():
            raise DownloadError(f"--out {out}: {folder} is a file, not a folder. Fix: choose a new folder name.")
        if folder.exists():
            return folder
    return Path.cwd()


def _fetch(name: str, into: Path, revision: str | None) -> None:
    """``snapshot_download`` with the hub's errors turned into one-line ``DownloadError``s."""
    from huggingface_hub import errors, snapshot_download

    from ..hub import HUB_PROBE_SECONDS, hub_address, hub_reachable

    where = f"could not download {name!r}"
    if os.environ.get("HF_HUB_OFFLINE", "").upper() in {"1", "ON", "YES", "TRUE"}:
        raise DownloadError(f"{where}: HF_HUB_OFFLINE is set, so the Hugging Face Hub is not contacted. "
                            "Fix: run this without HF_HUB_OFFLINE on a machine with a network, then copy --out here.")
    if not hub_reachable():
        raise DownloadError(f"{where}: the Hugging Face Hub ({hub_address()[0]}) is not reachable from this machine "
                            f"within {HUB_PROBE_SECONDS:g} s. Fix: run this once where there is a network "
                            "(or set HTTPS_PROXY), then copy the --out folder to this machine.")
    try:
        snapshot_download(repo_id=name, revision=revision, local_dir=str(into), allow_patterns=PATTERNS)
    except errors.HFValidationError:
        raise DownloadError(f"{where}: not a valid Hub name. Fix: use a name such as gpt2 or distilgpt2.") from None
    except errors.GatedRepoError:
        raise DownloadError(f"{where}: the model is gated on the Hub. Fix: use an open GPT-2 checkpoint "
                            "such as gpt2.") from None
    except errors.RepositoryNotFoundError:
        raise DownloadError(f"{where}: no such model on the Hub. Fix: use gpt2, distilgpt2, gpt2-medium, "
                            "gpt2-large or gpt2-xl.") from None
    except errors.RevisionNotFoundError:
        raise DownloadError(f"{where}: revision {revision!r} does not exist. Fix: pass a commit hash or tag "
                            "of that model, or leave --revision out.") from None
    except (errors.LocalEntryNotFoundError, OSError) as e:
        raise DownloadError(f"{where}: the download broke off ({type(e).__name__}). Fix: check the network "
                            "and run the same command again.") from None


def verify(folder: Path) -> str:
    """Load the folder with the hub forced offline; returns the model's one-line description."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from ..models import load

    m = load(str(folder), verbose=False)
    return repr(m.info)


def download(name: str, out: Path, revision: str | None = None) -> str:
    """Fetch ``name`` into ``out``, check that it loads offline, and return the model's description.

    Raises ``DownloadError`` (nothing written) when ``out`` is taken, the hub is unreachable, the name
    is unknown, or the files do not load as a GPT-2 model.
    """
    typed = out
    existing = check_out(Path(out))
    out = Path(out).absolute()
    if not (isinstance(name, str) and name.strip()):
        raise DownloadError(f"name={name!r}: expected a Hub name such as gpt2.")
    try:  # before the network is asked anything: a read-only or full disk is found at once
        tmp = Path(tempfile.mkdtemp(dir=existing, prefix=f".{out.name}.partial-"))
    except OSError as e:
        raise DownloadError(f"--out {typed}: cannot write in {existing.resolve()} ({e.strerror or e}). "
                            "Fix: choose a folder you can write to.") from None
    try:
        _fetch(name, tmp, revision)
        try:
            described = verify(tmp)
        except (ValueError, TypeError, OSError) as e:
            raise DownloadError(f"downloaded {name!r} but it does not load as a GPT-2 model: "
                                f"{one_line(e, named=False)}") from None
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            if out.is_dir():
                out.rmdir()  # check_out allowed it only when empty
            os.replace(tmp, out)
        except OSError as e:
            raise DownloadError(f"--out {out}: the download is complete but cannot be moved there "
                                f"({e.strerror or e}); nothing was kept. "
                                "Fix: choose a folder you can write to.") from None
        return described.replace(str(tmp), str(out))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m inferlab.tools.download", description=__doc__.split("\n")[0])
    ap.add_argument("name", help="hub name: gpt2, distilgpt2, gpt2-medium, gpt2-large, gpt2-xl")
    ap.add_argument("--out", type=Path, required=True, help="a new folder to write (copy it to the class machines)")
    ap.add_argument("--revision", default=None, help="a commit hash or tag to pin (default: main)")
    args = ap.parse_args(argv)
    try:
        described = download(args.name, args.out, args.revision)
    except DownloadError as e:
        print(e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"download of {args.name!r} interrupted; nothing was written to {args.out}.", file=sys.stderr)
        return 130
    except OSError as e:  # e.g. the disk filled up while the files were written
        print(f"could not download {args.name!r}: {e.strerror or e}; nothing was written to {args.out}. "
              "Fix: free some disk space (or choose another --out) and run it again.", file=sys.stderr)
        return 1
    except Exception as e:  # a defect of this tool: still one line, and no folder left behind
        print(f"download failed ({one_line(e)}); nothing was written to {args.out}. "
              "This is a bug: please report it with the command you ran.", file=sys.stderr)
        return 1
    print(f"downloaded {args.name} to {args.out}")
    print("checked offline:", described)
    print(f"use it with: INFERLAB_MODEL={args.out.resolve()} HF_HUB_OFFLINE=1 jupyter lab")
    return 0


if __name__ == "__main__":
    sys.exit(main())

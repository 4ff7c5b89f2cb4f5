"""The data preparation of ``data/train_tiny_gpt2.py`` on a tiny fake ``chinese-poetry`` tarball (no network).

Checks what the model card promises: the Tang poems are read from ``dist/quantangshi/poet.tang.<N>.json`` only,
in the order of N, converted to Simplified characters, formatted as title / author / lines, and the held-out
poems never reach the training split.
"""

from __future__ import annotations

import importlib.util
import io
import json
import tarfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def train():
    spec = importlib.util.spec_from_file_location("train_tiny_gpt2", ROOT / "data" / "train_tiny_gpt2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _poem(title: str, author: str = "李白", *lines: str) -> dict:
    return {"title": title, "author": author, "paragraphs": list(lines), "id": title}


def _fake_archive(path: Path) -> Path:
    """A tarball laid out like ``npm pack chinese-poetry@2.0.1``: three Tang files and two look-alikes."""
    files = {
        "package/dist/quantangshi/poet.tang.0.json": [_poem("甲"), _poem("乙")],
        "package/dist/quantangshi/poet.tang.10000.json": [_poem("丁")],
        "package/dist/quantangshi/poet.tang.2000.json": [_poem("丙")],
        "package/dist/quantangshi/error/poet.tang.0.json": [_poem("錯")],
        "package/dist/strains/json/poet.tang.0.json": [_poem("律")],
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, poems in files.items():
            data = json.dumps(poems, ensure_ascii=False).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_tang_poems_come_from_quantangshi_only_in_file_number_order(train, tmp_path):
    poems = train.read_tang_poems(_fake_archive(tmp_path / "chinese-poetry-2.0.1.tgz"))
    # 0 < 2000 < 10000 (a string sort would put 10000 before 2000); error/ and strains/ are left out
    assert [p["title"] for p in poems] == ["甲", "乙", "丙", "丁"]


def test_a_poem_reads_title_author_then_its_lines(train):
    poem = _poem(" 靜夜思 ", "李白", "床前看月光，疑是地上霜。", "", "舉頭望山月，低頭思故鄉。")
    assert train.format_poem(poem, str) == "靜夜思\n李白\n床前看月光，疑是地上霜。\n舉頭望山月，低頭思故鄉。"


def test_poems_are_converted_to_simplified_characters(train, tmp_path, monkeypatch):
    archive = tmp_path / "chinese-poetry-2.0.1.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        data = json.dumps([_poem("靜夜思", "李白", "牀前看月光，疑是地上霜。", "舉頭望山月，低頭思故鄉。")]).encode()
        info = tarfile.TarInfo("package/dist/quantangshi/poet.tang.0.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    monkeypatch.setattr(train, "poetry_archive", lambda: archive)
    assert train.poem_texts() == ["静夜思\n李白\n床前看月光，疑是地上霜。\n举头望山月，低头思故乡。"]


def test_every_nth_poem_is_held_out_and_never_trained_on(train):
    texts = [f"poem {i}" for i in range(250)]
    train_split, held = train.split_poems(texts, every=50)
    assert held == ["poem 49", "poem 99", "poem 149", "poem 199", "poem 249"]
    assert len(train_split) == 245 and not set(held) & set(train_split)
    assert train.split_poems(texts)[1] == ["poem 199"]  # the default: every 200th


def test_poems_are_joined_by_end_of_text(train):
    tok = train.gpt2_tokenizer()
    # GPT-2's ids: "a" = 64, "b" = 65, <|endoftext|> = 50256; "月" is 3 UTF-8 bytes, 2 tokens (17312, 230)
    assert train.join_tokens(tok, ["a", "b", "月"]).tolist() == [64, 50256, 65, 50256, 17312, 230, 50256]


def test_a_mixed_batch_takes_its_share_of_rows_from_the_poems(train):
    english, chinese = torch.arange(0, 100), torch.arange(1000, 1100)
    x = next(train.mixed_batches(english, chinese, block=8, batch=4, mix=0.5, gen=torch.Generator().manual_seed(0)))
    assert x.shape == (4, 9)
    assert (x[:2] < 100).all() and (x[2:] >= 1000).all()
    only_english = next(train.mixed_batches(english, chinese, 8, 4, 0.0, torch.Generator().manual_seed(0)))
    assert (only_english < 100).all()


def test_never_seen_ids_get_a_row_unlikely_after_every_context_but_no_lower_than_needed(train):
    # two contexts pointing different ways; the seen ids' log-sum-exp is 0 after both, so one unseen id at
    # logit 0 would take softplus(0) = 0.69 nats: the row must go negative along both axes
    h = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    row = train.unseen_row(h, torch.zeros(2), count=1, leak=0.01)
    assert (row < -3.5).all()  # softplus(-4.6) = 0.01: each logit near -4.6 or below
    # already unlikely (seen log-sum-exp 20 above a zero logit): the row stays at zero
    assert train.unseen_row(h, torch.full((2,), 20.0), count=1).tolist() == [0.0, 0.0]

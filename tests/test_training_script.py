"""The training package (``training/``): its data preparation on a tiny fake ``chinese-poetry`` tarball (no network),
its rows, head guide, loop, checkpoints and vocabulary surgery on toy models, its options' checks, and the card.

Checks what the model card promises: the Tang poems are read from ``dist/quantangshi/poet.tang.<N>.json`` only,
in the order of N, converted to Simplified characters, formatted as title / author / lines, and the held-out
poems never reach the training split.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
import torch

import training.card
from training import corpus as corpora
from training import gpt2_parts as parts
from training import loop, options
from training import rows as rowgen
from training import train as cli
from training.guide import HeadGuide

ROOT = Path(__file__).resolve().parents[1]


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


def test_tang_poems_come_from_quantangshi_only_in_file_number_order(tmp_path):
    poems = corpora.read_tang_poems(_fake_archive(tmp_path / "chinese-poetry-2.0.1.tgz"))
    # 0 < 2000 < 10000 (a string sort would put 10000 before 2000); error/ and strains/ are left out
    assert [p["title"] for p in poems] == ["甲", "乙", "丙", "丁"]


def test_a_poem_reads_title_author_then_its_lines():
    poem = _poem(" 靜夜思 ", "李白", "床前看月光，疑是地上霜。", "", "舉頭望山月，低頭思故鄉。")
    assert corpora.format_poem(poem, str) == "靜夜思\n李白\n床前看月光，疑是地上霜。\n舉頭望山月，低頭思故鄉。"


def test_poems_are_converted_to_simplified_characters(tmp_path, monkeypatch):
    archive = tmp_path / "chinese-poetry-2.0.1.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        data = json.dumps([_poem("靜夜思", "李白", "牀前看月光，疑是地上霜。", "舉頭望山月，低頭思故鄉。")]).encode()
        info = tarfile.TarInfo("package/dist/quantangshi/poet.tang.0.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    monkeypatch.setattr(corpora, "poetry_archive", lambda: archive)
    assert corpora.poem_texts() == ["静夜思\n李白\n床前看月光，疑是地上霜。\n举头望山月，低头思故乡。"]


def test_every_nth_poem_is_held_out_and_never_trained_on():
    texts = [f"poem {i}" for i in range(250)]
    train_split, held = corpora.split_poems(texts, every=50)
    assert held == ["poem 49", "poem 99", "poem 149", "poem 199", "poem 249"]
    assert len(train_split) == 245 and not set(held) & set(train_split)
    assert corpora.split_poems(texts)[1] == ["poem 199"]  # the default: every 200th


def test_poems_are_joined_by_end_of_text():
    tok = corpora.gpt2_tokenizer()
    # GPT-2's ids: "a" = 64, "b" = 65, <|endoftext|> = 50256; "月" is 3 UTF-8 bytes, 2 tokens (17312, 230)
    assert corpora.join_tokens(tok, ["a", "b", "月"]).tolist() == [64, 50256, 65, 50256, 17312, 230, 50256]


def test_a_mixed_batch_takes_its_share_of_rows_from_the_poems():
    english, chinese = torch.arange(0, 100), torch.arange(1000, 1100)
    x = next(rowgen.mixed_batches(english, chinese, block=8, batch=4, mix=0.5, gen=torch.Generator().manual_seed(0)))
    assert x.shape == (4, 9)
    assert (x[:2] < 100).all() and (x[2:] >= 1000).all()
    only_english = next(rowgen.mixed_batches(english, chinese, 8, 4, 0.0, torch.Generator().manual_seed(0)))
    assert (only_english < 100).all()


def test_never_seen_ids_get_a_row_unlikely_after_every_context_but_no_lower_than_needed():
    # two contexts pointing different ways; the seen ids' log-sum-exp is 0 after both, so one unseen id at
    # logit 0 would take softplus(0) = 0.69 nats: the row must go negative along both axes
    h = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    row = parts.unseen_row(h, torch.zeros(2), count=1, leak=0.01)
    assert (row < -3.5).all()  # softplus(-4.6) = 0.01: each logit near -4.6 or below
    # already unlikely (seen log-sum-exp 20 above a zero logit): the row stays at zero
    assert parts.unseen_row(h, torch.full((2,), 20.0), count=1).tolist() == [0.0, 0.0]


def test_a_repeated_row_repeats_one_span_after_a_lead_in_of_real_text():
    text = torch.arange(1000, 2000)  # "real text": consecutive ids, so a stretch of it is easy to recognise
    pool = torch.arange(10, 60)
    for seed in range(20):
        row = rowgen.repeated_row(65, [text], pool, torch.Generator().manual_seed(seed))
        assert row.shape == (65,)
        # the row's tail is periodic: some span length p in 8..64 with row[i] == row[i - p] from the lead-in on
        periods = [p for p in range(8, 65) if any((row[s + p:] == row[s:-p]).all() for s in range(0, 17))]
        assert periods, row.tolist()
        random_span = bool((row[-periods[0]:] < 1000).all())
        assert random_span == bool((row[-8:] < 60).all())  # a span is either all pool ids or all real text
        if random_span:  # distinct pool ids, in a random order
            span = row[-periods[0]:]
            assert len(set(span.tolist())) == len(span)


def test_with_repeats_replaces_about_its_share_of_rows():
    gen = torch.Generator().manual_seed(0)
    text, pool = torch.arange(1000, 3000), torch.arange(10, 200)
    stream = rowgen.mixed_batches(text, text, block=64, batch=50, mix=0.5, gen=gen)
    x = next(rowgen.with_repeats(stream, [text], pool, 0.2, gen))
    def periodic(row: torch.Tensor) -> bool:  # real text is never periodic; a repeated row always is
        return any((row[32 + p:] == row[32:-p]).all() for p in range(8, 33))
    replaced = sum(periodic(r) for r in x)
    assert 3 <= replaced <= 20, replaced  # 50 rows at 0.2: 10 expected
    untouched = next(rowgen.with_repeats(rowgen.mixed_batches(text, text, 64, 50, 0.5, gen), [text], pool, 0.0, gen))
    assert not any(periodic(r) for r in untouched)


def test_a_copy_row_repeats_a_span_of_distinct_pool_ids_at_random_places_and_learns_only_the_copy():
    pool = torch.arange(100, 200)
    batch, targets = next(rowgen.copy_batches(pool, 41, 64, torch.Generator().manual_seed(0)))
    assert batch.shape == (64, 41) and targets.shape == (64, 40)
    assert set(batch.flatten().tolist()) <= set(pool.tolist())
    spans, seconds = set(), set()
    for row, target in zip(batch, targets):
        learned = (target != -100).nonzero().flatten()
        first, last = int(learned[0]), int(learned[-1])
        assert torch.equal(learned, torch.arange(first, last + 1))  # one stretch: the second copy after its first id
        assert torch.equal(target[learned], row[first + 1 : last + 2])  # the next ids, unchanged
        span = last - first + 2
        second = row[first : last + 2]
        assert 8 <= span <= 20 and len(set(second.tolist())) == span  # distinct ids
        # the same span appeared before, entirely earlier in the row
        assert any(torch.equal(row[a : a + span], second) for a in range(0, first - span + 1))
        spans.add(span)
        seconds.add(first)
    # the lengths and places vary: no fixed distance back solves the rows (a one-layer shortcut)
    assert len(spans) > 5 and len(seconds) > 5


def test_copy_rows_favour_short_spans_and_the_rows_start():
    """Half the rows start with the first copy and spans are drawn on a log scale (03 measures copying at the start
    of a row, on a 20-token span): drawn evenly, a start at 0 came once in 50 rows and the median span was 36."""
    pool = torch.arange(1000, 1400)
    batch, targets = next(rowgen.copy_batches(pool, 129, 400, torch.Generator().manual_seed(0)))
    at_start, spans, adjacent = 0, [], 0
    for row, target in zip(batch, targets):
        learned = (target != -100).nonzero().flatten()
        second, span = int(learned[0]), int(learned[-1]) - int(learned[0]) + 2
        first = next(a for a in range(second - span + 1) if torch.equal(row[a:a + span], row[second:second + span]))
        at_start += first == 0
        adjacent += first + span == second
        spans.append(span)
    assert 0.4 <= at_start / 400 <= 0.75 and 0.4 <= adjacent / 400 <= 0.75, (at_start, adjacent)
    assert sorted(spans)[200] < 30 and max(spans) > 50, sorted(spans)


def test_phase_one_can_mix_copy_rows_into_ordinary_batches():
    pool = torch.arange(100, 140)
    text = torch.arange(1000, 3000)
    stream = rowgen.with_copy_rows(rowgen.batches(text, 32, 200, torch.Generator().manual_seed(1)), pool, 0.25,
                                   torch.Generator().manual_seed(2))
    x, targets = next(stream)
    copy = torch.tensor([set(r.tolist()) <= set(pool.tolist()) for r in x])
    assert 25 <= int(copy.sum()) <= 75  # 50 expected
    assert torch.equal(targets[~copy], x[~copy][:, 1:])  # ordinary rows: every target
    assert ((targets[copy] == -100).sum(1) > 0).all()  # copy rows: only their second copy


def test_a_warm_start_refreshes_only_the_rows_its_checkpoint_never_trained():
    table = torch.randn(6, 4)
    table[[1, 4, 5]] = torch.tensor([-1.0, 0.5, 0.5, 2.0])  # phase 2's one row for ids missing from the data
    assert parts.never_trained_rows(table).tolist() == [False, True, False, False, True, True]
    assert not parts.never_trained_rows(torch.randn(6, 4)).any()  # every row trained (a bilingual start's poems too)


def test_frequent_pool_leaves_out_end_of_text():
    data = torch.tensor([5, 5, 5, 7, 7, 9, 3, 3, 3, 3])
    assert rowgen.frequent_pool(data, 2, eot=3).tolist() == [5, 7]


def test_a_resumed_run_carries_on_exactly_where_the_checkpoint_was_saved(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    def fresh():
        torch.manual_seed(0)
        return GPT2LMHeadModel(GPT2Config(vocab_size=50, **parts.size_of(context=16, width=16, layers=1, heads=2)))

    def run(steps, start=0, model=None, opt_state=None, gen=None, save_at=None):
        model = model or fresh()
        gen = gen or torch.Generator().manual_seed(1)
        stream = rowgen.batches(torch.arange(0, 50).repeat(20), 8, 4, gen)
        saved = {}

        def checkpoint(step, opt):
            if step == save_at:
                loop.save_checkpoint(tmp_path / "ckpt", 1, step, model, opt, gen, minutes=1.5,
                                     notes={"copy_steps_taken": 7})
                saved["yes"] = True
        loop.train_loop(model, lambda _: stream, 0, 1e-2, 2, "t", steps=steps, start_step=start, opt_state=opt_state,
                        checkpoint=checkpoint, checkpoint_seconds=-1)
        return model, saved

    straight, saved = run(6, save_at=3)
    assert saved
    state = loop.load_checkpoint(tmp_path / "ckpt")
    assert state["phase"] == 1 and state["step"] == 3 and state["minutes"] == 1.5
    assert state["notes"] == {"copy_steps_taken": 7}  # what the card reports survives a resume
    assert not any(p.suffix in (".pt", ".pth", ".bin", ".pkl") for p in (tmp_path / "ckpt").iterdir())
    from safetensors.torch import load_model

    model = fresh()
    load_model(model, state["model_file"])
    gen = torch.Generator()
    gen.set_state(state["rng_data"])
    torch.set_rng_state(state["rng_torch"])
    resumed, _ = run(6, start=3, model=model, opt_state=state["optimizer"], gen=gen)
    for a, b in zip(straight.parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b)
    assert loop.load_checkpoint(tmp_path / "nothing") is None


def test_the_copy_warm_up_can_keep_language_rows_in_each_batch():
    pool = torch.arange(100, 140)
    copies = rowgen.copy_batches(pool, 17, 8, torch.Generator().manual_seed(0))
    text = torch.arange(1000, 3000)
    language = rowgen.batches(text, 16, 3, torch.Generator().manual_seed(1))
    batch, targets = next(rowgen.with_language(copies, language))
    assert batch.shape == (8, 17) and targets.shape == (8, 16)
    assert ((targets[:5] == -100).sum(1) > 0).all() and torch.equal(targets[5:], batch[5:, 1:])  # language: all targets
    assert all(set(row.tolist()) <= set(pool.tolist()) for row in batch[:5])
    assert all(row.min() >= 1000 and torch.equal(row[1:] - row[:-1], torch.ones(16, dtype=torch.long))
               for row in batch[5:])  # consecutive windows of the text


def test_the_loop_ignores_masked_targets_and_stops_when_its_goal_is_reached():
    from transformers import GPT2Config, GPT2LMHeadModel

    def trained(stream):
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=20, **parts.size_of(context=16, width=16, layers=1, heads=2)))
        loop.train_loop(model, lambda _: stream, 0, 1e-2, 1, "t", steps=3)
        return model

    x = torch.randint(0, 20, (4, 9))
    masked = x[:, 1:].clone()
    masked[:, :4] = -100
    other = masked.clone()
    other[:, 4:] = (other[:, 4:] + 1) % 20
    plain, with_mask, other_targets = trained(iter([x] * 3)), trained(iter([(x, masked)] * 3)), trained(
        iter([(x, other)] * 3))
    assert all(torch.isfinite(p).all() for p in with_mask.parameters())
    # nothing masked: the same run as plain rows (the output layer on the kept positions only, here all of them)
    unmasked = trained(iter([(x, x[:, 1:].clone())] * 3))
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(plain.parameters(), unmasked.parameters()))
    # the targets given are the ones learned: a mask changes the run, and so do other unmasked targets
    def out(model):
        return model.get_output_embeddings().weight
    assert not torch.equal(out(plain), out(with_mask))
    assert not torch.equal(out(with_mask), out(other_targets))
    model = with_mask

    asked = []

    def until():
        asked.append(len(asked))
        return len(asked) == 2
    taken = loop.train_loop(model, lambda _: iter([x] * 100), 0, 1e-2, 1, "t", steps=100, report=lambda: "r",
                            report_every=5, constant=True, until=until)
    assert taken == 5 and asked == [0, 1]  # asked at steps 0 and 5, stopped at the second


def test_position_embeddings_can_learn_faster_without_weight_decay():
    from transformers import GPT2Config, GPT2LMHeadModel

    def trained(wpe_lr):
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=20, **parts.size_of(context=16, width=16, layers=1, heads=2)))
        wpe = next(p for n, p in model.named_parameters() if n.endswith("wpe.weight"))  # the position embeddings
        start = wpe.detach().clone()
        x = torch.randint(0, 20, (4, 9))
        loop.train_loop(model, lambda _: iter([x] * 2), 0, 1e-3, 1, "t", steps=2, wpe_lr=wpe_lr, constant=True)
        return (wpe - start)[:8].abs().mean().item()
    # Adam moves each weight about lr per step: ten times the rate, about ten times the change
    assert 5 < trained(10.0) / trained(1.0) < 15


def test_a_grown_model_computes_what_its_start_did_and_its_new_blocks_can_learn_faster():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    start = GPT2LMHeadModel(GPT2Config(vocab_size=20, **parts.size_of(context=16, width=16, layers=2, heads=2)))
    grown = parts.restricted_copy(start, torch.arange(20), parts.size_of(context=16, width=16, layers=4, heads=2))
    parts.silence_blocks(grown, 2)
    start.eval(), grown.eval()
    x = torch.randint(0, 20, (3, 9))
    with torch.no_grad():
        assert torch.allclose(grown(input_ids=x).logits, start(input_ids=x).logits, atol=1e-5)
    kept = set(start.state_dict())  # the parameters the start had; the others are the appended blocks'
    before = {n: p.detach().clone() for n, p in grown.named_parameters()}
    grown.train()
    loop.train_loop(grown, lambda _: iter([x] * 2), 0, 1e-3, 1, "t", steps=2, constant=True, new_layers=2,
                    new_lr=10.0)
    moved = {n: (p - before[n]).abs().max().item() for n, p in grown.named_parameters()}
    old = max(v for n, v in moved.items() if n in kept)
    new = max(v for n, v in moved.items() if n not in kept)
    # Adam moves each weight about lr per step: the appended blocks' at ten times the rate
    assert 5 < new / old < 15


@pytest.mark.parametrize("argv, named", [
    (["--copy-until", "1.0"], "--copy-until 1.0: needs --copy-steps"),
    (["--copy-steps", "10", "--copy-until", "12"], "between 0 and 10"),
    (["--copy-share", "1"], "--copy-share 1.0"),
    (["--copy-share", "0.1", "--repeat-pool", "100"], "--repeat-pool 100: phase 1's copy rows"),
    (["--copy-lm-share", "-0.1"], "--copy-lm-share -0.1"),
    (["--copy-pool", "10"], "--copy-pool 10: between 32"),
    (["--copy-dropout", "1"], "--copy-dropout 1.0"),
    (["--wpe-lr", "0"], "--wpe-lr 0.0"),
    (["--guide", "-1"], "--guide -1.0: the guide's weight must be between 0"),
    (["--copy-weight", "0.5"], "--copy-weight 0.5: a copy row's targets count at least once"),
    (["--long-share", "0"], "--long-share 0.0: the share of phase 1 on full-context windows must be above 0"),
    (["--guide", "1", "--guide-previous", "1", "0", "--guide-induction", "1", "2"], "its layer must come after"),
    (["--guide", "1", "--guide-induction", "4", "0"], "--guide-induction 4 0: this model has layers 0..3"),
    (["--guide", "1", "--guide-previous", "0", "5"], "--guide-previous 0 5: this model has layers 0..3 and heads 0..4"),
    (["--grow-layers", "8"], "--grow-layers 8: needs --init"),
    (["--init", str(ROOT / "data/models/tiny-gpt2-bilingual"), "--grow-layers", "1"], "more layers than --init's"),
    (["--new-lr", "3"], "--new-lr 3.0: a multiple of the learning rate above 0 and at most 100, and only with"),
    (["--warmup", "0"], "--warmup 0: between 1 and 2000"),
    (["--passage-share", "0.6", "--copy-share", "0.5"], "--passage-share 0.6: the share of rows that are passage"),
    (["--guide", "1", "--guide-copy", "9", "0"], "--guide-copy 9 0: this model has layers 0..3"),
])
def test_bad_training_options_are_refused_before_any_work_with_the_range(monkeypatch, capsys, argv, named):
    monkeypatch.setattr("sys.argv", ["train.py", *argv])
    monkeypatch.setattr(corpora, "gpt2_tokenizer", lambda: pytest.fail("work started before the options were checked"))
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 2 and named in capsys.readouterr().err


def test_a_gpu_is_asked_for_only_where_torch_sees_one(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert options.resolve_device("auto") == "cpu" and options.resolve_device("cpu") == "cpu"
    monkeypatch.setattr("sys.argv", ["train.py", "--device", "cuda"])
    monkeypatch.setattr(corpora, "gpt2_tokenizer", lambda: pytest.fail("work started before the options were checked"))
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "--device cuda: torch" in err and "use --device cpu" in err, err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert options.resolve_device("auto") == "cuda" and options.resolve_device("cpu") == "cpu"


def _corpus():
    return corpora.Corpus(torch.tensor([464, 50256, 11]), torch.tensor([50256]), torch.tensor([19526, 254, 50256]),
                          torch.tensor([]).long(), poems=3, held_out_poems=1, zh_chars=30, zh_held_chars=11)


def test_the_token_cache_gives_back_what_was_tokenized_and_only_for_the_same_tokenizer_and_split(tmp_path,
                                                                                               monkeypatch):
    path = tmp_path / "tokens.safetensors"
    made = _corpus()
    monkeypatch.setattr(corpora, "tokenize_corpora", lambda tok: made)
    first = corpora.corpus_tokens(None, path)  # tokenized (here: the fake), then written
    monkeypatch.setattr(corpora, "tokenize_corpora", lambda tok: pytest.fail("the cache was not used"))
    again = corpora.corpus_tokens(None, path)
    for a, b in zip(first, again, strict=True):
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
    assert again.zh_train.dtype == torch.int64 and again.poems == 3 and again.zh_held_chars == 11
    assert path.stat().st_size < 1000  # 2 bytes an id
    # another held-out split (or tokenizer) than the cache's: tokenized again, and the cache replaced
    monkeypatch.setattr(corpora, "POEM_HOLDOUT_EVERY", 100)
    assert "poem_holdout_every" in corpora.load_tokens(path)[1]
    monkeypatch.setattr(corpora, "tokenize_corpora", lambda tok: made._replace(poems=4))
    assert corpora.corpus_tokens(None, path).poems == 4 and corpora.load_tokens(path)[0].poems == 4


def test_a_damaged_token_cache_is_tokenized_again_not_trusted(tmp_path, monkeypatch, capsys):
    path = tmp_path / "tokens.safetensors"
    corpora.save_tokens(_corpus(), path)
    path.write_bytes(path.read_bytes()[:-7])  # cut short, as by a full disk
    corpus, why = corpora.load_tokens(path)
    assert corpus is None and "cannot be read" in why
    monkeypatch.setattr(corpora, "tokenize_corpora", lambda tok: _corpus())
    assert corpora.corpus_tokens(None, path).poems == 3 and "tokenizing the corpora again" in capsys.readouterr().out
    assert not path.with_name(path.name + ".tmp").exists()
    with pytest.raises(ValueError, match="does not fit in uint16"):
        corpora.save_tokens(_corpus()._replace(en_held=torch.tensor([70000])), path)


def test_the_head_guide_marks_the_keys_after_each_earlier_occurrence():
    ids = torch.tensor([[5, 7, 9, 5, 7, 5]])
    keys = HeadGuide.induction_keys(ids)[0]
    assert keys[:3].sum() == 0  # 5, 7, 9: nothing earlier to look back at
    assert keys[3].nonzero().flatten().tolist() == [1]  # the second 5: the 7 that followed the first
    assert keys[4].nonzero().flatten().tolist() == [2]  # the second 7: the 9 after the first 7
    assert keys[5].nonzero().flatten().tolist() == [1, 4]  # the third 5: after both earlier 5s
    assert HeadGuide.induction_keys(torch.tensor([[4, 4]]))[0, 1].nonzero().flatten().tolist() == [1]


def test_the_head_guide_teaches_its_two_heads_and_leaves_the_forward_alone():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=30, **parts.size_of(context=32, width=32, layers=2, heads=2)))
    model.eval()  # no dropout: the two forwards below must match exactly
    span = torch.randperm(30)[:12]
    x = torch.cat([span, span, span[:9]]).unsqueeze(0).repeat(4, 1)  # a span repeated: induction has a target
    plain = model(input_ids=x[:, :-1]).logits
    guide = HeadGuide(model, previous=(0, 1), induction=(1, 0), weight=1.0)
    assert torch.equal(model(input_ids=x[:, :-1]).logits, plain)  # the guide only reads queries and keys
    before = [v.item() for v in guide.losses(x[:, :-1])]
    model.train()
    loop.train_loop(model, lambda _: iter([x] * 60), 0, 1e-2, 1, "t", steps=60, constant=True, guide=guide)
    model.eval()
    model(input_ids=x[:, :-1])
    after = [v.item() for v in guide.losses(x[:, :-1])]
    # -log(weight on the wanted keys): from about log(position) (spread out) to well below
    assert before[0] > 1.5 and after[0] < 0.5 * before[0], (before, after)
    assert before[1] > 1.5 and after[1] < 0.5 * before[1], (before, after)
    guide.remove()
    model(input_ids=x[:1, :-1])
    assert guide.qkv[0].shape[0] == 4  # removed: the hooks no longer record


def test_copy_weight_counts_only_the_copy_rows_targets_more():
    from transformers import GPT2Config, GPT2LMHeadModel

    x = torch.randint(0, 20, (4, 9))
    language = x[:, 1:].clone()  # every target kept: language rows only
    with_copy = language.clone()
    with_copy[0, :5] = -100  # row 0 a copy row: its first targets masked

    def trained(targets, weight):
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=20, **parts.size_of(context=16, width=16, layers=1, heads=2)))
        loop.train_loop(model, lambda _: iter([(x, targets)] * 2), 0, 1e-2, 1, "t", steps=2, copy_weight=weight)
        return model.get_output_embeddings().weight.detach().clone()
    assert torch.equal(trained(language, 1.0), trained(language, 5.0))  # no copy row: nothing to weigh
    assert not torch.allclose(trained(with_copy, 1.0), trained(with_copy, 5.0))


def test_copy_rows_can_draw_each_row_from_one_of_several_pools():
    english, chinese = torch.arange(100, 200), torch.arange(500, 600)
    rows = [torch.zeros(33, dtype=torch.long) for _ in range(60)]
    batch = torch.stack(rows)
    x, _ = next(rowgen.with_copy_rows(iter([batch]), [english, chinese], 1.0, torch.Generator().manual_seed(0)))
    drawn = [("en" if (r >= 100).all() and (r < 200).all() else "zh" if (r >= 500).all() else "both") for r in x]
    assert set(drawn) == {"en", "zh"} and 15 < drawn.count("en") < 45  # each row from one pool, either at even odds


def test_the_bundled_models_card_is_what_its_stored_measurements_write():
    """The card is written from training_stats.json and eval.json (``python -m training.evaluate --card-only``
    rewrites it): a hand edit, or a new measurement without a new card, shows here."""
    folder = ROOT / "data" / "models" / "tiny-gpt2-bilingual"
    stats, ev = (json.loads((folder / name).read_text(encoding="utf-8"))
                 for name in ("training_stats.json", "eval.json"))
    card = training.card.model_card(stats, ev)
    assert card == (folder / "README.md").read_text(encoding="utf-8")
    assert "head guide" in card
    assert ("It ran in parts" in card) == bool(stats.get("history"))  # a resumed run lists its parts
    for run in stats["lineage"]:  # every earlier run can be got back from its commit
        assert run["commit"] is None or f"git show {run['commit']}:" in card


def test_the_card_says_the_model_does_not_copy_text_only_while_most_passages_fall_short():
    short = {"tokens_copied": {"en 1": 0, "en 2": 30, "zh 1": 2, "zh 2": 0}, "aim": 24}
    assert training.card.copied_text(short) == "English 0, 30; Chinese 2, 0 (notebook 10's aim: 24 on most)"
    limit = training.card.copying_limit(short)
    assert "but not text" in limit and "within 30 tokens" in limit
    most = {"tokens_copied": {"en 1": 24, "en 2": 64, "zh 1": 2, "zh 2": 40}, "aim": 24}
    assert training.card.copying_limit(most) == "" and training.card.copying_limit(None) == ""


def test_a_passage_row_repeats_real_text_and_learns_only_its_second_copy():
    g = torch.Generator().manual_seed(0)
    text = [torch.arange(1000, 6000)]  # "text" whose ids never repeat by chance
    for _ in range(50):
        row, targets = rowgen.passage_row(text, 128, g)
        kept = (targets != -100).nonzero().flatten()
        assert len(kept) >= 15 and kept.diff().eq(1).all()  # one stretch: the second copy after its first id
        first, n = int(kept[0]), len(kept) + 1  # the second copy starts at the first kept target
        second = row[first:first + n]
        assert any(torch.equal(row[i:i + n], second) for i in range(first - n + 1))  # it appeared before
        assert torch.equal(targets[kept], row[kept + 1])


def test_the_copy_guide_marks_the_key_after_an_earlier_run_of_the_same_ids():
    ids = torch.tensor([[5, 6, 7, 8, 5, 6, 7, 9, 5, 6]])
    keys = HeadGuide.copy_keys(ids, 2)[0]
    assert keys.nonzero().tolist() == [[5, 2], [6, 3], [9, 2], [9, 6]]  # "5 6" -> 7 (twice), "6 7" -> 8
    assert HeadGuide.copy_keys(ids, 3)[0].nonzero().tolist() == [[6, 3]]  # only "5 6 7" occurred before


def _fake_corpus() -> corpora.Corpus:
    """Both languages as random ids (each stream with its <|endoftext|>s): enough for a run of a few steps."""
    g = torch.Generator().manual_seed(0)

    def stream(low: int, high: int, n: int) -> torch.Tensor:
        ids = torch.randint(low, high, (n,), generator=g)
        ids[::97] = 50256
        return ids
    return corpora.Corpus(stream(200, 900, 6000), stream(200, 900, 600), stream(20000, 20400, 6000),
                          stream(20000, 20400, 600), poems=60, held_out_poems=3, zh_chars=9000, zh_held_chars=400)


TINY = ["--d-model", "16", "--layers", "2", "--heads", "2", "--context", "32", "--batch", "2", "--steps", "6", "3",
        "--copy-steps", "4", "--copy-context", "16", "--copy-share", "0.1", "--repeat-pool", "40", "--guide", "1",
        "--report-windows", "2", "--checkpoint-minutes", "0", "--device", "cpu"]


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_a_tiny_run_end_to_end_writes_a_full_vocabulary_model_and_a_resumed_run_writes_the_same(tmp_path, monkeypatch):
    """The whole command on a fake corpus: the copy warm-up, phase 1, phase 2, the stored folder; then the same run
    stopped after phase 1 and carried on with ``--resume`` (from the phase-1 checkpoint) stores the same weights."""
    monkeypatch.setattr(corpora, "corpus_tokens", lambda tok, path=None: _fake_corpus())
    straight = tmp_path / "straight"
    cli.main([*TINY, "--out", str(straight), "--checkpoint", str(tmp_path / "ck1")])
    stats = json.loads((straight / "training_stats.json").read_text(encoding="utf-8"))
    assert stats["steps"]["phase1_restricted_vocab"] == 6 and stats["steps"]["phase2_full_vocab"] == 3
    assert stats["copy_steps_taken"] == 4 and stats["history"] is None and stats["lineage"] == []
    assert stats["command"].startswith("python -m training.train --d-model 16")
    assert {"config.json", "vocab.json", "merges.txt", "model.safetensors"} <= {p.name for p in straight.iterdir()}
    weights = _weights(straight)
    assert all(w.dtype == torch.float16 for w in weights.values())  # stored in float16 (the size limit)
    assert max(w.shape[0] for w in weights.values() if w.dim() == 2) == 50257  # GPT-2's full vocabulary

    def stop(run):
        raise KeyboardInterrupt  # stopped after phase 1: its last checkpoint stays behind
    monkeypatch.setattr(cli.phases, "phase2", stop)
    with pytest.raises(KeyboardInterrupt):
        cli.main([*TINY, "--out", str(tmp_path / "never"), "--checkpoint", str(tmp_path / "ck2")])
    assert json.loads((tmp_path / "ck2" / "state.json").read_text())["phase"] == 1
    monkeypatch.undo()
    monkeypatch.setattr(corpora, "corpus_tokens", lambda tok, path=None: _fake_corpus())
    resumed = tmp_path / "resumed"
    cli.main([*TINY, "--out", str(resumed), "--checkpoint", str(tmp_path / "ck2"), "--resume"])
    again = _weights(resumed)
    assert weights.keys() == again.keys() and all(torch.equal(weights[k], again[k]) for k in weights)
    history = json.loads((resumed / "training_stats.json").read_text(encoding="utf-8"))["history"]
    assert [h["from_step"] for h in history] == ["the start", "phase 1, step 6"]  # the card lists both parts


@pytest.mark.parametrize("values, named", [
    ({"copy_share": 1.0}, "--copy-share 1.0: the share of phase 1's rows that are copy rows must be at least 0 and "
                          "below 1 (e.g. 0.1)"),
    ({"long_share": 1.5}, "--long-share 1.5: the share of phase 1 on full-context windows must be above 0"),
    ({"warmup": 5000}, "--warmup 5000: between 1 and 2000 steps of phase 1 (e.g. 100)"),
    ({"resume": True}, "--resume needs --steps"),
    ({"guide": 1.0, "layers": 2, "guide_induction": (2, 0)}, "--guide-induction 2 0: this model has layers 0..1"),
])
def test_a_train_config_refuses_a_bad_value_naming_the_option_its_range_and_an_example(values, named):
    with pytest.raises(options.OptionError) as refused:
        options.TrainConfig(**values)
    assert str(refused.value).startswith(named)


def test_every_train_config_field_is_an_option_with_the_same_default():
    import dataclasses

    ap = options.parser("x")
    defaults = vars(ap.parse_args([]))
    fields = {f.name: f.default for f in dataclasses.fields(options.TrainConfig) if f.init}
    assert defaults == fields and len(fields) == 44  # every option the single script had
    cfg = options.TrainConfig.from_args(ap.parse_args(["--d-model", "64", "--steps", "5", "2", "--bf16"]))
    assert (cfg.d_model, cfg.steps, cfg.bf16, cfg.mix) == (64, (5, 2), True, 0.5)


def test_opencc_is_the_trainings_requirement_not_a_learners():
    """A learner installs requirements.txt; OpenCC (the Tang poems' conversion) is training's, and the suite's through
    requirements-dev.txt, which tests/run.sh installs."""
    def lines(name: str) -> list[str]:
        return [line.split("#")[0].strip() for line in (ROOT / name).read_text().splitlines()
                if line.split("#")[0].strip()]
    assert not [line for line in lines("requirements.txt") if line.lower().startswith("opencc")]
    assert lines("training/requirements.txt") == ["opencc==1.1.9"]
    assert lines("requirements-dev.txt") == ["-r requirements.txt", "-r training/requirements.txt"]
    assert "python install.py -q --no-compile --dev" in (ROOT / "tests" / "run.sh").read_text()


def test_docs_and_code_name_the_training_package_not_the_old_scripts():
    """``data/train_tiny_gpt2.py`` and ``data/eval_bundled.py`` became ``training/``: only history names them (the
    bundled model's card and stats quote the commands as run, and training/README.md and the card say where the
    script went)."""
    old = ("data/train_tiny_gpt2.py", "data/eval_bundled.py", "data/requirements-train.txt")
    files = [ROOT / "README.md", ROOT / "README.zh.md", ROOT / "CONTRIBUTING.md", ROOT / "install.py",
             ROOT / "tests" / "run.sh", ROOT / ".ci" / "run", *(ROOT / "docs").glob("*.md"),
             *(ROOT / "lib").rglob("*.py"), *(ROOT / "training").glob("*.py"),
             *(p for p in (ROOT / "tests").glob("*.py") if p.name != Path(__file__).name)]
    history = {ROOT / "training" / "card.py"}  # the card's one sentence: "... now lives at training/train.py"
    stale = [f"{p.relative_to(ROOT)}: {name}" for p in files if p.exists() and p not in history
             for name in old if name in p.read_text(encoding="utf-8")]
    assert not stale, f"the training scripts moved to training/ (python -m training.train): {stale}"
    assert not any((ROOT / name).exists() for name in old)

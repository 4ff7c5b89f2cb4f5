"""Embeddings: the lookup against the model's own forward pass, neighbours and PCA against brute force."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
import torch

import inferlab as il
from inferlab import embeddings as E
from inferlab import vocab_space as VS
from inferlab.hooks import capture
from inferlab.viz import embeddings as ve
from inferlab.widgets import embeddings as we


@pytest.fixture(scope="module")
def space(model):
    return VS.vocab_space(model)


@pytest.fixture(scope="module")
def toy(model):
    """A synthetic table on the real tokenizer: random rows, 200 tokens sharing one copied row."""
    g = torch.Generator().manual_seed(7)  # not 0: chance_scores draws from seed 0
    wte = torch.randn(model.info.vocab_size, 16, generator=g)
    wte[40000:40200] = wte[40000]
    unit = torch.nn.functional.normalize(wte, dim=-1)
    return VS.VocabSpace(model.tokenizer, wte, unit, VS.shared_rows(wte))


def test_lookup_is_wte_rows(model):
    ids = model.encode("How does inference work?")
    v = E.token_vectors(model, ids)
    assert v.shape == (5, model.info.d_model)
    assert torch.equal(v, E.token_table(model)[ids])
    with capture(model, {"embeddings"}) as cap:
        il.forward_full(model, [ids])  # the reference: what the model's own embedding layer outputs
    assert torch.equal(v, cap["embed.tok"])
    with pytest.raises(ValueError, match="ids"):
        E.token_vectors(model, [])
    with pytest.raises(ValueError):
        E.token_vectors(model, [model.info.vocab_size])


def test_first_residual_is_what_block_0_receives(model):
    ids = model.encode("To be, or not to be")
    res = E.first_residual(model, ids)
    with capture(model, {"embeddings"}) as cap:
        il.forward_full(model, [ids])
    assert torch.allclose(res.tok, cap["embed.tok"]) and torch.allclose(res.pos, cap["embed.pos"])
    assert torch.allclose(res.sum, cap["embed.sum"], atol=1e-6)
    assert "[tokens, d_model]" in repr(res)


def test_position_table(model):
    assert E.position_table(model).shape == (model.info.n_ctx, model.info.d_model)
    assert E.position_table(model, 7).shape == (7, model.info.d_model)
    with pytest.raises(ValueError, match="context"):
        E.position_table(model, model.info.n_ctx + 1)


def test_cosine_matrix_against_torch():
    x = torch.randn(6, 5, generator=torch.Generator().manual_seed(1))
    sim = E.cosine_matrix(x)
    ref = torch.nn.functional.cosine_similarity(x[:, None], x[None, :], dim=-1)
    assert torch.allclose(sim, ref, atol=1e-6)


def test_position_structure_detects_smoothness():
    t = torch.arange(300.0)[:, None]
    smooth = torch.cat([torch.sin(t / 50 * k) for k in range(1, 9)] + [torch.cos(t / 50 * k) for k in range(1, 9)], 1)
    near, far = E.position_structure(smooth)
    assert near > 0.9 > far
    noise_near, noise_far = E.position_structure(torch.randn(300, 64, generator=torch.Generator().manual_seed(0)))
    assert abs(noise_near) < 0.1 and abs(noise_far) < 0.1


def test_shared_rows(toy, space):
    assert toy.n_shared == 200 and bool(toy.shared[40000:40200].all()) and not bool(toy.shared[:40000].any())
    if space.n_shared:  # a model trained on a small corpus: the shared rows really are one vector
        rows = space.wte[space.shared]
        assert torch.equal(rows, rows[:1].expand_as(rows))


def test_nearest_matches_brute_force(toy):
    nb = toy.nearest("king", k=8)
    qid = toy.token_id("king")
    assert nb.query == " king" and nb.query_id == qid
    cos = torch.nn.functional.cosine_similarity(toy.wte, toy.wte[qid][None], dim=-1)
    cos[qid] = -9
    cos[40000:40200] = -9
    expected = torch.topk(cos, 8).indices.tolist()
    assert [n.id for n in nb.items] == expected
    assert [n.cosine for n in nb.items] == sorted((n.cosine for n in nb.items), reverse=True)
    assert all(abs(n.cosine - float(cos[n.id])) < 1e-5 for n in nb.items)


def test_nearest_messages(toy):
    with pytest.raises(VS.NotOneToken, match="not one token") as info:
        toy.nearest("duke")
    assert info.value.pieces == ["·d", "uke"] and "Fix" in str(info.value)
    with pytest.raises(ValueError, match="word"):
        toy.nearest("   ")
    with pytest.raises(ValueError, match="k="):
        toy.nearest("king", k=0)
    shared = toy.nearest(40000)
    assert shared.items == [] and "never learned" in shared.note
    assert toy.token_id("king", leading_space=False) != toy.token_id("king")


def test_nearest_not_one_token_never_prints_replacement(toy):
    with pytest.raises(VS.NotOneToken) as info:
        toy.nearest("量子", leading_space=False)
    assert "\ufffd" not in str(info.value)


def test_projection_is_pca(toy):
    groups = {"a": ["one", "two", "three", "four"], "b": ["king", "queen", "duke", "hand"]}
    p = toy.project(groups, dims=3)
    assert p.coords.shape == (7, 3) and "duke" in p.skipped and "duke" not in p.words
    x = toy.unit[[toy.token_id(w) for w in p.words]]
    x = x - x.mean(0)
    total = float((x**2).sum())
    for i in range(3):  # each axis holds the variance PCA says it holds
        assert float((p.coords[:, i] ** 2).sum()) / total == pytest.approx(p.explained[i], rel=1e-4)
    assert p.explained == sorted(p.explained, reverse=True)
    eig = torch.linalg.eigvalsh(x.T @ x).flip(0)[:3] / total  # the same, by the covariance route
    assert torch.allclose(torch.tensor(p.explained), eig, atol=1e-5)
    with pytest.raises(ValueError, match="usable words"):
        toy.project({"x": ["king"]})
    with pytest.raises(ValueError, match="dims"):
        toy.project(groups, dims=4)


def test_cohesion(toy):
    wte = toy.wte.clone()
    wte[toy.token_id("one")] = wte[toy.token_id("two")] * 2  # make one group tight
    s = VS.VocabSpace(toy.tokenizer, wte, torch.nn.functional.normalize(wte, dim=-1), toy.shared)
    c = s.cohesion({"tight": ["one", "two"], "other": ["king", "queen", "hand"]})
    assert c["tight"][0] == pytest.approx(1.0, abs=1e-5)
    assert abs(c["tight"][1]) < 0.1 and abs(c["other"][0]) < 0.5  # random rows: no background, no cohesion
    rows = s.unit[[s.token_id(w) for w in ["king", "queen", "hand"]]]
    pairs = (rows @ rows.T)[~torch.eye(3, dtype=torch.bool)]
    assert c["other"][0] == pytest.approx(float(pairs.mean()), abs=1e-6)


def test_typical_cosine(toy):
    med, p99 = toy.typical_cosine()
    assert -0.2 < med < 0.2 < p99 < 1


def test_chance_separates_planted_neighbours(toy):
    plain = toy.nearest("king", 5)  # a random table: its best scores are about what chance gives
    assert len(plain.chance) == 5 and plain.chance == sorted(plain.chance, reverse=True)
    assert abs(plain.items[0].cosine - plain.chance[0]) < 0.25
    wte = toy.wte.clone()
    g = torch.Generator().manual_seed(3)
    king = toy.token_id("king")
    for w in ["queen", "prince", "lord"]:  # plant three close neighbours
        wte[toy.token_id(w)] = wte[king] + 0.1 * torch.randn(wte.shape[1], generator=g)
    s = VS.VocabSpace(toy.tokenizer, wte, torch.nn.functional.normalize(wte, dim=-1), toy.shared)
    nb = s.nearest("king", 5)
    assert {n.token for n in nb.items[:3]} == {" queen", " prince", " lord"}
    assert all(n.cosine > c for n, c in zip(nb.items[:3], nb.chance))
    assert not any(n.cosine > c + 0.25 for n, c in zip(nb.items[3:], nb.chance[3:]))


# ----------------------------------------------------------------------------- figures
def test_heat_strip(model):
    v = E.token_vectors(model, model.encode("Hello world"))
    fig = ve.heat_strip(v, ["Hello", " world"])
    assert len(fig.data) == 1 and len(fig.data[0].z) == 2 and len(fig.data[0].z[0]) == model.info.d_model
    assert "d_model" in fig.layout.xaxis.title.text and "·world" in fig.data[0].y[1]
    assert len(ve.heat_strip(v[0], ["Hello"]).data[0].z) == 1
    with pytest.raises(ValueError, match="labels"):
        ve.heat_strip(v, ["one"])


def test_position_figures_are_thinned(model):
    wpe = E.position_table(model)
    fig = ve.position_heatmap(wpe)
    assert len(fig.data[0].z) <= 128 and fig.data[0].y[1] - fig.data[0].y[0] >= 1
    assert fig.layout.yaxis.title.text == "position (token index)"
    sim = ve.similarity_heatmap(E.cosine_matrix(wpe))
    assert len(sim.data[0].z) <= 128 and sim.data[0].zmin == -1
    small = ve.similarity_heatmap(E.cosine_matrix(wpe[:4]), labels=["a", "b", "c", "d"])
    assert list(small.data[0].x) == ["0: a", "1: b", "2: c", "3: d"]


def test_residual_sum_figure(model):
    ids = model.encode("How does inference work?")
    fig = ve.residual_sum(E.first_residual(model, ids), [model.decode([i]) for i in ids])
    assert len(fig.data) == 3 and all(len(t.z) == 5 for t in fig.data)
    assert "sum" in fig.data[2].name


def test_neighbour_bars(toy):
    nb = toy.nearest("king", k=5)
    fig = ve.neighbour_bars(nb)
    assert isinstance(fig, go.Figure) and len(fig.data[0].x) == 5 and len(fig.data[1].x) == 5
    assert f"id {nb.items[0].id}" in fig.data[0].hovertext[0]
    assert "cosine" in fig.layout.xaxis.title.text
    with pytest.raises(ValueError, match="no neighbours"):
        ve.neighbour_bars(toy.nearest(40000))
    assert len(ve.neighbour_bars(nb, show_chance=False).data) == 1
    fig = ve.neighbour_bars(nb, lines={"random pairs: median": 0.76, "random pairs: 99th percentile": 0.99})
    assert [list(t.x) for t in fig.data[2:]] == [[0.76, 0.76], [0.99, 0.99]] and fig.data[3].line.dash == "dash"
    assert fig.data[3].name == "random pairs: 99th percentile"


def test_pca_scatter(toy):
    groups = {"a": ["one", "two", "three"], "b": ["king", "queen", "hand"]}
    fig2 = ve.pca_scatter(toy.project(groups, 2))
    assert len(fig2.data) == 2 and list(fig2.data[0].text) == ["one", "two", "three"]
    assert "PC1" in fig2.layout.xaxis.title.text and "% of variance" in fig2.layout.xaxis.title.text
    fig3 = ve.pca_scatter(toy.project(groups, 3))
    assert fig3.data[0].type == "scatter3d" and "PC3" in fig3.layout.scene.zaxis.title.text


# ----------------------------------------------------------------------------- widgets
def test_neighbour_widget_messages(toy):
    box = we.neighbour_search(toy, "king", k=5)
    word, note = box.children[0].children[0], box.children[2]
    assert "above the median of random pairs" in note.value and "beat the same rank" in note.value
    word.value = "duke"
    assert "not one token" in note.value
    word.value = ""
    assert "word" in note.value
    word.value = "x" * 500
    assert "at most" in note.value


def test_pca_widget_messages(toy):
    box = we.pca_explorer(toy, {"a": ["one", "two", "three"], "b": ["king", "queen", "hand"]})
    extra, note = box.children[0].children[0], box.children[1]
    extra.value = "night, duke, qwxzv"
    assert "duke" in note.value and "qwxzv" in note.value
    extra.value = ", ".join(["day"] * 60)
    assert "too many" in note.value


# ----------------------------------------------------------------------------- a neighbour against its own background
def test_background_by_hand(toy):
    # The query (id 0) is (1, 0). Learned rows: (0, 1) cos 0, (1, 1) cos 0.7071, (-1, 0) cos -1, (3, 4) cos 0.6;
    # (2, 0) would score 1 but is a shared copy, so it is left out.
    wte = torch.tensor([[1.0, 0], [0, 1], [1, 1], [-1, 0], [3, 4], [2, 0]])
    shared = torch.tensor([False, False, False, False, False, True])
    s = VS.VocabSpace(toy.tokenizer, wte, torch.nn.functional.normalize(wte, dim=-1), shared)
    median, top = s.background(0, share=0.999)
    assert median == pytest.approx(0.0)  # sorted -1, 0, 0.6, 0.7071: torch's median is the lower middle one
    assert top == pytest.approx(0.6 + 0.1071 * 0.997, abs=1e-3)  # 0.999 of the way: index 2.997 of 0..3
    with pytest.raises(ValueError, match=r"share=1\.5"):
        s.background(0, share=1.5)


def test_narrate_neighbours_judges_against_the_querys_own_background_first():
    from inferlab.narrate import n02
    # the stored run's case: ' king' scores 0.00 with a random token, random pairs of others 0.78 (99th pct 0.99)
    low = n02.neighbours(" king", [0.57, 0.3], [" day", " x"], [0.21, 0.2], 0.78, 0.99, 0.0, 0.4)
    assert low.startswith("Against its own background: ' king' has median cosine 0.00")
    assert "**1 of its 2 neighbours score above that** (best 0.57): [' day']" in low  # 0.57 > its own top 0.4
    assert "1 of 2 beat the score at their rank" in low  # 0.57 - 0.21 > 0.1
    assert "at least 1% of random pairs point in almost the same direction" in low  # why 0.99: explained
    assert "' king' is not in that crowd (its own median is 0.00, against 0.78" in low
    assert "typical random pair" not in low  # never judged against a yardstick that does not apply to it
    none = n02.neighbours(" king", [0.5, 0.3], [" day", " x"], [0.45, 0.2], 0.3, 0.8, 0.25, 0.6)
    assert "**None of its 2 neighbours scores above that** (best 0.50)" in none and "Nor does any neighbour" in none
    assert "narrow cone" not in none and "not in that crowd" not in none  # 99th pct 0.8; the query leans like the rest


def test_narrate_shared_rows_both_branches():
    from inferlab.narrate import n02
    high = n02.shared_rows(31_075, 50_257, 0.76)
    assert "**31,075**" in high and "62%" in high and "lean the same way" in high
    low = n02.shared_rows(0, 50_257, 0.02)
    assert "No row is a shared copy" in low and "Near zero" in low


def test_narrate_embedding_findings_both_branches():
    from inferlab.narrate import n02
    assert "more than twice as long" in n02.row_strips(5, 160, 0.56, 2.34, 0.648)
    assert "direction of the row" in n02.row_strips(5, 160, 1.0, 1.5, 0.3)
    assert "**do** have smooth" in n02.position_smoothness(0.30, -0.01, 0.0, 0.0, 100)
    assert "gives 0.00 and 0.00" in n02.position_smoothness(0.30, -0.01, -0.001, -0.004, 100)  # never "-0.00"
    assert "little smooth structure" in n02.position_smoothness(0.05, 0.0, 0.0, 0.0, 100)
    assert "token part is larger" in n02.token_vs_position(1.09, 0.68)
    assert "as large or larger" in n02.token_vs_position(0.5, 0.68)
    table = n02.cohesion({"family": (0.64, 0.18), "days": (0.83, 0.74)})
    assert "| family | 0.64 | 0.18 | +0.46 |" in table and table.endswith("**family**.")
    assert "No group is clearly above" in n02.cohesion({"days": (0.83, 0.74)})
    assert "keeps 36% of these words' variance" in n02.projection(0.36)

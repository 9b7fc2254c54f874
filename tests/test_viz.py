"""Bad input to the plot helpers (viz) and the explorer widgets (widgets): each is refused where it enters,
with a message naming the argument, the value and the rule; legal calls keep drawing what they drew.

These rows go beyond tests/bad_input_cases.py (which covers the arguments the table's coverage rule asks for):
wrong container types, empty sizes, repeated control values, mismatched lengths, render functions that
cannot take the controls, and values outside the live sliders' ranges.
"""
import io

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt                                    # noqa: E402
import numpy as np                                                 # noqa: E402
import pytest                                                      # noqa: E402
import torch                                                       # noqa: E402
from PIL import Image                                              # noqa: E402

from transformer_lit import scaling, viz, widgets                  # noqa: E402


def _png():
    buf = io.BytesIO(); Image.new("RGB", (1, 1)).save(buf, format="PNG"); return buf.getvalue()
PNG = _png()


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def ex():
    return scaling.ScalingExplorer(n_keys=4, n_queries=8, max_d_k=16)


CAUSAL = torch.tensor([[[[1.0, 0.0], [0.25, 0.75]]]])                     # (layers=1, H=1, T=2, T=2)
def ae(**kw):
    "A one-text AttentionExplorer with `kw` replacing its arguments."
    return viz.AttentionExplorer(**({"tokens": [["a", "b"]], "maps": [CAUSAL]} | kw))


def fp(**kw):
    "A two-frame FramePlayer with `kw` replacing its arguments."
    return viz.FramePlayer(**({"controls": {"a": [1, 2]}, "render": lambda a: PNG} | kw))


M = torch.zeros(2, 2)
VIZ_ROWS = [
    # (id, call, exception, exact words)
    ("heatmap.weights.str", lambda: viz.attention_heatmap("abc"), TypeError, "weights must be a tensor or array of numbers"),
    ("heatmap.weights.empty", lambda: viz.attention_heatmap(torch.zeros(0, 3)), ValueError,
     "weights.shape=(0, 3) must have at least one row and one column"),
    ("heatmap.q_labels.int", lambda: viz.attention_heatmap(M, q_labels=3), TypeError, "q_labels=3 must be a list or tuple of labels"),
    ("heatmap.k_labels.str", lambda: viz.attention_heatmap(M, k_labels="ab"), TypeError, "k_labels='ab' must be a list or tuple"),
    ("heatmap.annotate.int", lambda: viz.attention_heatmap(M, annotate=1), TypeError, "annotate=1 must be a bool"),
    ("heatmap.colorbar.none", lambda: viz.attention_heatmap(M, colorbar=None), TypeError, "colorbar=None must be a bool"),
    ("grid.maps.int", lambda: viz.heatmap_grid(3), TypeError, "maps=3 must be a tensor (N, Lq, Lk) or a list"),
    ("grid.maps.rank2", lambda: viz.heatmap_grid(M), ValueError, "maps.ndim=2 must be 3: (N, Lq, Lk)"),
    ("grid.maps.item_rank1", lambda: viz.heatmap_grid([M, torch.zeros(2)]), ValueError, "maps[1].ndim=1 must be 2"),
    ("grid.maps.item_empty", lambda: viz.heatmap_grid([torch.zeros(0, 2)]), ValueError, "maps[0].shape=(0, 2) must have at least one row"),
    ("grid.ncols.zero", lambda: viz.heatmap_grid([M, M], ncols=0), ValueError, "ncols=0 must be a positive int or None"),
    ("grid.ncols.float", lambda: viz.heatmap_grid([M, M], ncols=1.5), TypeError, "ncols=1.5 must be a positive int or None"),
    ("grid.size.zero", lambda: viz.heatmap_grid([M], size=0), ValueError, "size=0 must be a finite number > 0"),
    ("grid.size.nan", lambda: viz.heatmap_grid([M], size=float("nan")), ValueError, "size=nan must be a finite number > 0"),
    ("grid.size.str", lambda: viz.heatmap_grid([M], size="big"), TypeError, "size='big' must be a finite number > 0"),
    ("grid.titles.str", lambda: viz.heatmap_grid([M, M], titles="ab"), TypeError, "titles='ab' must be a list or tuple of titles"),
    ("grid.q_labels.second_map", lambda: viz.heatmap_grid([M, torch.zeros(3, 2)], q_labels=["a", "b"]), ValueError,
     "len(q_labels)=2 must equal 3, maps[1]'s rows"),
    ("grid.shared_scale.str", lambda: viz.heatmap_grid([M], shared_scale="yes"), TypeError, "shared_scale='yes' must be a bool"),
    ("player.controls.list", lambda: viz.FramePlayer([("a", [1])], lambda a: PNG), TypeError, "controls=[('a', [1])] must be a non-empty dict"),
    ("player.controls.name_int", lambda: viz.FramePlayer({1: [1]}, lambda **s: PNG), TypeError, "controls has the name 1"),
    ("player.controls.values_int", lambda: viz.FramePlayer({"a": 3}, lambda a: PNG), TypeError, "controls['a']=3 must be a sequence of values"),
    ("player.controls.values_str", lambda: viz.FramePlayer({"a": "xy"}, lambda a: PNG), TypeError, "controls['a']='xy' must be a sequence"),
    ("player.controls.repeat", lambda: viz.FramePlayer({"a": [1, 2, 1.0]}, lambda a: PNG), ValueError,
     "controls['a']=(1, 2, 1.0) repeats the value 1.0"),
    ("player.render.keywords", lambda: fp(render=lambda b: PNG), TypeError, "render must take every control as a keyword (a)"),
    ("player.caption.keywords", lambda: fp(caption=lambda: ""), TypeError, "caption must take every control as a keyword (a)"),
    ("player.caption.returns_int", lambda: fp(caption=lambda a: 3), TypeError, "caption returned int: it must return an HTML string"),
    ("player.value.list", lambda: fp(value=[1]), TypeError, "value=[1] must be a dict"),
    ("player.labels.list", lambda: fp(labels=["x"]), TypeError, "labels=['x'] must be a dict"),
    ("player.labels.int", lambda: fp(labels={"a": 3}), TypeError, "labels['a']=3 must be a str"),
    ("player.width.negative", lambda: fp(width=-3), ValueError, "width=-3 must be a positive int or None"),
    ("player.width.css", lambda: fp(width="100px"), TypeError, "width='100px' must be a positive int or None"),
    ("player.dpi.zero", lambda: fp(dpi=0), ValueError, "dpi=0 must be a finite number > 0 or None"),
    ("player.colors.zero", lambda: fp(colors=0), ValueError, "colors=0 must be an int in [1, 256] or None"),
    ("player.colors.above_palette", lambda: fp(colors=1000), ValueError, "colors=1000 must be an int in [1, 256] or None"),
    ("explorer.tokens.str", lambda: ae(tokens="ab"), TypeError, "tokens='ab' must be a non-empty list with one list of token strings per text"),
    ("explorer.tokens.empty_text", lambda: ae(tokens=[[]]), TypeError, "tokens[0]=[] must be a non-empty list of str"),
    ("explorer.tokens.ints", lambda: ae(tokens=[[1, 2]]), TypeError, "tokens[0]=[1, 2] must be a non-empty list of str"),
    ("explorer.maps.tensor", lambda: ae(maps=CAUSAL), TypeError, "maps must be a list with one (layers, H, T, T) tensor per text, got Tensor"),
    ("explorer.maps.count", lambda: ae(maps=[CAUSAL, CAUSAL]), ValueError, "len(maps)=2 must equal len(tokens)=1"),
    ("explorer.maps.rank3", lambda: ae(maps=[CAUSAL[0]]), ValueError, "maps[0].shape=(1, 2, 2) must be (layers, H, 2, 2)"),
    ("explorer.maps.heads_differ", lambda: ae(tokens=[["a", "b"], ["a", "b"]], maps=[CAUSAL, CAUSAL.repeat(1, 2, 1, 1)]), ValueError,
     "maps[1].shape=(1, 2, 2, 2) must have the layers and heads of maps[0], (1, 1)"),
    ("explorer.maps.scores", lambda: ae(maps=[CAUSAL - 1]), ValueError, "maps[0] must hold attention weights in [0, 1]; its values span [-1, 0]"),
    ("explorer.maps.nan", lambda: ae(maps=[CAUSAL * float("nan")]), ValueError, "maps[0] must hold attention weights in [0, 1]; it holds NaN or inf"),
    ("explorer.caption.str", lambda: ae(caption="c"), TypeError, "caption='c' must be a callable caption(text=, layer=, head=)"),
    ("explorer.caption.keywords", lambda: ae(caption=lambda t: "c"), TypeError, "caption must take every control as a keyword (text, layer, head)"),
    ("explorer.value.list", lambda: ae(value=[0, 0, 0]), TypeError, "value=[0, 0, 0] must be a tuple (text, layer, head)"),
    ("explorer.value.head", lambda: ae(value=(0, 0, 1)), ValueError, "value[2]=1 must be an int in [0, 0]"),
    ("explorer.scale.zero", lambda: ae(scale=0), ValueError, "scale=0 must be a positive int"),
    ("explorer.scale.float", lambda: ae(scale=1e3), TypeError, "scale=1000.0 must be a positive int"),
    ("explorer.cell.small", lambda: ae(cell=2), ValueError, "cell=2 must be an int >= 4"),
    ("explorer.cmap.unknown", lambda: ae(cmap="nope"), ValueError, "cmap='nope' must be the name of a matplotlib colour map"),
    ("explorer.weights.layer", lambda: ae().weights(0, 1, 0), ValueError, "layer=1 must be an int in [0, 0]"),
    ("explorer.weights.text", lambda: ae().weights(-1, 0, 0), ValueError, "text=-1 must be an int in [0, 0]"),
]


@pytest.mark.parametrize("call,exc,words", [r[1:] for r in VIZ_ROWS], ids=[r[0] for r in VIZ_ROWS])
def test_viz_bad_input(call, exc, words):
    with pytest.raises(exc) as e: call()
    assert words in str(e.value)


WIDGET_ROWS = [
    ("curves.d_ks.str", lambda ex: widgets.jacobian_curves(ex, d_ks="ab"), TypeError, "d_ks='ab' must be a list or tuple"),
    ("curves.d_ks.empty", lambda ex: widgets.jacobian_curves(ex, d_ks=()), ValueError, "d_ks=() is empty"),
    ("curves.d_ks.repeat", lambda ex: widgets.jacobian_curves(ex, d_ks=(2, 2)), ValueError, "d_ks=(2, 2) repeats the value 2"),
    ("curves.d_ks.above_max", lambda ex: widgets.jacobian_curves(ex, d_ks=(32, 64)), ValueError,
     "d_ks=(32, 64) has no d_k <= max_d_k=16: nothing to draw"),
    ("curves.seed.str", lambda ex: widgets.jacobian_curves(ex, seed="0", d_ks=(2,)), TypeError, "seed='0' must be an int >= 0"),
    ("plot.axes.two", lambda ex: widgets.ExplorerPlot(plt.subplots(1, 2)[1]), ValueError, "len(axes)=2 must be 3"),
    ("plot.axes.int", lambda ex: widgets.ExplorerPlot(3), TypeError, "axes=3 must be a sequence of 3 matplotlib axes"),
    ("plot.n_keys.one", lambda ex: widgets.ExplorerPlot(plt.subplots(1, 3)[1], n_keys=1), ValueError, "n_keys=1 must be an int >= 2"),
    ("plot.bins.zero", lambda ex: widgets.ExplorerPlot(plt.subplots(1, 3)[1], bins=0), ValueError, "bins=0 must be a positive int"),
    ("plot.max_d_k.zero", lambda ex: widgets.ExplorerPlot(plt.subplots(1, 3)[1], max_d_k=0), ValueError, "max_d_k=0 must be a positive int"),
    ("show.view.str", lambda ex: widgets.explorer_figure(ex)[1].show("v"), TypeError, "view='v' must be an ExplorerView"),
    ("show.view.other_n_keys",
     lambda ex: widgets.explorer_figure(ex)[1].show(scaling.ScalingExplorer(n_keys=5, n_queries=4, max_d_k=8)(2)), ValueError,
     "view.probs.shape[-1]=5 must equal n_keys=4"),
    ("show.curves.list", lambda ex: widgets.explorer_figure(ex)[1].show(ex(2), [1, 2]), TypeError,
     "curves=[1, 2] must be a dict with the keys 'd_k', False and True"),
    ("show.curves.lengths", lambda ex: widgets.explorer_figure(ex)[1].show(ex(2), {"d_k": [1, 2], False: [1], True: [1, 2]}),
     ValueError, "len(curves['d_k'])=2, len(curves[False])=1, len(curves[True])=2: they must be equal"),
    ("figure.dpi.negative", lambda ex: widgets.explorer_figure(ex, dpi=-1), ValueError, "dpi=-1 must be a finite number > 0"),
    ("figure.explorer.none", lambda ex: widgets.explorer_figure(None), TypeError, "explorer=None must be a ScalingExplorer, got NoneType"),
    ("ui.explorer.str", lambda ex: widgets.ExplorerUI("e"), TypeError, "explorer='e' must be a ScalingExplorer or None, got str"),
    ("ui.d_k.zero", lambda ex: widgets.ExplorerUI(ex, d_k=0), ValueError, "d_k=0 must be a positive int"),
    ("ui.scaled.int", lambda ex: widgets.ExplorerUI(ex, scaled=1), TypeError, "scaled=1 must be a bool"),
    ("ui.temperature.beyond_slider", lambda ex: widgets.ExplorerUI(ex, temperature=100.0), ValueError,
     "temperature=100.0 must be in [0.1, 10], the temperature slider's range"),
    ("ui.seed.beyond_slider", lambda ex: widgets.ExplorerUI(ex, seed=9), ValueError, "seed=9 must be an int in [0, 7]"),
    ("ui.dpi.zero", lambda ex: widgets.ExplorerUI(ex, dpi=0), ValueError, "dpi=0 must be a finite number > 0"),
    ("player.d_ks.empty", lambda ex: widgets.explorer_player(ex, d_ks=()), ValueError, "d_ks=() is empty"),
    ("player.d_ks.str", lambda ex: widgets.explorer_player(ex, d_ks="4"), TypeError, "d_ks='4' must be a list or tuple"),
    ("player.d_ks.repeat", lambda ex: widgets.explorer_player(ex, d_ks=(2, 2)), ValueError, "d_ks=(2, 2) repeats the value 2"),
    ("player.d_ks.above_max", lambda ex: widgets.explorer_player(ex, d_ks=(2, 32)), ValueError, "d_k=32 in d_ks must be <= max_d_k=16"),
    ("player.scaled.int", lambda ex: widgets.explorer_player(ex, d_ks=(2,), scaled=(1,)), TypeError, "scaled=1 must be a bool"),
    ("player.scaled.empty", lambda ex: widgets.explorer_player(ex, d_ks=(2,), scaled=()), ValueError, "scaled=() is empty"),
    ("player.temperatures.float", lambda ex: widgets.explorer_player(ex, d_ks=(2,), temperatures=1.0), TypeError,
     "temperatures=1.0 must be a list or tuple"),
    ("player.temperatures.negative", lambda ex: widgets.explorer_player(ex, d_ks=(2,), temperatures=(1.0, -1.0)), ValueError,
     "temperature=-1.0 must be a finite number > 0"),
    ("player.seed.str", lambda ex: widgets.explorer_player(ex, d_ks=(2,), seed="0"), TypeError, "seed='0' must be an int >= 0"),
    ("player.value.list", lambda ex: widgets.explorer_player(ex, d_ks=(2,), value=[1]), TypeError, "value=[1] must be a dict"),
    ("player.dpi.zero", lambda ex: widgets.explorer_player(ex, d_ks=(2,), dpi=0), ValueError, "dpi=0 must be a finite number > 0"),
]


@pytest.mark.parametrize("call,exc,words", [r[1:] for r in WIDGET_ROWS], ids=[r[0] for r in WIDGET_ROWS])
def test_widgets_bad_input(ex, call, exc, words):
    with pytest.raises(exc) as e: call(ex)
    assert words in str(e.value)


def test_bad_grid_draws_no_figure():
    "heatmap_grid checks every argument before it makes a figure: a refused call leaves none open."
    plt.close("all")
    with pytest.raises(ValueError, match=r"len\(q_labels\)=2 must equal 3"):
        viz.heatmap_grid([M, torch.zeros(3, 2)], q_labels=["a", "b"])
    assert plt.get_fignums() == []


def test_player_checks_before_drawing():
    "FramePlayer refuses a bad argument before it renders a single frame."
    calls = []
    def render(a): calls.append(a); return PNG
    with pytest.raises(ValueError, match="colors=0"): viz.FramePlayer({"a": [1, 2]}, render, colors=0)
    assert calls == []


def test_legal_calls_still_work(ex):
    "Legal edge cases: a 1x1 map, ncols above the number of maps, one-value controls, keyword-only render functions."
    assert viz.attention_heatmap(np.ones((1, 1))).images[0].get_array().shape == (1, 1)
    fig = viz.heatmap_grid(torch.rand(2, 3, 3), ncols=3)
    assert len(fig.axes) == 4                                        # 3 panels (one empty) and the shared colour bar
    p = viz.FramePlayer({"a": [1, 2], "b": [False, True]}, lambda **s: PNG, caption=lambda a, b: f"{a} {b}",
                        labels={"a": "A"}, width=300, dpi=50, colors=None)
    assert len(p.frames) == 4 and p.captions[p.index(a=2, b=True)] == "2 True" and p.labels == {"a": "A", "b": "b"}
    curves = widgets.jacobian_curves(ex, d_ks=(2, 16, 64))           # d_k above max_d_k=16 is left out, as before
    assert curves["d_k"] == [2, 16] and len(curves[False]) == 2
    player = widgets.explorer_player(ex, d_ks=(2,), scaled=(True,), temperatures=(1.0,))
    assert len(player.frames) == 1 and "d_k=2</b>, scaled" in player.captions[0]


def test_duck_typed_explorer(ex):
    "A ScalingExplorer class defined again (as chapter 02 defines its own, in the notebook) is accepted: checked by what is used."
    Copy = type("ScalingExplorer", (), dict(vars(scaling.ScalingExplorer)))
    other = Copy(n_keys=4, n_queries=8, max_d_k=16)
    assert not isinstance(other, scaling.ScalingExplorer)
    assert widgets.jacobian_curves(other, d_ks=(2,))["d_k"] == [2]
    assert "d_k=2</b>" in widgets.readout_html(other(2))


def test_grid_scale_ignores_masked_scores():
    "Scores with -inf (masked) share a finite colour range: the lowest finite value and the highest, never a NaN scale."
    s = torch.tensor([[0.5, -float("inf")], [0.2, 0.3]])
    fig = viz.heatmap_grid([s, 2 * s])
    norm = fig.axes[0].images[0].norm
    assert (norm.vmin, norm.vmax) == (0.0, 1.0)
    buf = io.BytesIO(); fig.savefig(buf, format="png"); assert buf.getvalue()[:4] == b"\x89PNG"


# -- draw_module / module_graph: the drawn graph is the traced one -----------------------------------------------
from transformer_lit.blocks import EncoderBlock, DecoderOnlyBlock   # noqa: E402


def _into_plus(g):
    "For each residual '+' node, the sorted labels of the nodes feeding it."
    return [sorted(g.node(s).label for s, d in g.edges if d == n.id) for n in g.by_label("+")]


def test_module_graph_pre_vs_post_norm():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8)
    pre = viz.module_graph(EncoderBlock(8, 2, 16, norm_first=True, backend="sdpa"), x, depth=2)
    post = viz.module_graph(EncoderBlock(8, 2, 16, norm_first=False, backend="sdpa"), x, depth=2)
    assert _into_plus(pre) == [["self_attn.sublayer · MultiHeadAttention", "x"], ["+", "ffn.sublayer · FeedForward"]]
    assert _into_plus(post) == [["self_attn.sublayer · MultiHeadAttention", "x"], ["ffn.sublayer · FeedForward", "self_attn.norm · LayerNorm"]]
    for g in (pre, post):
        assert all(g.node(d).row > g.node(s).row for s, d in g.edges)          # every edge points down
        assert [n.kind for n in g.nodes][0] == "input" and g.nodes[-1].kind == "output"


def test_module_graph_depth_one_is_the_sublayers():
    x = torch.randn(1, 4, 8)
    g = viz.module_graph(DecoderOnlyBlock(8, 2, 16, backend="sdpa"), x, is_causal=True)
    assert [n.label for n in g.nodes] == ["x", "self_attn · Residual", "ffn · Residual", "output"]
    assert g.edges == [("l_x_", "self_attn#1"), ("self_attn#1", "ffn#1"), ("ffn#1", "output")]


def test_draw_module_draws_every_node_and_edge():
    x = torch.randn(1, 4, 8)
    block = EncoderBlock(8, 2, 16, backend="sdpa")
    g = viz.module_graph(block, x, depth=2)
    fig = viz.draw_module(block, x, depth=2)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert all(n.label in texts for n in g.nodes)
    assert all(n.shape in texts for n in g.nodes)
    assert fig.get_size_inches()[0] * fig.dpi <= 800                        # fits the site's width at its own size


def _colours(fig):
    "Box colour per drawn submodule path (the gid of each patch is its node id, 'path#call')."
    return {p.get_gid().split("#")[0]: p.get_facecolor() for ax in fig.axes for p in ax.patches if p.get_gid() and "#" in p.get_gid()}


def test_draw_module_colours_follow_the_kind_not_the_order():
    "Post-norm meets MultiHeadAttention before LayerNorm, pre-norm the other way round: the colours must not swap."
    from matplotlib.colors import to_rgba
    x = torch.randn(1, 3, 8)
    pre = _colours(viz.draw_module(EncoderBlock(8, 2, 16, norm_first=True, backend="sdpa"), x, depth=2))
    post = _colours(viz.draw_module(EncoderBlock(8, 2, 16, norm_first=False, backend="sdpa"), x, depth=2))
    assert pre == post and len(pre) == 4
    assert pre["self_attn.norm"] == pre["ffn.norm"] == to_rgba(viz.MODULE_COLOURS["norm"])
    assert pre["self_attn.sublayer"] == to_rgba(viz.MODULE_COLOURS["attention"])
    assert pre["ffn.sublayer"] == to_rgba(viz.MODULE_COLOURS["ffn"])
    assert len(set(viz.MODULE_COLOURS.values())) == len(viz.MODULE_COLOURS)          # kinds are told apart
    from transformer_lit.model import DecoderOnlyLM, TransformerConfig                 # RMSNorm is a norm too
    c = TransformerConfig(vocab_size=20, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=8, positional="rope", norm="rms",
                          activation="swiglu", bias=False, scale_embeddings=False)
    lm = _colours(viz.draw_module(DecoderOnlyLM(c), torch.randint(0, 20, (1, 4)), depth=3))
    assert lm["blocks.0.self_attn.norm"] == to_rgba(viz.MODULE_COLOURS["norm"])
    assert lm["blocks.0.ffn.sublayer"] == to_rgba(viz.MODULE_COLOURS["ffn"])          # SwiGLU is a feed-forward


def test_draw_module_sizes_the_axes_it_is_given():
    "Given axes: one unit of the drawing is one inch, the top-left corner stays, other axes keep their place in inches."
    x = torch.randn(1, 3, 8)
    fig = plt.figure(figsize=(2, 2))
    other = fig.add_axes((0.0, 0.0, 0.5, 0.25))
    ax = fig.add_axes((0.25, 0.5, 0.25, 0.25))                                      # left 0.5 in, top 0.5 in from the top
    inch_box = lambda a: (a.get_position().x0 * fig.get_figwidth(), (1 - a.get_position().y1) * fig.get_figheight(),
                          a.get_position().width * fig.get_figwidth(), a.get_position().height * fig.get_figheight())
    before = inch_box(other)
    viz.draw_module(EncoderBlock(8, 2, 16, backend="sdpa"), x, depth=2, ax=ax)
    left, top, w, h = inch_box(ax)
    assert abs(left - 0.5) < 1e-9 and abs(top - 0.5) < 1e-9
    assert abs(w - np.ptp(ax.get_xlim())) < 1e-9 and abs(h - np.ptp(ax.get_ylim())) < 1e-9
    assert fig.get_figheight() >= top + h - 1e-9 and fig.get_figwidth() >= left + w - 1e-9 and h > 2   # the figure grew
    assert np.allclose(inch_box(other), before)
    # -- a row of drawings: each new axes at the figure's top-right corner
    fig = plt.figure(figsize=(0.1, 0.1))
    for norm_first in (True, False):
        viz.draw_module(EncoderBlock(8, 2, 16, norm_first=norm_first, backend="sdpa"), x, depth=2, ax=fig.add_axes((1, 1, 0, 0)))
    a, b = fig.axes
    assert a.get_position().x1 <= b.get_position().x0 + 1e-9 and abs(a.get_position().y1 - 1) < 1e-9 and abs(b.get_position().y1 - 1) < 1e-9


def _causal(T, L=2, H=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(L, H, T, T, generator=g).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return s.softmax(-1)


def test_attention_explorer_stores_the_weights_rounded():
    import json, re
    toks = [list("a b\nc"), list("xy")]
    maps = [_causal(5), _causal(2, seed=1)]
    full = torch.rand(2, 3, 2, 2); full = full / full.sum(-1, keepdim=True)         # not causal: rows keep every column
    for scale in (1000, 100):
        e = viz.AttentionExplorer(toks, maps, scale=scale, value=(1, 1, 2))
        for t, m in enumerate(maps):
            T = len(toks[t])
            for l in range(2):
                for h in range(3):
                    w = e.weights(t, l, h)
                    assert np.abs(w - m[l, h].numpy()).max() <= 0.5 / scale + 1e-12
                    assert np.abs(w.sum(-1) - 1).max() <= T * 0.5 / scale + 1e-12
                    assert not np.triu(w, 1).any()
                    assert all(len(r) <= i + 1 and (not r or r[-1] != 0) for i, r in enumerate(e.maps[t][l][h]))
        data = json.loads(re.search(r'<script type="application/json" class="tla-data">(.*?)</script>', e.html(), re.S).group(1).replace("<\\/", "</"))
        assert data["maps"] == e.maps and data["scale"] == scale
        assert data["labels"][0] == ["a", "\u2423", "b", "\u21b5", "c"]                 # a space and a newline drawn visibly
        assert 'data-axis="2" min="0" max="2" step="1" value="2"' in e.html()           # the setting shown first
    e = viz.AttentionExplorer([["p", "q"]], [full])
    assert np.abs(e.weights(0, 1, 2) - full[1, 2].numpy()).max() <= 0.0005 + 1e-12
    zero = viz.AttentionExplorer([["p", "q"]], [torch.zeros(1, 1, 2, 2)])             # a fully masked row: all zeros, stored empty
    assert zero.maps[0][0][0] == [[], []] and not zero.weights(0, 0, 0).any()
    assert "</script>" not in viz.AttentionExplorer([["</", "script>"]], [torch.eye(2)[None, None]]).html().split('class="tla-data">')[1].split("</script>")[0]


# ---------------------------------------------------------------------------------------------
# Same content, same bytes: a re-run that computes the same pictures writes the same player


def _chunks(png):
    "The chunk types of a PNG file, in order."
    import struct
    out, i = [], 8
    while i < len(png):
        n, = struct.unpack(">I", png[i:i + 4]); out.append(png[i + 4:i + 8].decode()); i += 12 + n
    return out


def _bars(n, colour="C0"):
    from matplotlib.figure import Figure
    fig = Figure(figsize=(2, 1), dpi=50)
    fig.subplots().bar(range(n), range(1, n + 1), color=colour)
    return fig


def test_frames_are_the_same_bytes_for_the_same_picture():
    """Two figures drawn alike encode to the same PNG bytes, and the bytes name no matplotlib version (no tEXt
    Software chunk), so the same picture gives the same frame under another matplotlib release too."""
    a, b = viz._png_bytes(_bars(3)), viz._png_bytes(_bars(3))
    assert a == b and a[:8] == b"\x89PNG\r\n\x1a\n"
    assert "tEXt" not in _chunks(a) and b"Software" not in a and b"Matplotlib" not in a
    assert viz._png_bytes(_bars(4)) != a                                   # a different picture, different bytes


def test_the_same_frames_in_another_process_give_the_same_player(tmp_path):
    "A player built in a fresh Python process from the same render function is the same HTML, byte for byte."
    import subprocess, sys
    code = ("import matplotlib; matplotlib.use('Agg'); from matplotlib.figure import Figure\n"
            "from transformer_lit.viz import FramePlayer\n"
            "def bars(n):\n    fig = Figure(figsize=(2, 1), dpi=50)\n    fig.subplots().bar(range(n), range(1, n + 1), color='C0')\n    return fig\n"
            "import sys; sys.stdout.write(FramePlayer({'n': [1, 2, 3]}, bars).html())")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert other == viz.FramePlayer({"n": [1, 2, 3]}, _bars).html()


def test_player_ids_follow_the_content():
    """The element id a player's script finds itself by is derived from its frames and captions: the same content
    gives the same id (no fresh id per run for git to see), a different frame or caption a different one."""
    import re
    ident = lambda p: re.search(r'class="tl-player" id="(tlp-[0-9a-f]+)"', p.html()).group(1)
    base = viz.FramePlayer({"n": [1, 2, 3]}, _bars)
    assert ident(base) == ident(viz.FramePlayer({"n": [1, 2, 3]}, _bars))
    assert ident(base) != ident(viz.FramePlayer({"n": [1, 2, 3]}, lambda n: _bars(n, "C3")))
    assert ident(base) != ident(viz.FramePlayer({"n": [1, 2, 3]}, _bars, caption=lambda n: f"{n} bars"))
    script = base.html().split("<script>", 1)[-1] if "<script>" in base.html() else base.html().rsplit("<script", 1)[-1]
    assert ident(base) in script                                               # the script finds its player by that id

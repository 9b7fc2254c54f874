"""Tests for transformer_lit.scaling (variance of q·k, softmax saturation measures, the explorer's logic) and its widgets."""
import math
import re
import pytest
import torch
from hypothesis import given, strategies as st

from transformer_lit import scaling
from transformer_lit.scaling import (ExplorerView, ScalingExplorer, dot_product_variance, dot_product_variance_se,
                                     saturation_metrics, softmax_entropy, softmax_jacobian, softmax_jacobian_norm)
from transformer_lit.widgets import DK_STEPS, ExplorerUI, explorer_figure, explorer_player, jacobian_curves
from transformer_lit.attention import scaled_dot_product_attention

F64 = torch.float64


@pytest.fixture(scope="module")
def ex():
    return ScalingExplorer()


def score_rows(min_n=1, max_n=24):
    "Hypothesis strategy: a float64 tensor (rows, n) of scores with a random spread (up to saturation)."
    return st.tuples(st.integers(1, 4), st.integers(min_n, max_n), st.floats(0.0, 60.0), st.integers(0, 2**16)).map(
        lambda t: torch.randn(t[0], t[1], generator=torch.Generator().manual_seed(t[3]), dtype=F64) * t[2])


# ---------------------------------------------------------------- Var(q·k) = d_k
@pytest.mark.parametrize("d_k", [1, 3, 16, 64, 256, 1024])
def test_variance_matches_d_k(d_k):
    v = dot_product_variance(d_k, n_samples=4096, seed=1)
    assert abs(v - d_k) < 4 * dot_product_variance_se(d_k, 4096)
    vs = dot_product_variance(d_k, n_samples=4096, scaled=True, seed=2)
    assert abs(vs - 1) < 4 * dot_product_variance_se(d_k, 4096) / d_k


def test_variance_standard_error_is_calibrated():
    # z-scores of independent estimates have standard deviation ~1 if the SE formula d_k·sqrt((2+6/d_k)/N) is right
    for d_k in (1, 16):
        z = torch.tensor([(dot_product_variance(d_k, 1024, seed=s) - d_k) / dot_product_variance_se(d_k, 1024)
                          for s in range(40)])
        assert 0.6 < z.std().item() < 1.45, (d_k, z.std().item())
        assert abs(z.mean().item()) < 0.6


def test_variance_is_seeded():
    assert dot_product_variance(32, 512, seed=5) == dot_product_variance(32, 512, seed=5)
    assert dot_product_variance(32, 512, seed=5) != dot_product_variance(32, 512, seed=6)


# ---------------------------------------------------------------- the three measures
@given(score_rows())
def test_jacobian_equals_autograd(s):
    p = torch.softmax(s, -1)
    J = torch.func.vmap(torch.func.jacrev(lambda x: torch.softmax(x, -1)))(s)   # (rows, n, n), reverse-mode autograd per row
    torch.testing.assert_close(softmax_jacobian(p), J, atol=1e-12, rtol=0)


@given(score_rows())
def test_jacobian_norm_closed_form_equals_matrix_norm(s):
    p = torch.softmax(s, -1)
    # the O(n) form adds only non-negative terms, so it keeps its relative precision even near one-hot
    torch.testing.assert_close(softmax_jacobian_norm(p), torch.linalg.matrix_norm(softmax_jacobian(p)), atol=1e-15, rtol=1e-9)


def test_jacobian_norm_keeps_precision_in_float32():
    for gap in (6.0, 9.0, 12.0):                                     # 1 - max p from ~1e-2 down to ~1e-5
        s = torch.tensor([[gap, 0.0, 0.5, -1.0, 0.2], [0.3, gap, -2.0, 1.0, 0.0]])
        ref = softmax_jacobian_norm(torch.softmax(s.double(), -1))
        got = softmax_jacobian_norm(torch.softmax(s, -1)).double()
        torch.testing.assert_close(got, ref, atol=0, rtol=1e-5)


@given(score_rows())
def test_measures_stay_in_their_ranges(s):
    n = s.shape[-1]
    m = saturation_metrics(s)
    assert (m["max_prob"] >= 1 / n - 1e-12).all() and (m["max_prob"] <= 1).all()
    assert (m["entropy"] >= -1e-12).all() and (m["entropy"] <= math.log(n) + 1e-12).all()
    assert (m["jacobian_norm"] >= 0).all() and (m["jacobian_norm"] <= 0.5 + 1e-12).all()  # max 1/2 at a two-way split
    torch.testing.assert_close(m["probs"], torch.softmax(s, -1), atol=1e-15, rtol=0)


@given(score_rows(min_n=2))
def test_entropy_equals_torch_categorical(s):
    p = torch.softmax(s, -1)
    ref = torch.distributions.Categorical(probs=p).entropy()
    torch.testing.assert_close(softmax_entropy(p), ref, atol=1e-12, rtol=0)


@given(score_rows(min_n=2), st.floats(0.05, 20.0), st.floats(1.01, 5.0))
def test_higher_temperature_never_raises_max_prob(s, tau, factor):
    lo, hi = saturation_metrics(s, tau), saturation_metrics(s, tau * factor)
    assert (hi["max_prob"] <= lo["max_prob"] + 1e-12).all()
    assert (hi["entropy"] >= lo["entropy"] - 1e-12).all()


def test_known_values():
    n = 16
    uniform = torch.full((n,), 1 / n, dtype=F64)
    onehot = torch.eye(n, dtype=F64)[3]
    assert softmax_entropy(uniform).item() == pytest.approx(math.log(n), abs=1e-14)
    assert softmax_entropy(onehot).item() == 0
    assert softmax_jacobian_norm(uniform).item() == pytest.approx(math.sqrt(n - 1) / n, abs=1e-14)
    assert softmax_jacobian_norm(onehot).item() == 0
    assert softmax_jacobian_norm(torch.tensor([0.5, 0.5, 0.0], dtype=F64)).item() == pytest.approx(0.5, abs=1e-15)
    m = saturation_metrics(torch.tensor([2.0, 0.0], dtype=F64), temperature=2.0)   # softmax([1, 0])
    assert m["max_prob"].item() == pytest.approx(math.e / (math.e + 1), abs=1e-15)


def test_gradcheck_measures():
    p = torch.softmax(torch.randn(3, 6, dtype=F64, generator=torch.Generator().manual_seed(0)), -1).requires_grad_()
    assert torch.autograd.gradcheck(softmax_jacobian_norm, (p,))
    assert torch.autograd.gradcheck(softmax_entropy, (p,))
    assert torch.autograd.gradcheck(softmax_jacobian, (p,))
    s = torch.randn(2, 5, dtype=F64, generator=torch.Generator().manual_seed(1), requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: saturation_metrics(x, 1.7)["jacobian_norm"], (s,))


@pytest.mark.parametrize("dtype,expected", [(torch.float16, torch.float32), (torch.bfloat16, torch.float32),
                                            (torch.float32, torch.float32), (F64, F64)])
def test_statistics_in_at_least_float32(dtype, expected):
    s = (torch.randn(4, 8, generator=torch.Generator().manual_seed(0)) * 3).to(dtype)
    m = saturation_metrics(s)
    assert all(v.dtype == expected for v in m.values())
    torch.testing.assert_close(m["probs"], torch.softmax(s.to(expected), -1))


def test_float16_exp_overflows_past_ln_max():
    fmax = torch.finfo(torch.float16).max
    assert fmax == 65504
    assert torch.exp(torch.tensor(11.08, dtype=torch.float16)).isfinite()
    assert torch.exp(torch.tensor(11.1, dtype=torch.float16)).isinf()
    assert math.log(fmax) == pytest.approx(11.0898664885, abs=1e-9)


# ---------------------------------------------------------------- the explorer's logic
def test_scores_are_prefix_dot_products(ex):
    q, k = ex.draws(4)
    for d in (1, 7, 113, 1024):
        torch.testing.assert_close(ex.scores(d, scaled=False, seed=4), q[:, :d] @ k[:, :d].T, atol=0, rtol=0)
        torch.testing.assert_close(ex.scores(d, scaled=True, temperature=0.5, seed=4),
                                   q[:, :d] @ k[:, :d].T / math.sqrt(d) / 0.5, atol=1e-12, rtol=1e-12)


def test_view_equals_attention_weights(ex):
    # the explorer's probabilities are chapter 00's attention weights (and torch's softmax) for the same q and k
    q, k = ex.draws(0)
    for d, tau in ((1, 1.0), (40, 0.3), (1024, 2.0)):
        qd, kd = q[None, None, :, :d], k[None, None, :, :d]                   # (1, 1, 256, d), (1, 1, 16, d)
        v = torch.zeros(1, 1, 16, 1, dtype=F64)                                 # (1, 1, 16, 1)
        _, w = scaled_dot_product_attention(qd, kd, v, scale=1 / (tau * math.sqrt(d)), return_weights=True)
        view = ex(d, scaled=True, temperature=tau)
        torch.testing.assert_close(view.probs, w[0, 0], atol=1e-12, rtol=0)
        ref = torch.softmax((q[:, :d] @ k[:, :d].T) / (tau * math.sqrt(d)), -1)
        torch.testing.assert_close(view.probs, ref, atol=1e-14, rtol=0)


def test_temperature_sqrt_d_k_equals_scaling(ex):
    for d in (4, 64, 1024):
        torch.testing.assert_close(ex(d, scaled=False, temperature=math.sqrt(d)).probs, ex(d, scaled=True).probs,
                                   atol=1e-12, rtol=0)


def test_view_fields(ex):
    v = ex(64, scaled=False, temperature=1.5, seed=2)
    assert isinstance(v, ExplorerView)
    assert (v.d_k, v.scaled, v.temperature, v.seed) == (64, False, 1.5, 2)
    assert v.scores.shape == v.probs.shape == (256, 16)
    m = saturation_metrics(v.scores)
    assert v.max_prob == pytest.approx(m["max_prob"].mean().item(), abs=1e-15)
    assert v.entropy == pytest.approx(m["entropy"].mean().item(), abs=1e-15)
    assert v.jacobian_norm == pytest.approx(m["jacobian_norm"].mean().item(), abs=1e-15)


def test_curve_equals_views(ex):
    c = ex.curve([1, 8, 300], scaled=False, temperature=0.7, seed=1)
    for name in ("max_prob", "entropy", "jacobian_norm"):
        assert c[name].tolist() == pytest.approx([getattr(ex(d, False, 0.7, 1), name) for d in (1, 8, 300)], abs=1e-15)


def test_seeds_reproducible_and_distinct():
    a, b = ScalingExplorer(n_keys=8, n_queries=32, max_d_k=64), ScalingExplorer(n_keys=8, n_queries=32, max_d_k=64)
    assert torch.equal(a.scores(64, seed=3), b.scores(64, seed=3))
    assert not torch.equal(a.scores(64, seed=3), a.scores(64, seed=4))
    for s in range(12): a.draws(s)
    assert len(a._draws) <= 8            # the draws cache stays bounded
    assert torch.equal(a.scores(64, seed=0), b.scores(64, seed=0))   # an evicted seed redraws the same numbers


GRID = [1, 4, 16, 64, 256, 1024]


@pytest.fixture(scope="module")
def curves(ex):
    "Each measure against GRID, per seed 0..5: {scaled: {name: (6 seeds, len(GRID))}}."
    out = {}
    for sc in (False, True):
        per = [ex.curve(GRID, sc, seed=s) for s in range(6)]
        out[sc] = {name: torch.stack([c[name] for c in per]) for name in per[0]}
    return out


def test_unscaled_saturates_monotonically(curves):
    u = {name: v.mean(0) for name, v in curves[False].items()}    # expectation over seeds
    assert (u["max_prob"].diff() > 0).all(), u["max_prob"]
    assert (u["entropy"].diff() < 0).all(), u["entropy"]
    assert (u["jacobian_norm"][1:].diff() < 0).all(), u["jacobian_norm"]   # falls from d_k = 4 on
    assert u["max_prob"][-1] > 0.9 and u["entropy"][-1] < 0.2
    assert u["jacobian_norm"][-1] < 0.3 * u["jacobian_norm"][1]
    # large d_k: the mean gradient size falls roughly like d_k^(-1/2)
    slope = (u["jacobian_norm"][-1] / u["jacobian_norm"][-3]).log() / math.log(GRID[-1] / GRID[-3])
    assert -0.75 < slope.item() < -0.25


def test_scaled_stays_in_a_band(curves):
    s = curves[True]
    # averaged over seeds, every d_k (d_k = 1 included) sits in one band
    m = {name: v.mean(0) for name, v in s.items()}
    assert ((m["max_prob"] > 0.16) & (m["max_prob"] < 0.3)).all(), m["max_prob"]
    assert ((m["entropy"] > 2.25) & (m["entropy"] < 2.55)).all(), m["entropy"]
    assert ((m["jacobian_norm"] > 0.27) & (m["jacobian_norm"] < 0.33)).all(), m["jacobian_norm"]
    # per seed (16 keys, 256 queries) from d_k = 4 on; at d_k = 1 the score q_1 k_j1 is a product of two
    # normals and the 16 shared keys make one seed's average vary more
    t = {name: v[:, 1:] for name, v in s.items()}
    assert ((t["max_prob"] > 0.15) & (t["max_prob"] < 0.33)).all(), t["max_prob"]
    assert ((t["entropy"] > 2.2) & (t["entropy"] < 2.6)).all(), t["entropy"]
    assert ((t["jacobian_norm"] > 0.26) & (t["jacobian_norm"] < 0.34)).all(), t["jacobian_norm"]
    # averaged over seeds, the band is narrow from d_k = 4 on
    m = {name: v.mean(0)[1:] for name, v in s.items()}
    assert (m["max_prob"].max() - m["max_prob"].min()) < 0.04
    assert (m["entropy"].max() - m["entropy"].min()) < 0.1
    assert (m["jacobian_norm"].max() - m["jacobian_norm"].min()) < 0.02
    # and scaling makes the difference at large d_k
    assert curves[False]["max_prob"][:, -1].min() > 3 * s["max_prob"][:, -1].max()


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("d_k,err,msg", [(0, ValueError, "d_k=0 must be a positive int"), (-3, ValueError, "d_k=-3 must be a positive int"),
                                         (2.5, TypeError, "d_k=2.5 must be a positive int"), (64.0, TypeError, "d_k=64.0 must be a positive int"),
                                         ("64", TypeError, "d_k='64' must be a positive int"), (True, TypeError, "d_k=True must be a positive int"),
                                         (2048, ValueError, "d_k=2048 must be <= max_d_k=1024")])
def test_bad_d_k(ex, d_k, err, msg):
    with pytest.raises(err, match=f"^{re.escape(msg)}$"):
        ex(d_k)
    item = msg if d_k == 2048 else msg.replace("d_k=", "d_ks[1]=", 1)     # a list's items are checked first, named d_ks[i]
    with pytest.raises(err, match=f"^{re.escape(item)}$"):
        ex.curve([4, d_k])
    if d_k != 2048:
        with pytest.raises(err, match=f"^{re.escape(msg)}$"):
            dot_product_variance(d_k)


@pytest.mark.parametrize("tau,msg,exc", [(0, "temperature=0 must be a finite number > 0", ValueError),
                                         (-1.0, "temperature=-1.0 must be a finite number > 0", ValueError),
                                         (float("nan"), "temperature=nan must be a finite number > 0", ValueError),
                                         (float("inf"), "temperature=inf must be a finite number > 0", ValueError),
                                         (False, "temperature=False must be a finite number > 0", TypeError),   # a bool is not a number
                                         ("1", "temperature='1' must be a finite number > 0", TypeError)])
def test_bad_temperature(ex, tau, msg, exc):
    with pytest.raises(exc, match=f"^{re.escape(msg)}$"):
        ex(16, temperature=tau)
    with pytest.raises(exc, match=f"^{re.escape(msg)}$"):
        saturation_metrics(torch.zeros(2, 3), temperature=tau)


def test_bad_sizes_and_seed(ex):
    with pytest.raises(ValueError, match=r"^n_keys=1 must be an int >= 2$"):
        ScalingExplorer(n_keys=1)
    with pytest.raises(ValueError, match=r"^n_queries=0 must be a positive int$"):
        ScalingExplorer(n_queries=0)
    with pytest.raises(TypeError, match=r"^max_d_k=0.5 must be a positive int$"):
        ScalingExplorer(max_d_k=0.5)
    with pytest.raises(ValueError, match=r"^seed=-1 must be an int >= 0$"):
        ex(16, seed=-1)
    with pytest.raises(ValueError, match=r"^n_samples=1 must be an int >= 2$"):
        dot_product_variance(4, n_samples=1)


# ---------------------------------------------------------------- the widget, without a browser
def test_widget_updates_picture_in_place():
    pytest.importorskip("ipywidgets")
    ex = ScalingExplorer(n_queries=64)
    ui = ExplorerUI(ex, d_k=64)
    assert list(ui.d_k.options) == list(DK_STEPS) and ui.d_k.value == 64
    first = ui.image.value
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    ui.d_k.value = 1024
    assert ui.image.value != first and "d_k=1024" in ui.readout.value
    assert ui.view().max_prob == ex(1024, True).max_prob
    ui.scaled.value = False
    assert f"mean max p = {ex(1024, False).max_prob:.3f}" in ui.readout.value
    line = ui.plot.curves[False]
    before = line.get_ydata().copy()
    ui.temperature.value = 10 ** 0.5                                    # new curves for a new temperature
    assert not (line.get_ydata() == before).all()
    assert [b.get_height() for b in ui.plot.probs] == pytest.approx(ui.view().probs[0].tolist(), abs=1e-12)
    assert len(ui.fig.axes) == 3                                        # one persistent figure, no new ones


def test_player_frames_are_the_pictures_of_their_settings():
    "Each frame of the kernel-free player is the explorer's picture of its setting, drawn afresh; captions carry the numbers."
    import io
    ex = ScalingExplorer(n_queries=32)
    player = explorer_player(ex, d_ks=(4, 1024), temperatures=(0.5, 2.0))
    assert len(player.frames) == 8 and len(set(player.frames)) == 8
    for setting in ({"d_k": 1024, "scaled": False, "temperature": 0.5}, {"d_k": 4, "scaled": True, "temperature": 2.0}):
        fig, plot = explorer_figure(ex)
        plot.show(ex(**setting), jacobian_curves(ex, setting["temperature"]))
        buf = io.BytesIO(); fig.savefig(buf, format="png")
        fresh = explorer_player(ex, **{"d_ks": (setting["d_k"],), "scaled": (setting["scaled"],),
                                      "temperatures": (setting["temperature"],)}).frames[0]
        assert player.frame(**setting) == fresh
        v = ex(**setting)
        assert f"mean max p = {v.max_prob:.3f}" in player.captions[player.index(**setting)]


def test_scaling_is_library_only():
    "The explorer's apparatus is not part of the library module's public API, and the module imports no plotting."
    import subprocess, sys
    assert not {"DK_STEPS", "ExplorerUI", "ExplorerPlot", "static_twin", "jacobian_curves"} & set(scaling.__all__)
    code = "import sys, transformer_lit.scaling; print(sorted(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_jacobian_curves_respect_max_d_k():
    c = jacobian_curves(ScalingExplorer(n_queries=16, max_d_k=100))
    assert c["d_k"] == [d for d in DK_STEPS if d <= 100]
    assert len(c[True]) == len(c[False]) == len(c["d_k"])


# ---------------------------------------------------------------- bad input to the measures, empty inputs
def E(exc, msg): return pytest.raises(exc, match="^" + re.escape(msg) + "$")

@pytest.mark.parametrize("f", [softmax_entropy, softmax_jacobian, softmax_jacobian_norm])
def test_measures_check_their_input(f):
    with E(TypeError, "p must be a torch.Tensor, got list"): f([0.5, 0.5])
    with E(TypeError, "p.dtype=torch.int64 must be a floating dtype"): f(torch.ones(2, dtype=torch.long))
    with E(ValueError, "p.dim()=0 must be at least 1: (..., n)"): f(torch.tensor(1.0))
    with E(ValueError, "p.shape[-1]=0 must be >= 1 (a distribution over n >= 1 keys)"): f(torch.ones(3, 0))
    p = torch.softmax(torch.randn(0, 4, dtype=F64), -1)                  # no rows: an empty result
    assert f(p).shape == {softmax_jacobian: (0, 4, 4)}.get(f, (0,))

def test_saturation_metrics_checks_scores():
    with E(TypeError, "scores must be a torch.Tensor, got list"): saturation_metrics([0.0, 1.0])
    with E(TypeError, "scores.dtype=torch.bool must be a real dtype"): saturation_metrics(torch.ones(3, dtype=torch.bool))
    with E(ValueError, "scores.shape[-1]=0 must be >= 1 (a distribution over n >= 1 keys)"): saturation_metrics(torch.ones(2, 0))
    with E(ValueError, "scores contains NaN or +inf (2 of 6 entries): they may hold finite values and -inf only"):
        saturation_metrics(torch.tensor([[0.0, math.inf, 1.0], [math.nan, 0.0, 0.0]]))
    m = saturation_metrics(torch.tensor([[0.0, -math.inf, 0.0]], dtype=F64))   # -inf: a key left out
    torch.testing.assert_close(m["probs"], torch.tensor([[0.5, 0.0, 0.5]], dtype=F64))
    torch.testing.assert_close(m["entropy"], torch.tensor([math.log(2)], dtype=F64))
    torch.testing.assert_close(saturation_metrics(torch.tensor([[1, 1]]))["max_prob"], torch.tensor([0.5]))  # integer scores
    assert saturation_metrics(torch.ones(0, 3))["entropy"].shape == (0,)

def test_variance_functions_and_explorer_flags(ex):
    with E(ValueError, "d_k=0 must be a positive int"): dot_product_variance_se(0)
    with E(ValueError, "n_samples=1 must be an int >= 2"): dot_product_variance_se(4, 1)
    with E(TypeError, "seed=1.5 must be an int >= 0"): dot_product_variance(4, seed=1.5)
    with E(ValueError, "seed=-1 must be an int >= 0"): dot_product_variance(4, seed=-1)
    with E(TypeError, "scaled='no' must be a bool (True or False)"): dot_product_variance(4, scaled="no")
    with E(TypeError, "scaled=1 must be a bool (True or False)"): ex(16, scaled=1)
    with E(TypeError, "d_ks=3 must be an iterable of positive ints"): ex.curve(3)
    with E(TypeError, "d_ks='64' must be an iterable of positive ints"): ex.curve("64")
    assert all(len(c) == 0 for c in ex.curve([]).values())

def test_dot_product_variance_is_the_chapters_first_cell():
    "Chapter 02 opens with the simulation written out (q, k from one seeded generator, the variance of q·k): the function is that cell."
    for d_k, n, seed in [(1, 16, 0), (512, 4096, 0), (7, 100, 3)]:
        g = torch.Generator().manual_seed(seed)
        q = torch.randn(n, d_k, generator=g, dtype=torch.float64)
        k = torch.randn(n, d_k, generator=g, dtype=torch.float64)
        s = (q * k).sum(-1)
        assert dot_product_variance(d_k, n, seed=seed) == s.var().item()
        assert dot_product_variance(d_k, n, scaled=True, seed=seed) == (s / math.sqrt(d_k)).var().item()

"""Error bounds derived from the computation, for comparing two different computations of the same numbers.

Bit-equality is asserted only where both sides run the same operations on the same path. Where the paths
differ (a fused (d -> 3d) matmul against a (d -> d) one, a cached decoding step against a full forward, one
batch against several), the kernels may sum in a different order (BLAS libraries pick blocking, vector width
and FMA use per shape and per CPU), so the results differ by rounding. The helpers here give the bound.

The bound for a dot product (Higham, Accuracy and Stability of Numerical Algorithms, section 3.1): a sum of
n products computed in floating point with unit roundoff u, in *any* order, with or without FMA, satisfies
    |fl(sum_i x_i w_i) - sum_i x_i w_i| <= gamma_n * sum_i |x_i| |w_i|,   gamma_n = n u / (1 - n u).
A bias added to the sum is one more term with weight 1 (n = d + 1). Two computations each within that bound
of the exact value are within twice it of each other. The bound holds element by element on any CPU.
"""
import torch

UNIT_ROUNDOFF = {torch.float64: 2.0 ** -53, torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}


def gamma(n, dtype):
    "Higham's gamma_n = n u / (1 - n u) for `dtype`'s unit roundoff u."
    nu = n * UNIT_ROUNDOFF[dtype]
    if nu >= 1: raise ValueError(f"n={n} terms is too many for {dtype}: n*u={nu} must be below 1")
    return nu / (1 - nu)


def linear_difference_bound(x, weight, bias=None):
    "Element-wise bound on |a - b| for two float computations a, b of `F.linear(x, weight, bias)` (any summation order)."
    d = x.shape[-1]
    mag = x.abs().double() @ weight.abs().double().T                      # sum_i |x_i| |w_i|, in float64
    if bias is not None: mag = mag + bias.abs().double()
    return 2 * gamma(d + (bias is not None), x.dtype) * mag


def assert_within(a, b, bound, what):
    "Assert |a - b| <= bound element by element (bound a tensor or a number); the message names the worst element."
    diff = (a.double() - b.double()).abs()
    bound = torch.as_tensor(bound, dtype=torch.float64).expand_as(diff)
    bad = diff > bound
    if bad.any():
        i = int((diff - bound).flatten().argmax())
        raise AssertionError(f"{what}: {int(bad.sum())} of {diff.numel()} elements differ by more than the bound; "
                             f"worst at flat index {i}: |diff|={diff.flatten()[i].item():.3g} > bound={bound.flatten()[i].item():.3g}")


def assert_same_greedy(forward, a, b, prompt_len, atol=0.0, rtol=0.0):
    """Greedy tokens of two different computations of the same model (cached and uncached decoding, a fast step,
    a static cache, a compiled step, another library): each path's logits differ from one full forward's by rounding,
    at most `bound = atol + rtol * max|logits|`. So, teacher-forced through `forward` (ids (B, T) -> logits (B, T, V)):
    every token of `a` and of `b` must be within `bound` of the best logit there (a greedy choice), and `b` must equal
    `a` wherever the top-2 gap exceeds 2 * bound (only one token is within the bound there); at a nearer tie either
    choice is greedy, the two may part, and each goes on greedily from its own prefix. Fails if no row has a clear
    first step (the check would be empty: pick another seed)."""
    if a.shape != b.shape: raise AssertionError(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    if not torch.equal(a[:, :prompt_len], b[:, :prompt_len]): raise AssertionError("the prompts differ")
    if a.shape[1] == prompt_len: return
    with torch.no_grad(): la, lb = (forward(s)[:, prompt_len - 1:-1].double() for s in (a, b))   # (B, n_new, V)
    bound = atol + rtol * max(la.abs().max().item(), lb.abs().max().item())
    for name, seq, lg in (("a", a, la), ("b", b, lb)):
        chosen = lg.gather(-1, seq[:, prompt_len:, None])[..., 0]                           # (B, n_new)
        assert_within(chosen, lg.amax(-1), bound, f"sequence {name} is not greedy within bound={bound:.3g} (teacher-forced logits)")
    top2 = la.topk(2, -1).values
    gap = top2[..., 0] - top2[..., 1]                                                        # (B, n_new)
    for row in range(a.shape[0]):
        for t in range(a.shape[1] - prompt_len):
            if gap[row, t] <= 2 * bound: break                          # a near tie: the two may part here, legitimately
            if a[row, prompt_len + t] != b[row, prompt_len + t]:
                raise AssertionError(f"row {row}, new token {t}: {int(a[row, prompt_len + t])} != {int(b[row, prompt_len + t])} "
                                     f"although the top-2 logit gap {gap[row, t].item():.3g} exceeds 2 x bound = {2 * bound:.3g}")
    if not (gap[:, 0] > 2 * bound).any(): raise AssertionError("no row has a clear first step: pick another seed or prompt")

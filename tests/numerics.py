"""Error bounds derived from the computation, for comparing two different computations of the same numbers.

Bit-equality is asserted only where both sides run the same operations on the same path. Where the paths
differ (a fused (d -> 3d) matmul against a (d -> d) one, a cached decoding step against a full forward, one
batch against several), the kernels may sum in a different order (BLAS libraries pick blocking, vector width
and FMA use per shape and per CPU), so the results differ by rounding. The helpers here give the bound.

Greedy tokens of two paths are compared with `transformer_lit.model.assert_greedy_agrees` (chapter 09): exact
where the top-2 logit gap exceeds twice the bound on the paths' logit difference, each path greedy within it.

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

"""GaussianKernelAttention: gka_attention as an nn.Module that learns each head's bandwidth."""
import math

import torch
from torch import nn

from ._ops import _kernel, _window, gka_attention

_LAYOUTS = ("bthd", "bhtd")


class GaussianKernelAttention(nn.Module):
    """Gaussian Kernel Attention with a learned bandwidth sigma per head: GKA's only
    attention parameters (no query, key or value projections; an output projection,
    if the model has one, is the caller's nn.Linear).

    Args:
        heads, head_dim: H and D.
        window: FlashAttention's (left, right), -1 = unbounded: (-1, 0) causal (the
            default), (-1, -1) full, (W-1, 0) causal sliding window of W tokens.
        sigma: every head's initial bandwidth, > 0. The default, sqrt(head_dim / 2),
            is examples/train_lm's and examples/ddp's: for features of about unit
            size per coordinate (after RMSNorm, |x_t|^2 is about D), two unrelated
            tokens are about 2D apart, a score of -2 against the query's own 0:
            peaked enough to carry information, flat enough to train.
        layout: "bthd" (libgka's and FlashAttention's): x [B, T, H, D], or
            [B, T, H*D] (heads side by side, as a linear layer gives them);
            "bhtd" (torch's scaled_dot_product_attention's): x [B, H, T, D].
        return_lse: forward returns (y, lse) instead of y.
        kernel: the function that weighs the pairs, "gaussian" (the default),
            "laplace" or "cauchy" (gka_attention's; docs/spec.md, "Kernels").
            sigma's default suits the Gaussian; it is each kernel's length
            scale all the same (the score of two unrelated tokens about sqrt(2D)
            apart: -2 Gaussian, -2 Laplace, -log 5 Cauchy).

    forward(x) returns y of x's shape and dtype, and with return_lse also lse
    [B, H, T] float32 (each row's log sum of exp(score), FlashAttention's
    softmax_lse; it carries no gradient). x is float32 or bfloat16, on the CPU or
    a CUDA device; under torch.autocast the bfloat16 kernels run. sigma reaches the
    kernels in float32 whatever x's dtype: keep this module's parameter float32
    (bfloat16 inputs or autocast rather than module.bfloat16(), which would round
    log_sigma as it rounds every parameter).

    The kernels take [B, T, H, D] contiguous (gka.h has no strided calls). "bthd"
    costs no copy (of a contiguous x). With "bhtd" the forward copies x into that
    layout once, and the op keeps that copy for the backward (which copies no x,
    but holds the copy's memory from forward to backward); y comes back as a
    [B, H, T, D] view, without a copy, so the backward copies dy wherever its
    gradient is not contiguous as [B, T, H, D] (a gradient laid out [B, H, T, D],
    as most are). The layout is a convenience, at the price of those copies, not
    a faster path.

    Gradients flow to x and log_sigma (once: double backward raises). For
    generation, run gka_decode with this module's sigma under torch.no_grad().
    """

    def __init__(self, heads, head_dim, window=(-1, 0), sigma=None, layout="bthd", return_lse=False,
                 kernel="gaussian"):
        super().__init__()
        for name, v in (("heads", heads), ("head_dim", head_dim)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"gka: {name} must be an int >= 1, got {v!r}")
        if layout not in _LAYOUTS:
            raise ValueError(f"gka: layout must be one of {_LAYOUTS}, got {layout!r}")
        sigma = math.sqrt(head_dim / 2) if sigma is None else float(sigma)
        if not (math.isfinite(sigma) and sigma > 0):
            raise ValueError(f"gka: sigma must be finite and > 0, got {sigma!r}")
        self.heads, self.head_dim, self.window = heads, head_dim, _window(window)
        self.layout, self.return_lse, self.kernel = layout, return_lse, _kernel(kernel)
        # The parameter is log sigma: exp gives a valid bandwidth (> 0) for every
        # value an optimizer step can reach, and a step changes sigma by a factor
        # (dL/dlog_sigma = sigma dL/dsigma), alike for sharp and flat heads: the
        # scores scale as 1/sigma^2, so a bandwidth acts by ratios. softplus is
        # positive too, but above sigma ~ 1 it is nearly the identity: equal steps
        # in sigma, a far larger relative change for sharp heads than for flat
        # ones. The examples train the same log_sigma.
        self.log_sigma = nn.Parameter(torch.full((heads,), math.log(sigma)))

    @property
    def sigma(self):
        """The bandwidths [H], float32: exp(log_sigma)."""
        return self.log_sigma.float().exp()

    def forward(self, x):
        H, D = self.heads, self.head_dim
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"gka: x must be a torch.Tensor, got {type(x).__name__}")
        flat = self.layout == "bthd" and x.dim() == 3
        if flat and x.shape[2] == H * D:
            xb = x.unflatten(2, (H, D))
        elif self.layout == "bthd" and x.dim() == 4 and x.shape[2:] == (H, D):
            xb = x
        elif self.layout == "bhtd" and x.dim() == 4 and x.shape[1] == H and x.shape[3] == D:
            xb = x.transpose(1, 2).contiguous()  # the op saves this copy: its backward copies no x
        else:
            want = f"[B, T, {H}, {D}] or [B, T, {H * D}]" if self.layout == "bthd" else f"[B, {H}, T, {D}]"
            raise ValueError(f"gka: layout {self.layout!r} takes x {want}, got shape {tuple(x.shape)}")
        y, lse = gka_attention(xb, self.sigma, self.window, return_lse=True, kernel=self.kernel)
        y = y.flatten(2) if flat else y.transpose(1, 2) if self.layout == "bhtd" else y
        return (y, lse) if self.return_lse else y

    def extra_repr(self):
        return (f"heads={self.heads}, head_dim={self.head_dim}, window={self.window}, layout={self.layout!r}, "
                f"return_lse={self.return_lse}, kernel={self.kernel!r}")

"""GKA in plain PyTorch: the formulas of docs/spec.md, dense, in any dtype.

O(B*H*T^2*D) memory: for tests and small shapes. Its gradients (x and sigma)
come from PyTorch's autograd, independently of libgka's backward.
"""
import torch


def window_mask(seq_len, window, device=None):
    """[T, T] bool, True where query i may attend key j (FlashAttention's (left, right))."""
    left, right = window
    i = torch.arange(seq_len, device=device)[:, None]
    j = torch.arange(seq_len, device=device)[None, :]
    allowed = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device)
    if left != -1:
        allowed &= j >= i - left
    if right != -1:
        allowed &= j <= i + right
    return allowed


def kernel_score(d2, sigma, kernel="gaussian"):
    """A pair's score s(d2, sigma) for squared distances d2 (docs/spec.md, "Kernels").
    The Laplace's sqrt has an infinite slope at d2 = 0: d2 is clamped to the
    smallest positive float there (an exact 0 gives torch a NaN gradient), so that
    the self pair's gradient is 0, libgka's subgradient."""
    if kernel == "gaussian":
        return -d2 / (2 * sigma ** 2)
    if kernel == "laplace":
        return -d2.clamp(min=torch.finfo(d2.dtype).tiny).sqrt() / sigma
    if kernel == "cauchy":
        return -torch.log1p(d2 / sigma ** 2)
    raise ValueError(f"gka: unknown kernel {kernel!r}")


def gka_forward_reference(x, sigma, window=(-1, 0), kernel="gaussian"):
    """(y [B,T,H,D], lse [B,H,T]) for x [B,T,H,D] and sigma [H], in x's dtype."""
    xh = x.permute(0, 2, 1, 3)  # [B, H, T, D]
    # Exact squared distances (differences, not the |a|^2 + |b|^2 - 2ab expansion).
    d2 = ((xh[:, :, :, None, :] - xh[:, :, None, :, :]) ** 2).sum(-1)  # [B, H, Tq, Tk]
    s = kernel_score(d2, sigma[None, :, None, None], kernel)
    s = s.masked_fill(~window_mask(x.shape[1], window, x.device), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # [B, H, T]
    p = torch.exp(s - lse[..., None])
    y = (p @ xh).permute(0, 2, 1, 3)
    return y, lse


def gka_attention_reference(x, sigma, window=(-1, 0), kernel="gaussian"):
    return gka_forward_reference(x, sigma, window, kernel)[0]


def gka_features_reference(x, sigma, frequencies, window=(-1, 0)):
    """Random-feature GKA (docs/spec.md, "Random-feature GKA"), dense, in x's dtype:
    (y, lse) for x [B,T,H,D], sigma [H], frequencies [H,M,D]. The features
    unshifted: for inputs whose exponents the dtype holds (tests, float64)."""
    u = x.permute(0, 2, 1, 3) / sigma[None, :, None, None]              # [B, H, T, D]
    exponent = torch.einsum("bhtd,hmd->bhtm", u, frequencies) - (u * u).sum(-1, keepdim=True)
    f = torch.exp(exponent)                                              # [B, H, T, M]
    k = (f @ f.transpose(-1, -2)) / frequencies.shape[1]                 # [B, H, Tq, Tk]
    k = k.masked_fill(~window_mask(x.shape[1], window, x.device), 0.0)
    row = k.sum(-1)
    y = ((k / row[..., None]) @ x.permute(0, 2, 1, 3)).permute(0, 2, 1, 3)
    return y, torch.log(row)

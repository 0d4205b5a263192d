"""GKA written as softmax attention ("the folded problem"), to time GKA beside attention kernels.

    q' = [x / s^2, -1 / (2 s^2)],   k' = [x, |x|^2],   v' = [x, 0]      (head dim D + 1, scale 1)

q'.k' = (x_i.x_j - |x_j|^2 / 2) / s^2 differs from GKA's score -|x_i - x_j|^2 / (2 s^2)
(docs/spec.md) by -|x_i|^2 / (2 s^2), a constant of the row, which softmax ignores:
softmax(q' k'^T) v' is GKA's y in columns :D and 0 in column D. bench/peers.py (CPU)
and tests/gpu/sdpa_folded.py (CUDA) build their peers' inputs here.
"""
import torch


def fold(x, sigma):
    """(q', k', v'), each [B, H, T, D + 1] in x's dtype and on its device, for x [B, H, T, D]
    (torch's attention layout) and sigma, a float or [H]. Torch ops all, so a gradient
    flows back to x through the three."""
    inv_s2 = (torch.as_tensor(sigma, dtype=torch.float64, device=x.device).reshape(-1, 1, 1) ** -2).to(x.dtype)
    sq = (x * x).sum(-1, keepdim=True)
    q = torch.cat([x * inv_s2, (-0.5 * inv_s2).expand_as(sq)], -1)
    k = torch.cat([x, sq], -1)
    v = torch.cat([x, torch.zeros_like(sq)], -1)
    return q, k, v

"""A small Vision Transformer whose attention is GKA over the whole image or dot-product attention.

Patches of the image become tokens (a linear patch embedding plus a learned position
embedding), then `layers` blocks of [RMSNorm -> attention -> W_O, residual; RMSNorm ->
MLP (relu^2), residual], a final RMSNorm, the mean over the tokens and a linear
classifier: examples/train_lm's block, with bidirectional attention over patches.

  GkaAttention: gka_torch's GaussianKernelAttention on the normalized tokens themselves,
    seen as [B, T, H, D] per-head features, full window (-1, -1), one learned sigma per head.
  DotProductAttention: softmax(Q K^T / sqrt(D)) V with W_Q, W_K, W_V, by
    F.scaled_dot_product_attention, no mask.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from gka_torch import GaussianKernelAttention

FULL_WINDOW = (-1, -1)  # every patch attends every patch (docs/spec.md, "Mask and windows")


def linear(inputs, outputs, scale=1.0):
    """A linear layer without bias, initialized N(0, scale^2 / inputs) as examples/train_lm's."""
    layer = nn.Linear(inputs, outputs, bias=False)
    nn.init.normal_(layer.weight, std=scale / math.sqrt(inputs))
    return layer


class GkaAttention(nn.Module):
    def __init__(self, heads, head_dim, layers):
        super().__init__()
        self.kernel = GaussianKernelAttention(heads, head_dim, window=FULL_WINDOW)
        self.out = linear(heads * head_dim, heads * head_dim, 1 / math.sqrt(2 * layers))

    def forward(self, h):  # h [B, T, H*D]
        return self.out(self.kernel(h))


class DotProductAttention(nn.Module):
    def __init__(self, heads, head_dim, layers):
        super().__init__()
        dim = heads * head_dim
        self.heads, self.head_dim = heads, head_dim
        self.qkv = linear(dim, 3 * dim)  # W_Q, W_K, W_V stacked
        self.out = linear(dim, dim, 1 / math.sqrt(2 * layers))

    def forward(self, h):
        B, T, _ = h.shape
        q, k, v = self.qkv(h).view(B, T, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)  # [B, H, T, D]
        return self.out(y.transpose(1, 2).reshape(B, T, -1))


ATTENTIONS = {"gka": GkaAttention, "dot": DotProductAttention}


class Block(nn.Module):
    def __init__(self, attention, heads, head_dim, layers):
        super().__init__()
        dim = heads * head_dim
        self.attention = ATTENTIONS[attention](heads, head_dim, layers)
        self.fc, self.proj = linear(dim, 4 * dim), linear(4 * dim, dim, 1 / math.sqrt(2 * layers))

    def forward(self, x):
        x = x + self.attention(rms_norm(x))
        return x + self.proj(F.relu(self.fc(rms_norm(x))).square())


def rms_norm(x):
    """Parameter-free, as examples/train_lm's (nanochat's)."""
    return F.rms_norm(x, (x.shape[-1],))


class ViT(nn.Module):
    def __init__(self, attention="gka", image=8, patch=2, heads=4, head_dim=16, layers=4, classes=10):
        super().__init__()
        if image % patch:
            raise ValueError(f"patch {patch} does not divide image {image}")
        dim = heads * head_dim
        self.patch, self.tokens = patch, (image // patch) ** 2
        self.embed = linear(patch * patch, dim)
        self.position = nn.Parameter(torch.randn(self.tokens, dim))
        self.blocks = nn.ModuleList(Block(attention, heads, head_dim, layers) for _ in range(layers))
        self.head = linear(dim, classes)

    def patches(self, images):
        """[B, S, S] images -> [B, T, patch*patch], patches in raster order."""
        p = self.patch
        return images.unfold(1, p, p).unfold(2, p, p).flatten(1, 2).flatten(2)

    def forward(self, images):
        x = self.embed(self.patches(images)) + self.position
        for block in self.blocks:
            x = block(x)
        return self.head(rms_norm(x).mean(dim=1))

    def attention_parameters(self):
        return sum(p.numel() for block in self.blocks for p in block.attention.parameters())

    def sigmas(self):
        """The learned bandwidths, one list per block (empty for dot-product attention)."""
        return [[round(s, 3) for s in block.attention.kernel.sigma.tolist()]
                for block in self.blocks if isinstance(block.attention, GkaAttention)]

    def training_flops_per_image(self):
        """(model, attention) training FLOPs of one image: 6 per weight per token for
        every product (forward + backward), and docs/spec.md's 4 + 10 per head dimension
        per pair for the pairwise part of both attentions (all T^2 pairs: full window)."""
        T = self.tokens
        dim = self.head.in_features
        pairwise = 14 * dim * T * T
        attention = sum(6 * T * weights(block.attention) + pairwise for block in self.blocks)
        mlp = sum(6 * T * (block.fc.weight.numel() + block.proj.weight.numel()) for block in self.blocks)
        model = attention + mlp + 6 * T * self.embed.weight.numel() + 6 * self.head.weight.numel()
        return model, attention


def weights(attention):
    """The attention's projection weights (GKA's sigmas are in no product)."""
    return sum(m.weight.numel() for m in attention.modules() if isinstance(m, nn.Linear))

"""GaussianKernelAttention: gka_attention as an nn.Module that learns each head's bandwidth."""
import math

import torch
from torch import nn

from ._ops import (_kernel, checked_window, draw_frequencies, gka_attention, gka_attention_features, gka_decode,
                   gka_decode_features, new_feature_state)

_LAYOUTS = ("bthd", "bhtd")


class DecodeCache:
    """A GaussianKernelAttention's feature cache for generation (its new_cache()):
    features [B, capacity, H, D] (GKA's keys and values are the features
    themselves: position p of sequence b in slot p % capacity) and lengths [B]
    (int64, CPU), each sequence's tokens so far, which the module's prefill and
    decode advance. Under a sliding window (W-1, 0) it is a ring: a capacity of
    W-1 serves sequences of any length; under the causal window it holds whole
    sequences. reset() empties it for new sequences."""

    def __init__(self, features, lengths):
        self.features, self.lengths = features, lengths

    @property
    def capacity(self):
        return self.features.shape[1]

    def reset(self):
        self.lengths.zero_()

    def __repr__(self):
        B, capacity, H, D = self.features.shape
        return (f"DecodeCache(batch={B}, capacity={capacity}, heads={H}, head_dim={D}, "
                f"dtype={self.features.dtype}, device={self.features.device}, lengths={self.lengths.tolist()})")


class FeatureStateCache:
    """A random-feature GaussianKernelAttention's cache for generation (its
    new_cache()): state [B, H, M, D+1] float32, the keys' state of each sequence
    so far (docs/random-features.md), the same size whatever the length, and
    lengths [B] (int64, CPU), each sequence's tokens so far, which the module's
    prefill and decode advance. reset() empties it for new sequences."""

    def __init__(self, state, lengths):
        self.state, self.lengths = state, lengths

    def reset(self):
        self.state.zero_()
        self.lengths.zero_()

    def __repr__(self):
        B, H, M, D1 = self.state.shape
        return (f"FeatureStateCache(batch={B}, heads={H}, features={M}, head_dim={D1 - 1}, "
                f"device={self.state.device}, lengths={self.lengths.tolist()})")


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
        features: M > 0 runs random-feature GKA (docs/random-features.md): the
            Gaussian's weights estimated from M features a head, in time linear in
            T; the causal or full window, the Gaussian, float32 on the CPU. Its
            frequencies [H, M, D] are draw_frequencies' orthogonal blocks, seeded
            from torch's generator (torch.manual_seed makes them reproducible), and
            saved in the state dict.
        learn_frequencies: with features, the frequencies are a parameter that
            trains (a learned spectral kernel) instead of a fixed buffer (the
            Gaussian's estimator).

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

    Gradients flow to x and log_sigma (once: double backward raises).

    Generation: cache = module.new_cache(batch, capacity) makes a DecodeCache;
    module.prefill(prompt, cache) returns the prompt's y (the forward's kernels)
    and stores its features; module.decode(x_new, cache) returns y of new
    tokens against the cache (gka_decode) and stores them. Both use this
    module's sigma, window, kernel and layout, run under torch.no_grad() and
    advance cache.lengths; their results equal the forward's over the whole
    sequence up to float rounding. With features (the causal window), the cache
    is a FeatureStateCache, the keys' state (module.new_cache(batch), no
    capacity: any length), and decode costs O(M D) a token (gka_decode_features).
    """

    def __init__(self, heads, head_dim, window=(-1, 0), sigma=None, layout="bthd", return_lse=False,
                 kernel="gaussian", features=None, learn_frequencies=False):
        super().__init__()
        for name, v in (("heads", heads), ("head_dim", head_dim)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"gka: {name} must be an int >= 1, got {v!r}")
        if layout not in _LAYOUTS:
            raise ValueError(f"gka: layout must be one of {_LAYOUTS}, got {layout!r}")
        sigma = math.sqrt(head_dim / 2) if sigma is None else float(sigma)
        if not (math.isfinite(sigma) and sigma > 0):
            raise ValueError(f"gka: sigma must be finite and > 0, got {sigma!r}")
        self.heads, self.head_dim, self.window = heads, head_dim, checked_window(window)
        self.layout, self.return_lse, self.kernel = layout, return_lse, _kernel(kernel)
        # The parameter is log sigma: exp gives a valid bandwidth (> 0) for every
        # value an optimizer step can reach, and a step changes sigma by a factor
        # (dL/dlog_sigma = sigma dL/dsigma), alike for sharp and flat heads: the
        # scores scale as 1/sigma^2, so a bandwidth acts by ratios. softplus is
        # positive too, but above sigma ~ 1 it is nearly the identity: equal steps
        # in sigma, a far larger relative change for sharp heads than for flat
        # ones. The examples train the same log_sigma.
        self.log_sigma = nn.Parameter(torch.full((heads,), math.log(sigma)))
        self.features = self._checked_features(features, learn_frequencies)
        if self.features:
            frequencies = draw_frequencies(heads, self.features, head_dim)
            if learn_frequencies:
                self.frequencies = nn.Parameter(frequencies)
            else:
                self.register_buffer("frequencies", frequencies)

    def _checked_features(self, features, learn_frequencies):
        if features is None:
            if learn_frequencies:
                raise ValueError("gka: learn_frequencies needs features=M (random-feature GKA)")
            return 0
        if isinstance(features, bool) or not isinstance(features, int) or features < 1:
            raise ValueError(f"gka: features must be an int >= 1 (M, the random features a head), got {features!r}")
        if self.kernel != "gaussian" or self.window not in ((-1, 0), (-1, -1)):
            raise ValueError(f"gka: random features estimate the Gaussian under the causal (-1, 0) or full (-1, -1) "
                             f"window; this module has kernel {self.kernel!r} and window {self.window}")
        return features

    @property
    def sigma(self):
        """The bandwidths [H], float32: exp(log_sigma)."""
        return self.log_sigma.float().exp()

    def _as_bthd(self, x):
        """x as [B, T, H, D] (contiguous for "bhtd": the op saves this copy, so its
        backward copies no x), and the function that gives y x's layout back."""
        H, D = self.heads, self.head_dim
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"gka: x must be a torch.Tensor, got {type(x).__name__}")
        if self.layout == "bthd" and x.dim() == 3 and x.shape[2] == H * D:
            return x.unflatten(2, (H, D)), lambda y: y.flatten(2)
        if self.layout == "bthd" and x.dim() == 4 and x.shape[2:] == (H, D):
            return x, lambda y: y
        if self.layout == "bhtd" and x.dim() == 4 and x.shape[1] == H and x.shape[3] == D:
            return x.transpose(1, 2).contiguous(), lambda y: y.transpose(1, 2)
        want = f"[B, T, {H}, {D}] or [B, T, {H * D}]" if self.layout == "bthd" else f"[B, {H}, T, {D}]"
        raise ValueError(f"gka: layout {self.layout!r} takes x {want}, got shape {tuple(x.shape)}")

    def _checked_sigma(self):
        """sigma, after naming a non-finite log_sigma (eagerly, on the CPU: the check
        reads the values, which a compiled graph or a CUDA stream should not wait on),
        which libgka would report as the bandwidth exp(log_sigma) it got."""
        log_sigma = self.log_sigma
        if log_sigma.device.type == "cpu" and not torch.compiler.is_compiling():
            bad = (~torch.isfinite(log_sigma.detach())).nonzero().flatten().tolist()
            if bad:
                raise ValueError(f"gka: log_sigma[{bad[0]}] = {log_sigma[bad[0]].item()}: the module's "
                                 "bandwidths are exp(log_sigma), which must be finite (a diverged optimizer step "
                                 "or a NaN gradient sets it so)")
        return self.sigma

    def forward(self, x):
        xb, as_given = self._as_bthd(x)
        if self.features:
            y, lse = gka_attention_features(xb, self._checked_sigma(), self.frequencies, self.window, return_lse=True)
        else:
            y, lse = gka_attention(xb, self._checked_sigma(), self.window, return_lse=True, kernel=self.kernel)
        return (as_given(y), lse) if self.return_lse else as_given(y)

    def new_cache(self, batch, capacity=None, dtype=torch.float32, device="cpu"):
        """An empty DecodeCache for `batch` sequences. capacity: the tokens it holds
        per sequence; under a sliding window (W-1, 0) it defaults to W-1 (a ring,
        for any length), under the causal window it must be given (the longest
        sequence, prompt included). dtype: the features' (float32 or bfloat16).
        With features: a FeatureStateCache, float32, for sequences of any length
        (capacity, if given, is not used)."""
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"gka: batch must be an int >= 1, got {batch!r}")
        if self.features:
            if self.window != (-1, 0):
                raise ValueError(f"gka: random-feature GKA decodes under the causal window (-1, 0), this module's "
                                 f"is {self.window}")
            if dtype != torch.float32:
                raise TypeError(f"gka: random-feature GKA's state is float32, got dtype {dtype}")
            # The state's size is M (D + 1) a head whatever the length: capacity is not needed.
            state = new_feature_state(batch, self.heads, self.features, self.head_dim, device=device)
            return FeatureStateCache(state, torch.zeros(batch, dtype=torch.int64))
        left, right = self.window
        if right != 0:
            raise ValueError(f"gka: decoding needs a window whose right span is 0 (causal or sliding), this module's "
                             f"is {self.window}")
        if capacity is None:
            if left < 0:
                raise ValueError("gka: under the causal window the cache holds whole sequences: pass capacity, "
                                 "the longest sequence's length (prompt and generated tokens)")
            capacity = max(left, 1)
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < max(left, 1):
            raise ValueError(f"gka: capacity must be an int >= {max(left, 1)} for the window {self.window}, "
                             f"got {capacity!r}")
        features = torch.zeros((batch, capacity, self.heads, self.head_dim), dtype=dtype, device=device)
        return DecodeCache(features, torch.zeros(batch, dtype=torch.int64))

    def _check_cache(self, cache, xb):
        kind = FeatureStateCache if self.features else DecodeCache
        if not isinstance(cache, kind):
            raise TypeError(f"gka: cache must be a {kind.__name__} (module.new_cache), got {type(cache).__name__}")
        if cache.lengths.shape[0] != xb.shape[0]:
            raise ValueError(f"gka: x has {xb.shape[0]} sequences, the cache {cache.lengths.shape[0]}")

    @torch.no_grad()
    def prefill(self, x, cache):
        """y of a prompt x (this module's layout, every sequence the same length),
        from the forward's kernels, with its features stored in an empty cache
        (under a sliding window the ring keeps the last `capacity`). Continue
        with decode()."""
        xb, as_given = self._as_bthd(x)
        self._check_cache(cache, xb)
        if bool(cache.lengths.any()):
            raise ValueError(f"gka: prefill takes an empty cache (lengths {cache.lengths.tolist()}): continue a "
                             "sequence with decode(), which takes several new tokens too, or reset() the cache")
        if self.features:  # the prompt's keys' state from zero: decode's kernels
            return self.decode(x, cache)
        T = xb.shape[1]
        if self.window[0] < 0 and T > cache.capacity:
            raise ValueError(f"gka: a prompt of {T} tokens does not fit a cache of capacity {cache.capacity} under "
                             "the causal window")
        if cache.features.dtype != xb.dtype or cache.features.device != xb.device:
            raise TypeError(f"gka: the cache holds {cache.features.dtype} on {cache.features.device}, "
                            f"x is {xb.dtype} on {xb.device}")
        y = gka_attention(xb, self._checked_sigma(), self.window, kernel=self.kernel)
        kept = torch.arange(max(0, T - cache.capacity), T)
        cache.features[:, kept % cache.capacity] = xb[:, kept]
        cache.lengths += T
        return as_given(y)

    @torch.no_grad()
    def decode(self, x, cache):
        """y of new tokens x (this module's layout: [B, Tq, H*D] or [B, Tq, H, D],
        or [B, H, Tq, D]; Tq >= 1, each a continuation of its cached sequence)
        against the cache, into which they are stored (gka_decode)."""
        xb, as_given = self._as_bthd(x)
        self._check_cache(cache, xb)
        if self.features:
            y = gka_decode_features(xb, cache.state, self._checked_sigma(), self.frequencies)
        else:
            y = gka_decode(xb, cache.features, cache.lengths, self._checked_sigma(), self.window, self.kernel)
        cache.lengths += xb.shape[1]
        return as_given(y)

    def extra_repr(self):
        return (f"heads={self.heads}, head_dim={self.head_dim}, window={self.window}, layout={self.layout!r}, "
                f"return_lse={self.return_lse}, kernel={self.kernel!r}"
                + (f", features={self.features}, learn_frequencies={isinstance(self.frequencies, nn.Parameter)}"
                   if self.features else ""))

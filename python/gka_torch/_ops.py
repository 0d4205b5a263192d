"""The custom ops gka::forward and gka::backward over libgka, and their autograd;
random-feature GKA's gka::forward_features, gka::backward_features, their
varlen forms and gka::decode_features;
their variable-length forms gka::forward_varlen and gka::backward_varlen; a chunk's
passes gka::forward_chunk and gka::backward_chunk; gka::decode, inference against a
feature cache.

All are torch.library custom ops: opaque to torch.compile (one node each in the
graph; their fake implementations give only output shapes), and gka::forward's
autograd formula calls gka::backward (gka::forward_varlen's gka::backward_varlen),
so a compiled training step keeps both kernels whole.
"""
import ctypes

import torch

from . import _lib

LIB, LIBRARY_PATH = _lib.load()

_DEVICES = ("cpu", "cuda")


def _window(window):
    try:
        left, right = window
    except (TypeError, ValueError):
        raise TypeError(f"gka: window must be a pair (left, right), got {window!r}") from None
    for name, v in (("left", left), ("right", right)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"gka: window {name} must be an int (-1 = unbounded; libgka checks its value), "
                             f"got {v!r}")
    return left, right


def checked_window(window):
    """_window's pair, its values checked by libgka's rule, for checks that run
    before any call (a module's constructor): a description without elements,
    which libgka checks and computes nothing for. Not traceable (ctypes): the
    ops' own calls check it where torch.compile traces."""
    left, right = _window(window)
    call = _lib.Call(shape=_lib.Shape(0, 0, 0, 0), window=_lib.Window(left, right))
    status = LIB.gka_run_forward(call)
    if status == _lib.GKA_ERR_INVALID_ARGUMENT:  # the window; the calls report anything else themselves
        _lib.check(LIB, status, "gka: the window")
    return left, right


# The features' dtypes libgka's kernels take, and their gka_dtype. sigma may be
# either (it is widened to float32); lse and dsigma are float32.
_FEATURE_DTYPES = {torch.float32: 0, torch.bfloat16: 1}


def _check(x, sigma, fake=False, autocast=False):
    """Metadata checks only (no data): they also run on fake tensors under torch.compile.
    With autocast, any floating dtype passes: autocast casts it (below)."""
    if not isinstance(x, torch.Tensor) or not isinstance(sigma, torch.Tensor):
        raise TypeError("gka: x and sigma must be torch.Tensors")
    if x.dim() != 4:
        raise ValueError(f"gka: x must be [batch, seq_len, heads, head_dim], got shape {tuple(x.shape)}")
    if sigma.dim() != 1 or sigma.shape[0] != x.shape[2]:
        raise ValueError(f"gka: sigma must be [heads] = [{x.shape[2]}], got shape {tuple(sigma.shape)}")
    for name, t in (("x", x), ("sigma", sigma)):
        if t.dtype not in _FEATURE_DTYPES and not (autocast and t.is_floating_point()):
            raise TypeError(f"gka: {name} must be float32 or bfloat16 (libgka's kernels take those), got {t.dtype}")
    if x.device != sigma.device:
        raise ValueError(f"gka: x and sigma must be on the same device, got {x.device} and {sigma.device}")
    if fake:
        return
    if x.device.type not in _DEVICES:
        raise ValueError(f"gka: tensors must be on the CPU or a CUDA device, got {x.device}")
    if x.device.type == "cuda" and not _lib.has_cuda(LIB):
        raise NotImplementedError(
            f"gka: this libgka ({LIBRARY_PATH}) has no CUDA kernels (gka_cuda_compiled() is 0): pass CPU "
            "tensors, or load a libgka built with CUDA through GKA_LIBRARY")


def _run(pass_, like, window, kernel, shape=None, **fields):
    """Runs libgka's gka_run_`pass_` ("forward", "backward" or "decode") on a
    description of the call: the dtype and device of the features `like` (torch's
    current stream of a CUDA device), `shape` (that of `like` by default), the
    window, the kernel function, the score policy set (set_score_policy) and
    `fields`, gka_call's fields by name (tensors by their data pointers); raises
    libgka's error."""
    call = _lib.Call(shape=_lib.Shape(*(like.shape if shape is None else shape)), window=_lib.Window(*window),
                     dtype=_FEATURE_DTYPES[like.dtype], kernel=KERNELS.index(_kernel(kernel)), scores=_score_policy)
    for name, value in fields.items():
        setattr(call, name, value.data_ptr() if isinstance(value, torch.Tensor) else value)
    name = "gka_run_" + pass_
    if like.device.type == "cpu":
        status = getattr(LIB, name)(call)
    else:
        with torch.cuda.device(like.device):
            call.device, call.stream = _lib.GKA_CUDA, torch.cuda.current_stream(like.device).cuda_stream
            status = getattr(LIB, name)(call)
    _lib.check(LIB, status, name)


_score_policy = 0  # gka_score_policy: "auto"


def set_score_policy(form):
    """gka_torch's score form (gka_torch.set_score_form): checked by libgka's
    gka_set_score_form, which also sets it for the process's older calls."""
    global _score_policy
    _lib.check(LIB, LIB.gka_set_score_form(None if form is None else form.encode()), "gka_set_score_form")
    _score_policy = _lib.SCORE_POLICIES.index(LIB.gka_score_form().decode())


def score_policy():
    return _lib.SCORE_POLICIES[_score_policy]


# The kernel functions libgka has (gka_set_kernel's names, generators/kernel_function.h).
KERNELS = _lib.kernel_functions(LIB)


def _kernel(kernel):
    """A kernel function's name, checked where a caller passes it (the ops take it as is)."""
    if kernel not in KERNELS:
        raise ValueError(f"gka: kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    return kernel


def _check_backward_shapes(x, y, lse, dy):
    """The shapes of a backward's y, dy and lse for x [B,T,H,D]."""
    B, T, H, D = x.shape
    if y.shape != x.shape or dy.shape != x.shape or lse.shape != (B, H, T):
        raise ValueError(f"gka: backward needs y and dy shaped like x {tuple(x.shape)} and lse [B, H, T], got "
                         f"y {tuple(y.shape)}, dy {tuple(dy.shape)}, lse {tuple(lse.shape)}")


def _check_backward_inputs(x, y, lse, dy):
    """The dtypes and device a backward's pointers must have (its shapes are checked apart)."""
    for name, t, dtype in (("y", y, x.dtype), ("lse", lse, torch.float32), ("dy", dy, x.dtype)):
        if t.dtype != dtype or t.device != x.device:
            raise TypeError(f"gka: {name} must be {dtype} on {x.device}, got {t.dtype} on {t.device}")


# The ops name their kernel function argument kernel_function: inductor lowers an
# opaque op through FallbackKernel.create(kernel, *args, **kwargs), so an op
# argument named `kernel`, passed by keyword, collides with it (TypeError).
@torch.library.custom_op("gka::forward", mutates_args=())
def forward(x: torch.Tensor, sigma: torch.Tensor, left: int, right: int,
            kernel_function: str = "gaussian") -> tuple[torch.Tensor, torch.Tensor]:
    """(y [B,T,H,D], lse [B,H,T]) = GKA forward of x [B,T,H,D] with bandwidths sigma [H]
    and the kernel function `kernel_function` (gka.h, gka_call.kernel)."""
    _check(x, sigma)
    x, sigma = x.contiguous(), sigma.float().contiguous()
    B, T, H, D = x.shape
    y = torch.empty((B, T, H, D), dtype=x.dtype, device=x.device)
    lse = torch.empty((B, H, T), dtype=torch.float32, device=x.device)
    _run("forward", x, (left, right), kernel_function, x=x, sigma=sigma, y=y, lse=lse)
    return y, lse


@forward.register_fake
def _(x, sigma, left, right, kernel_function="gaussian"):
    _check(x, sigma, fake=True)
    B, T, H, D = x.shape
    return x.new_empty((B, T, H, D)), x.new_empty((B, H, T), dtype=torch.float32)


@torch.library.custom_op("gka::backward", mutates_args=())
def backward(x: torch.Tensor, sigma: torch.Tensor, y: torch.Tensor, lse: torch.Tensor, dy: torch.Tensor,
             left: int, right: int, kernel_function: str = "gaussian") -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, dsigma): gradients of sum(dy * y) from the forward's y and lse; dx in x's
    dtype, dsigma in float32."""
    _check(x, sigma)
    x, y, lse, dy = (t.contiguous() for t in (x, y, lse, dy))
    sigma = sigma.float().contiguous()
    B, T, H, D = x.shape
    _check_backward_shapes(x, y, lse, dy)
    _check_backward_inputs(x, y, lse, dy)
    dx = torch.empty((B, T, H, D), dtype=x.dtype, device=x.device)
    dsigma = torch.empty((H,), dtype=torch.float32, device=x.device)
    _run("backward", x, (left, right), kernel_function, x=x, sigma=sigma, y=y, lse=lse, dy=dy, dx=dx, dsigma=dsigma)
    return dx, dsigma


@backward.register_fake
def _(x, sigma, y, lse, dy, left, right, kernel_function="gaussian"):
    _check(x, sigma, fake=True)
    return torch.empty_like(x, memory_format=torch.contiguous_format), sigma.new_empty(sigma.shape, dtype=torch.float32)


def _setup_context(ctx, inputs, output):
    x, sigma, left, right, kernel = inputs
    y, lse = output
    ctx.save_for_backward(x, sigma, y, lse)
    ctx.window, ctx.kernel = (left, right), kernel
    # lse is an output for callers that want it (e.g. to combine blocks), but
    # libgka's backward takes no gradient for it.
    ctx.mark_non_differentiable(lse)


def _backward(ctx, dy, _dlse):
    x, sigma, y, lse = ctx.saved_tensors
    dx, dsigma = torch.ops.gka.backward(x, sigma, y, lse, dy.to(x.dtype), *ctx.window, ctx.kernel)
    return (dx if ctx.needs_input_grad[0] else None, dsigma.to(sigma.dtype) if ctx.needs_input_grad[1] else None,
            None, None, None)


forward.register_autograd(_backward, setup_context=_setup_context)

# No autocast registration: under torch.autocast gka_attention casts x alone
# (below); a registration would round sigma, a learned bandwidth, as well.


def _check_written_in_place(name, t, dtype, device):
    if t.dtype != dtype or t.device != device or not t.is_contiguous():
        raise TypeError(f"gka: {name} must be a contiguous {dtype} tensor on {device} (it is written in place), "
                        f"got {'a non-contiguous ' if not t.is_contiguous() else ''}{t.dtype} on {t.device}")


@torch.library.custom_op("gka::decode", mutates_args=("cache",))
def decode(x: torch.Tensor, cache: torch.Tensor, cache_lens: torch.Tensor, sigma: torch.Tensor, left: int,
           right: int, kernel_function: str = "gaussian") -> tuple[torch.Tensor, torch.Tensor]:
    """(y [B,Tq,H,D], lse [B,H,Tq]) of the new tokens x [B,Tq,H,D] against cache
    [B,capacity,H,D] of cache_lens [B] (int64) tokens each; writes x into the cache (gka.h, gka_decode)."""
    _check(x, sigma)
    B, Tq, H, D = x.shape
    if cache.dim() != 4 or cache.shape[0] != B or tuple(cache.shape[2:]) != (H, D):
        raise ValueError(f"gka: cache must be [batch, capacity, heads, head_dim] = [{B}, capacity, {H}, {D}], "
                         f"got shape {tuple(cache.shape)}")
    _check_written_in_place("cache", cache, x.dtype, x.device)
    if cache_lens.shape != (B,) or cache_lens.dtype != torch.int64 or cache_lens.device.type != "cpu":
        raise TypeError(f"gka: cache_lens must be an int64 CPU tensor of shape [{B}], got {cache_lens.dtype} "
                        f"{tuple(cache_lens.shape)} on {cache_lens.device}")
    x, sigma, cache_lens = x.contiguous(), sigma.float().contiguous(), cache_lens.contiguous()
    y = torch.empty_like(x)
    lse = torch.empty((B, H, Tq), dtype=torch.float32, device=x.device)
    _run("decode", x, (left, right), kernel_function, cache_capacity=cache.shape[1], cache_lens=cache_lens,
         cache=cache, x=x, sigma=sigma, y=y, lse=lse)
    return y, lse


@decode.register_fake
def _(x, cache, cache_lens, sigma, left, right, kernel_function="gaussian"):
    _check(x, sigma, fake=True)
    B, Tq, H, D = x.shape
    return torch.empty_like(x), x.new_empty((B, H, Tq), dtype=torch.float32)


def gka_decode(x, cache, cache_lens, sigma, window=(-1, 0), kernel="gaussian"):
    """Inference: y [B,Tq,H,D] of Tq new tokens per sequence, against a cache of
    the features before them, which it then extends.

    cache [B,capacity,H,D] holds x itself (GKA's keys and values are the features),
    position p of sequence b in slot p % capacity; cache_lens [B] (int64, CPU, or a
    list of ints) counts each sequence's tokens before the call and is not changed
    (add Tq after; GaussianKernelAttention.decode keeps the count itself). window
    is causal (-1, 0), where each sequence must fit (cache_lens + Tq <= capacity),
    or (W-1, 0), where a ring of capacity >= W-1 serves any length (a smaller one
    is refused at the first call, saying the capacity needed). x and cache are
    float32 or bfloat16 (the same), on the CPU or a CUDA device (cache_lens stays
    on the CPU). To prefill a long prompt, run gka_attention on it and copy its x
    into the cache. kernel: as gka_attention's.

    Inference only: it has no backward, so where autograd is on and x, sigma or
    the cache requires grad it raises at once (run it under torch.no_grad() or
    torch.inference_mode(), or pass detached tensors).
    """
    left, right = _window(window)
    if isinstance(cache_lens, (list, tuple)) and all(isinstance(n, int) and not isinstance(n, bool)
                                                      for n in cache_lens):
        cache_lens = torch.tensor(cache_lens, dtype=torch.int64)
    elif not isinstance(cache_lens, torch.Tensor):
        raise TypeError(f"gka: cache_lens must be an int64 CPU tensor [B] or a list of ints, got {cache_lens!r}")
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in (x, cache, sigma)):
        raise RuntimeError("gka: gka_decode is inference-only (it has no backward), but x, sigma or the cache "
                           "requires grad: call it under torch.no_grad() or torch.inference_mode(), or pass "
                           "detached tensors")
    return torch.ops.gka.decode(x, cache, cache_lens, sigma, left, right, _kernel(kernel))[0]


def _check_varlen(x, cu_seqlens, sigma, fake=False):
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(f"gka: packed x must be [total, heads, head_dim], got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    _check(x.unsqueeze(0), sigma, fake=fake)
    if cu_seqlens.dtype != torch.int64 or cu_seqlens.device.type != "cpu":
        raise TypeError(f"gka: cu_seqlens must be an int64 CPU tensor, got {cu_seqlens.dtype} on {cu_seqlens.device}")
    if cu_seqlens.dim() != 1 or cu_seqlens.shape[0] < 1:
        raise ValueError(f"gka: cu_seqlens must be [sequences + 1] (gka.h, gka_forward_varlen): 0 first, "
                         f"non-decreasing, the total last ([0] for no sequences), got shape {tuple(cu_seqlens.shape)}")


def _host_cu_seqlens(cu_seqlens):
    """The varlen calls' cu_seqlens (int32 or int64, any device) as the int64 CPU tensor libgka reads."""
    if not isinstance(cu_seqlens, torch.Tensor) or cu_seqlens.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"gka: cu_seqlens must be an int32 or int64 tensor, got {cu_seqlens!r}")
    return cu_seqlens.to("cpu", torch.int64)


def _run_varlen(pass_, x, cu_seqlens, window, kernel, **fields):
    """Runs libgka's `pass_` on packed sequences x [total, H, D]."""
    total, H, D = x.shape
    _run(pass_, x, window, kernel, shape=(cu_seqlens.shape[0] - 1, total, H, D), cu_seqlens=cu_seqlens, x=x,
         **fields)


@torch.library.custom_op("gka::forward_varlen", mutates_args=())
def forward_varlen(x: torch.Tensor, cu_seqlens: torch.Tensor, sigma: torch.Tensor, left: int,
                   right: int, kernel_function: str = "gaussian") -> tuple[torch.Tensor, torch.Tensor]:
    """(y [total,H,D], lse [H,total]) of packed sequences x [total,H,D], sequence s at
    tokens cu_seqlens[s]..cu_seqlens[s+1]-1 (gka.h, gka_forward_varlen)."""
    _check_varlen(x, cu_seqlens, sigma)
    x, cu_seqlens, sigma = x.contiguous(), cu_seqlens.contiguous(), sigma.float().contiguous()
    y = torch.empty_like(x)
    lse = torch.empty((x.shape[1], x.shape[0]), dtype=torch.float32, device=x.device)
    _run_varlen("forward", x, cu_seqlens, (left, right), kernel_function, sigma=sigma, y=y, lse=lse)
    return y, lse


@forward_varlen.register_fake
def _(x, cu_seqlens, sigma, left, right, kernel_function="gaussian"):
    _check_varlen(x, cu_seqlens, sigma, fake=True)
    return torch.empty_like(x), x.new_empty((x.shape[1], x.shape[0]), dtype=torch.float32)


@torch.library.custom_op("gka::backward_varlen", mutates_args=())
def backward_varlen(x: torch.Tensor, cu_seqlens: torch.Tensor, sigma: torch.Tensor, y: torch.Tensor,
                    lse: torch.Tensor, dy: torch.Tensor, left: int, right: int,
                    kernel_function: str = "gaussian") -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, dsigma) of packed sequences from the varlen forward's y and lse."""
    _check_varlen(x, cu_seqlens, sigma)
    if y.shape != x.shape or dy.shape != x.shape or lse.shape != (x.shape[1], x.shape[0]):
        raise ValueError(f"gka: backward_varlen needs y and dy shaped like x {tuple(x.shape)} and lse [H, total], "
                         f"got y {tuple(y.shape)}, dy {tuple(dy.shape)}, lse {tuple(lse.shape)}")
    _check_backward_inputs(x, y, lse, dy)
    x, y, lse, dy, cu_seqlens = (t.contiguous() for t in (x, y, lse, dy, cu_seqlens))
    sigma = sigma.float().contiguous()
    dx = torch.empty_like(x)
    dsigma = torch.empty((x.shape[1],), dtype=torch.float32, device=x.device)
    _run_varlen("backward", x, cu_seqlens, (left, right), kernel_function, sigma=sigma, y=y, lse=lse, dy=dy, dx=dx,
                dsigma=dsigma)
    return dx, dsigma


@backward_varlen.register_fake
def _(x, cu_seqlens, sigma, y, lse, dy, left, right, kernel_function="gaussian"):
    _check_varlen(x, cu_seqlens, sigma, fake=True)
    return torch.empty_like(x), sigma.new_empty(sigma.shape, dtype=torch.float32)


def _setup_varlen_context(ctx, inputs, output):
    x, cu_seqlens, sigma, left, right, kernel = inputs
    y, lse = output
    ctx.save_for_backward(x, cu_seqlens, sigma, y, lse)
    ctx.window, ctx.kernel = (left, right), kernel
    ctx.mark_non_differentiable(lse)


def _backward_varlen(ctx, dy, _dlse):
    x, cu_seqlens, sigma, y, lse = ctx.saved_tensors
    dx, dsigma = torch.ops.gka.backward_varlen(x, cu_seqlens, sigma, y, lse, dy.to(x.dtype), *ctx.window,
                                               ctx.kernel)
    return (dx if ctx.needs_input_grad[0] else None, None,
            dsigma.to(sigma.dtype) if ctx.needs_input_grad[2] else None, None, None, None)


forward_varlen.register_autograd(_backward_varlen, setup_context=_setup_varlen_context)


def _run_chunk(pass_, x, keys, query_start, key_start, window, kernel, **fields):
    """Runs libgka's `pass_` on a chunk: queries x at query_start.., keys at key_start.."""
    chunk = _lib.Chunk(query_start, key_start, keys.shape[1])
    _run(pass_, x, window, kernel, chunk=ctypes.pointer(chunk), x=x, keys=keys, **fields)


def _check_chunk(x, keys, sigma, fake=False):
    _check(x, sigma, fake=fake)
    if keys.dim() != 4 or keys.shape[0] != x.shape[0] or keys.shape[2:] != x.shape[2:]:
        raise ValueError(f"gka: keys must be [batch, key_len, heads, head_dim] = [{x.shape[0]}, key_len, "
                         f"{x.shape[2]}, {x.shape[3]}], got shape {tuple(keys.shape)}")
    if keys.dtype != x.dtype or keys.device != x.device:
        raise TypeError(f"gka: keys must be {x.dtype} on {x.device}, got {keys.dtype} on {keys.device}")


@torch.library.custom_op("gka::forward_chunk", mutates_args=())
def forward_chunk(x: torch.Tensor, keys: torch.Tensor, sigma: torch.Tensor, query_start: int, key_start: int,
                  left: int, right: int, kernel_function: str = "gaussian") -> tuple[torch.Tensor, torch.Tensor]:
    """(y_c [B,Tq,H,D], lse_c [B,H,Tq]): the partial results of queries x at positions
    query_start.. against keys at key_start.. (gka.h, gka_forward_chunk)."""
    _check_chunk(x, keys, sigma)
    x, keys, sigma = x.contiguous(), keys.contiguous(), sigma.float().contiguous()
    B, T, H, D = x.shape
    y = torch.empty_like(x)
    lse = torch.empty((B, H, T), dtype=torch.float32, device=x.device)
    _run_chunk("forward", x, keys, query_start, key_start, (left, right), kernel_function, sigma=sigma, y=y, lse=lse)
    return y, lse


@forward_chunk.register_fake
def _(x, keys, sigma, query_start, key_start, left, right, kernel_function="gaussian"):
    _check_chunk(x, keys, sigma, fake=True)
    B, T, H, D = x.shape
    return torch.empty_like(x), x.new_empty((B, H, T), dtype=torch.float32)


@torch.library.custom_op("gka::backward_chunk", mutates_args=())
def backward_chunk(x: torch.Tensor, keys: torch.Tensor, sigma: torch.Tensor, y: torch.Tensor, lse: torch.Tensor,
                   dy: torch.Tensor, query_start: int, key_start: int, left: int, right: int,
                   kernel_function: str = "gaussian") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dx_keys, dsigma): a chunk's contributions to the gradients, from the merged
    y and lse of its queries (gka.h, gka_backward_chunk)."""
    _check_chunk(x, keys, sigma)
    B, T, H, D = x.shape
    if y.shape != x.shape or dy.shape != x.shape or lse.shape != (B, H, T):
        raise ValueError(f"gka: backward_chunk needs y and dy shaped like x {tuple(x.shape)} and lse [B, H, Tq], "
                         f"got y {tuple(y.shape)}, dy {tuple(dy.shape)}, lse {tuple(lse.shape)}")
    _check_backward_inputs(x, y, lse, dy)
    x, keys, y, lse, dy = (t.contiguous() for t in (x, keys, y, lse, dy))
    sigma = sigma.float().contiguous()
    dx, dx_keys = torch.empty_like(x), torch.empty_like(keys)
    dsigma = torch.empty((H,), dtype=torch.float32, device=x.device)
    _run_chunk("backward", x, keys, query_start, key_start, (left, right), kernel_function, sigma=sigma, y=y,
               lse=lse, dy=dy, dx=dx, dx_keys=dx_keys, dsigma=dsigma)
    return dx, dx_keys, dsigma


@backward_chunk.register_fake
def _(x, keys, sigma, y, lse, dy, query_start, key_start, left, right, kernel_function="gaussian"):
    _check_chunk(x, keys, sigma, fake=True)
    return torch.empty_like(x), torch.empty_like(keys), sigma.new_empty(sigma.shape, dtype=torch.float32)


def _no_double_backward(ctx, *grads):
    raise NotImplementedError(
        "gka: double backward is not supported: libgka computes GKA's gradients, not their own derivatives "
        "(a backward through a graph that torch.autograd.grad(..., create_graph=True) made of gka's gradients)")


# The backward passes' own backward: an error that names what is unsupported
# (a second derivative), where torch would say that no formula is registered.
for _op in (backward, backward_varlen, backward_chunk):
    _op.register_autograd(_no_double_backward)


def merge_chunks(ys, lses):
    """The exact merge of chunks' partial results for the same queries:
    lse = log sum_c exp(lse_c), y = sum_c exp(lse_c - lse) y_c (a chunk with
    lse_c = -inf adds nothing). ys: [B,Tq,H,D] each, lses: [B,H,Tq] each."""
    lse = torch.logsumexp(torch.stack(lses), dim=0)
    y = sum(torch.exp(l - lse).transpose(1, 2).unsqueeze(-1) * yc for yc, l in zip(ys, lses))
    return y.to(ys[0].dtype), lse


def _pairs(q0, tq, k0, tk, window):
    """Whether some (query, key) pair of the chunk is in the window (gka.h, gka_chunk_has_pairs)."""
    return bool(LIB.gka_chunk_has_pairs(_lib.Shape(1, tq, 1, 1), _lib.Chunk(q0, k0, tk), _lib.Window(*window)))


class _Chunked(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, sigma, window, chunk_size, kernel):
        if x.shape[1] == 0:  # no tokens, so no pair to merge: the chunk op's empty results, without a kernel
            y, lse = torch.ops.gka.forward_chunk(x, x, sigma, 0, 0, *window, kernel)
        else:
            chunks = x.split(chunk_size, dim=1)
            starts = [i * chunk_size for i in range(len(chunks))]
            ys, lses = [], []
            for xq, q0 in zip(chunks, starts):
                parts = [torch.ops.gka.forward_chunk(xq, xk, sigma, q0, k0, *window, kernel)
                         for xk, k0 in zip(chunks, starts) if _pairs(q0, xq.shape[1], k0, xk.shape[1], window)]
                y, lse = merge_chunks(*zip(*parts))
                ys.append(y), lses.append(lse)
            y, lse = torch.cat(ys, dim=1), torch.cat(lses, dim=2)
        ctx.save_for_backward(x, sigma, y, lse)
        ctx.window, ctx.chunk_size, ctx.kernel = window, chunk_size, kernel
        return y

    @staticmethod
    def backward(ctx, dy):
        x, sigma, y, lse = ctx.saved_tensors
        size, window = ctx.chunk_size, ctx.window
        dx, dsigma = torch.zeros_like(x), torch.zeros(sigma.shape, dtype=torch.float32, device=x.device)
        dy = dy.to(x.dtype)
        for q0 in range(0, x.shape[1], size):
            q = slice(q0, q0 + size)
            for k0 in range(0, x.shape[1], size):
                k = slice(k0, k0 + size)
                if not _pairs(q0, x[:, q].shape[1], k0, x[:, k].shape[1], window):
                    continue
                dq, dk, ds = torch.ops.gka.backward_chunk(x[:, q], x[:, k], sigma, y[:, q], lse[:, :, q], dy[:, q],
                                                          q0, k0, *window, ctx.kernel)
                dx[:, q] += dq
                dx[:, k] += dk
                dsigma += ds
        return dx, dsigma.to(sigma.dtype), None, None, None


def gka_attention_chunked(x, sigma, window=(-1, 0), chunk_size=1024, kernel="gaussian"):
    """gka_attention computed chunk by chunk: the sequence cut into chunks of
    chunk_size tokens, the chunk kernels run on every (query chunk, key chunk)
    pair the window reaches, and their partial results merged exactly
    (merge_chunks): the single-process form of sequence parallelism, whose
    chunks can live on different processes. Gradients flow to x and sigma
    through the chunks' backward. float32 tensors, on the CPU or a CUDA device.
    kernel: as gka_attention's."""
    left, right = checked_window(window)
    _check(x, sigma)
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"gka: chunk_size must be an int >= 1, got {chunk_size!r}")
    return _Chunked.apply(x, sigma, (left, right), chunk_size, _kernel(kernel))


def _autocast_inputs(x, sigma, packed=False):
    """Metadata checks of gka_attention's inputs; under torch.autocast, x cast to
    bfloat16 on the CPU whatever the autocast dtype, and on CUDA to bfloat16 if
    that is the autocast dtype, else to float32 (libgka has no float16 kernels);
    sigma keeps its precision (the ops widen it to float32)."""
    autocast = isinstance(x, torch.Tensor) and x.device.type in _DEVICES and torch.is_autocast_enabled(x.device.type)
    _check(x.unsqueeze(0) if packed else x, sigma, autocast=autocast)
    if autocast:
        bf16 = x.device.type == "cpu" or torch.get_autocast_dtype(x.device.type) == torch.bfloat16
        x = x.to(torch.bfloat16 if bf16 else torch.float32)
        if sigma.dtype not in _FEATURE_DTYPES:
            sigma = sigma.float()
    return x, sigma


def gka_attention_varlen(x, cu_seqlens, sigma, window=(-1, 0), kernel="gaussian"):
    """gka_attention over variable-length sequences packed along the tokens
    (FlashAttention's varlen): x [total,H,D], sequence s at tokens
    cu_seqlens[s]..cu_seqlens[s+1]-1 (int32 or int64, any device: it is read on
    the host; [0] for no sequence), each
    attending within itself under the window, at its own cost (nothing padded).
    Returns y [total,H,D]; gradients flow to x and sigma. No elements (a total
    of 0, or H or D 0) gives the exact results without a kernel, as gka_attention.
    On the CPU or a CUDA device; dtypes, autocast and kernel as gka_attention's. (On
    CUDA the backward waits for the stream once, to add the sequences' dsigma
    in order; a CUDA cu_seqlens is copied to the host, which waits too.)
    """
    left, right = _window(window)
    cu_seqlens = _host_cu_seqlens(cu_seqlens)
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(f"gka: packed x must be a tensor [total, heads, head_dim], got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    x, sigma = _autocast_inputs(x, sigma, packed=True)
    return torch.ops.gka.forward_varlen(x, cu_seqlens, sigma, left, right, _kernel(kernel))[0]


def _check_frequencies(x, frequencies):
    """W [H, M, D] float32 on x's device (metadata only: also on fake tensors)."""
    if not isinstance(frequencies, torch.Tensor) or frequencies.dim() != 3 or \
            (frequencies.shape[0], frequencies.shape[2]) != (x.shape[2], x.shape[3]):
        raise ValueError(f"gka: frequencies must be [heads, features, head_dim] = [{x.shape[2]}, M, {x.shape[3]}], "
                         f"got {tuple(frequencies.shape) if isinstance(frequencies, torch.Tensor) else frequencies!r}")
    if frequencies.dtype != torch.float32 or frequencies.device != x.device:
        raise TypeError(f"gka: frequencies must be float32 on {x.device}, got {frequencies.dtype} on "
                        f"{frequencies.device}")


@torch.library.custom_op("gka::forward_features", mutates_args=())
def forward_features(x: torch.Tensor, sigma: torch.Tensor, frequencies: torch.Tensor, left: int,
                     right: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, lse) of random-feature GKA (docs/random-features.md): x [B,T,H,D] against
    M features a head, frequencies [H,M,D]."""
    _check(x, sigma)
    _check_frequencies(x, frequencies)
    x, sigma, frequencies = x.contiguous(), sigma.float().contiguous(), frequencies.contiguous()
    B, T, H, D = x.shape
    y = torch.empty((B, T, H, D), dtype=x.dtype, device=x.device)
    lse = torch.empty((B, H, T), dtype=torch.float32, device=x.device)
    _run("forward", x, (left, right), "gaussian", x=x, sigma=sigma, y=y, lse=lse, features=frequencies.shape[1],
         frequencies=frequencies)
    return y, lse


@forward_features.register_fake
def _(x, sigma, frequencies, left, right):
    _check(x, sigma, fake=True)
    _check_frequencies(x, frequencies)
    B, T, H, D = x.shape
    return x.new_empty((B, T, H, D)), x.new_empty((B, H, T), dtype=torch.float32)


@torch.library.custom_op("gka::backward_features", mutates_args=())
def backward_features(x: torch.Tensor, sigma: torch.Tensor, frequencies: torch.Tensor, y: torch.Tensor,
                      lse: torch.Tensor, dy: torch.Tensor, left: int,
                      right: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dsigma, dfrequencies): gradients of sum(dy * y) from the forward's y and lse."""
    _check(x, sigma)
    _check_frequencies(x, frequencies)
    x, y, lse, dy, frequencies = (t.contiguous() for t in (x, y, lse, dy, frequencies))
    sigma = sigma.float().contiguous()
    H = x.shape[2]
    _check_backward_shapes(x, y, lse, dy)
    _check_backward_inputs(x, y, lse, dy)
    dx = torch.empty_like(x)
    dsigma = torch.empty((H,), dtype=torch.float32, device=x.device)
    dfrequencies = torch.empty_like(frequencies)
    _run("backward", x, (left, right), "gaussian", x=x, sigma=sigma, y=y, lse=lse, dy=dy, dx=dx, dsigma=dsigma,
         features=frequencies.shape[1], frequencies=frequencies, dfrequencies=dfrequencies)
    return dx, dsigma, dfrequencies


@backward_features.register_fake
def _(x, sigma, frequencies, y, lse, dy, left, right):
    _check(x, sigma, fake=True)
    return (torch.empty_like(x, memory_format=torch.contiguous_format),
            sigma.new_empty(sigma.shape, dtype=torch.float32), torch.empty_like(frequencies))


def _setup_features_context(ctx, inputs, output):
    x, sigma, frequencies, left, right = inputs
    y, lse = output
    ctx.save_for_backward(x, sigma, frequencies, y, lse)
    ctx.window = (left, right)
    ctx.mark_non_differentiable(lse)


def _backward_features(ctx, dy, _dlse):
    x, sigma, frequencies, y, lse = ctx.saved_tensors
    dx, dsigma, dfrequencies = torch.ops.gka.backward_features(x, sigma, frequencies, y, lse, dy.to(x.dtype),
                                                               *ctx.window)
    wanted = ctx.needs_input_grad
    return (dx if wanted[0] else None, dsigma.to(sigma.dtype) if wanted[1] else None,
            dfrequencies if wanted[2] else None, None, None)


forward_features.register_autograd(_backward_features, setup_context=_setup_features_context)
backward_features.register_autograd(_no_double_backward)


@torch.library.custom_op("gka::forward_features_varlen", mutates_args=())
def forward_features_varlen(x: torch.Tensor, cu_seqlens: torch.Tensor, sigma: torch.Tensor, frequencies: torch.Tensor,
                            left: int, right: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(y [total,H,D], lse [H,total]) of random-feature GKA on packed sequences x
    [total,H,D] (gka::forward_varlen's layout), each from zero states."""
    _check_varlen(x, cu_seqlens, sigma)
    _check_frequencies(x.unsqueeze(0), frequencies)
    x, cu_seqlens, sigma, frequencies = (x.contiguous(), cu_seqlens.contiguous(), sigma.float().contiguous(),
                                         frequencies.contiguous())
    y = torch.empty_like(x)
    lse = torch.empty((x.shape[1], x.shape[0]), dtype=torch.float32, device=x.device)
    _run_varlen("forward", x, cu_seqlens, (left, right), "gaussian", sigma=sigma, y=y, lse=lse,
                features=frequencies.shape[1], frequencies=frequencies)
    return y, lse


@forward_features_varlen.register_fake
def _(x, cu_seqlens, sigma, frequencies, left, right):
    _check_varlen(x, cu_seqlens, sigma, fake=True)
    _check_frequencies(x.unsqueeze(0), frequencies)
    return torch.empty_like(x), x.new_empty((x.shape[1], x.shape[0]), dtype=torch.float32)


@torch.library.custom_op("gka::backward_features_varlen", mutates_args=())
def backward_features_varlen(x: torch.Tensor, cu_seqlens: torch.Tensor, sigma: torch.Tensor, frequencies: torch.Tensor,
                             y: torch.Tensor, lse: torch.Tensor, dy: torch.Tensor, left: int,
                             right: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dx, dsigma, dfrequencies) of packed sequences from the forward's y and lse."""
    _check_varlen(x, cu_seqlens, sigma)
    _check_frequencies(x.unsqueeze(0), frequencies)
    if y.shape != x.shape or dy.shape != x.shape or lse.shape != (x.shape[1], x.shape[0]):
        raise ValueError(f"gka: backward_features_varlen needs y and dy shaped like x {tuple(x.shape)} and lse "
                         f"[H, total], got y {tuple(y.shape)}, dy {tuple(dy.shape)}, lse {tuple(lse.shape)}")
    _check_backward_inputs(x, y, lse, dy)
    x, y, lse, dy, cu_seqlens, frequencies = (t.contiguous() for t in (x, y, lse, dy, cu_seqlens, frequencies))
    sigma = sigma.float().contiguous()
    dx = torch.empty_like(x)
    dsigma = torch.empty((x.shape[1],), dtype=torch.float32, device=x.device)
    dfrequencies = torch.empty_like(frequencies)
    _run_varlen("backward", x, cu_seqlens, (left, right), "gaussian", sigma=sigma, y=y, lse=lse, dy=dy, dx=dx,
                dsigma=dsigma, features=frequencies.shape[1], frequencies=frequencies, dfrequencies=dfrequencies)
    return dx, dsigma, dfrequencies


@backward_features_varlen.register_fake
def _(x, cu_seqlens, sigma, frequencies, y, lse, dy, left, right):
    _check_varlen(x, cu_seqlens, sigma, fake=True)
    return torch.empty_like(x), sigma.new_empty(sigma.shape, dtype=torch.float32), torch.empty_like(frequencies)


def _setup_features_varlen_context(ctx, inputs, output):
    x, cu_seqlens, sigma, frequencies, left, right = inputs
    y, lse = output
    ctx.save_for_backward(x, cu_seqlens, sigma, frequencies, y, lse)
    ctx.window = (left, right)
    ctx.mark_non_differentiable(lse)


def _backward_features_varlen(ctx, dy, _dlse):
    x, cu_seqlens, sigma, frequencies, y, lse = ctx.saved_tensors
    dx, dsigma, dfrequencies = torch.ops.gka.backward_features_varlen(x, cu_seqlens, sigma, frequencies, y, lse,
                                                                      dy.to(x.dtype), *ctx.window)
    wanted = ctx.needs_input_grad
    return (dx if wanted[0] else None, None, dsigma.to(sigma.dtype) if wanted[2] else None,
            dfrequencies if wanted[3] else None, None, None)


forward_features_varlen.register_autograd(_backward_features_varlen, setup_context=_setup_features_varlen_context)
backward_features_varlen.register_autograd(_no_double_backward)


@torch.library.custom_op("gka::decode_features", mutates_args=("state",))
def decode_features(x: torch.Tensor, state: torch.Tensor, sigma: torch.Tensor,
                    frequencies: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(y [B,Tq,H,D], lse [B,H,Tq]) of random-feature GKA's new tokens x after the
    tokens whose keys' state [B,H,M,D+1] float32 `state` holds; adds theirs to it
    (gka.h, gka_run_decode with features)."""
    _check(x, sigma)
    _check_frequencies(x, frequencies)
    _check_feature_state(x, frequencies, state)
    x, sigma, frequencies = x.contiguous(), sigma.float().contiguous(), frequencies.contiguous()
    B, Tq, H, D = x.shape
    y = torch.empty_like(x)
    lse = torch.empty((B, H, Tq), dtype=torch.float32, device=x.device)
    _run("decode", x, (-1, 0), "gaussian", x=x, sigma=sigma, y=y, lse=lse, features=frequencies.shape[1],
         frequencies=frequencies, cache=state)
    return y, lse


@decode_features.register_fake
def _(x, state, sigma, frequencies):
    _check(x, sigma, fake=True)
    _check_frequencies(x, frequencies)
    _check_feature_state(x, frequencies, state)
    B, Tq, H, D = x.shape
    return x.new_empty((B, Tq, H, D)), x.new_empty((B, H, Tq), dtype=torch.float32)


def _check_feature_state(x, frequencies, state):
    B, _, H, D = x.shape
    shape = (B, H, frequencies.shape[1], D + 1)
    if not isinstance(state, torch.Tensor) or tuple(state.shape) != shape:
        raise ValueError(f"gka: the state must be [batch, heads, features, head_dim + 1] = {list(shape)}, got "
                         f"{tuple(state.shape) if isinstance(state, torch.Tensor) else state!r}")
    _check_written_in_place("the state", state, torch.float32, x.device)


def new_feature_state(batch, heads, features, head_dim, device="cpu"):
    """The keys' state of empty sequences for gka_decode_features: zeros
    [batch, heads, features, head_dim + 1] float32."""
    return torch.zeros((batch, heads, features, head_dim + 1), dtype=torch.float32, device=device)


def gka_decode_features(x, state, sigma, frequencies, return_lse=False):
    """Random-feature GKA's inference (docs/random-features.md): y [B,Tq,H,D] of Tq
    new tokens per sequence after the tokens whose keys' state `state` holds
    ([B,H,M,D+1] float32, new_feature_state() for empty sequences), to which it
    adds theirs: O(M D) a token whatever the length, under the causal window. A
    prompt is one call (any Tq), the tokens after it one call each or several.
    Inference only, as gka_decode."""
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                       for t in (x, state, sigma, frequencies)):
        raise RuntimeError("gka: gka_decode_features is inference-only (it has no backward), but x, sigma, the "
                           "frequencies or the state requires grad: call it under torch.no_grad() or "
                           "torch.inference_mode(), or pass detached tensors")
    y, lse = torch.ops.gka.decode_features(x, state, sigma, frequencies)
    return (y, lse) if return_lse else y


def draw_frequencies(heads, features, head_dim, seed=None, orthogonal=True):
    """Frequencies [heads, features, head_dim] float32 for gka_attention_features,
    from libgka's gka_draw_frequencies: the same values for a seed on every host.
    orthogonal: blocks of head_dim rows orthogonal to one another, each row's norm
    a standard normal vector's (a lower variance of the estimate); False: standard
    normal entries. seed None: one drawn from torch's generator (torch.manual_seed
    makes it reproducible)."""
    if seed is None:
        seed = int(torch.randint(0, 2 ** 62, ()).item())
    shape = (heads, features, head_dim)
    w = torch.empty(shape, dtype=torch.float32) if min(shape) >= 0 else None  # else libgka says what is wrong
    pointer = w.data_ptr() if w is not None else None
    _lib.check(LIB, LIB.gka_draw_frequencies(*shape, seed, int(bool(orthogonal)), pointer), "gka_draw_frequencies")
    return w


def gka_attention_features(x, sigma, frequencies, window=(-1, 0), return_lse=False, cu_seqlens=None):
    """Random-feature GKA (docs/random-features.md): the Gaussian's weights estimated
    from M features a head, in time linear in T. x [B,T,H,D] float32, sigma [H],
    frequencies [H,M,D] float32 (standard normal draws give the Gaussian's
    estimator; gradients flow to them, to x and to sigma). window: (-1, 0) causal
    or (-1, -1) full. lse [B,H,T] is the log of each row's estimated weight sum
    (-inf on a row without an estimate, whose y is x). With cu_seqlens (int32 or
    int64, read on the host), x is packed sequences [total,H,D] as
    gka_attention_varlen's, each attending within itself; lse is then [H,total]."""
    left, right = _window(window)
    if cu_seqlens is None:
        y, lse = torch.ops.gka.forward_features(x, sigma, frequencies, left, right)
    else:
        y, lse = torch.ops.gka.forward_features_varlen(x, _host_cu_seqlens(cu_seqlens), sigma, frequencies, left,
                                                       right)
    return (y, lse) if return_lse else y


def gka_attention(x, sigma, window=(-1, 0), return_lse=False, kernel="gaussian"):
    """Gaussian Kernel Attention: y [B,T,H,D] for features x [B,T,H,D] and per-head
    bandwidths sigma [H] (finite, > 0). x is float32 or bfloat16 (CPU or CUDA), y
    has x's dtype, and sigma either (the kernels widen it to float32); under
    torch.autocast the bfloat16 kernels run (on CUDA, float32 for float16).

    window is FlashAttention's (left, right), -1 = unbounded: (-1, 0) causal (the
    default), (-1, -1) full, (W-1, 0) causal sliding window of W tokens. Gradients
    flow to x and sigma through libgka's backward (once: double backward raises).

    return_lse=True returns (y, lse) with lse [B,H,T] float32, each row's log sum
    of exp(score): FlashAttention's softmax_lse. lse carries no gradient (libgka's
    backward takes none for it). A zero dimension gives empty results without a
    kernel (lse = log of each row's key count where only D is 0: gka.h).

    kernel: the function that weighs a pair at squared distance d2 = |x_i - x_j|^2
    (docs/spec.md, "Kernels"): "gaussian" exp(-d2 / (2 sigma^2)), "laplace"
    exp(-sqrt(d2) / sigma), "cauchy" 1 / (1 + d2 / sigma^2); KERNELS lists them.
    """
    left, right = _window(window)
    x, sigma = _autocast_inputs(x, sigma)
    y, lse = torch.ops.gka.forward(x, sigma, left, right, _kernel(kernel))
    return (y, lse) if return_lse else y

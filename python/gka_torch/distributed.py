"""GKA with the sequence sharded across the processes of a torch.distributed group
(context parallelism), on the chunk kernels (gka.h, gka_forward_chunk).

    from gka_torch.distributed import context_parallel_gka, shard, segments_of
    y_local = context_parallel_gka(x_local, sigma, window=(-1, 0), layout="zigzag")

Each rank holds some segments of one sequence (their positions, in order, along
x_local's dim 1): "contiguous" (rank r the r-th run of tokens; lengths may
differ, each rank's own T_local) or "zigzag" (the sequence in 2P equal-ish
pieces, rank r holding pieces r and 2P-1-r, so that under a causal mask every
rank has as many pairs; shard() cuts a whole tensor so). Each rank's queries
need the keys of the other ranks' segments that their window reaches, and only
those: for each (holder, reader) pair the holder sends the slice of each of its
segments that the reader's window reaches (all of it under causal or full
windows, the last W-1 tokens of the previous rank under (W-1, 0), which then
talks to its neighbours alone). The sends and receives are point-to-point and
asynchronous (isend/irecv), posted before the rank computes its own chunk
pairs, so that the transfers overlap that work. Each rank then merges its
queries' partial results (merge_chunks). The backward runs each pair's chunk
backward with the merged y and lse, sends each holder the gradient of the keys
it lent (the same slices, back), adds what it receives in rank order, and sums
dsigma over the group (all_reduce): sigma's gradient is the whole sequence's on
every rank. Deterministic: every sum runs in a fixed order.

Per step and rank, bytes sent: 4 * B * H * D times the tokens it lends (the
forward's features) plus the tokens it borrows (the backward's gradients, sent
back), and the all_reduce of H floats.
float32 CPU tensors (gloo); the CUDA chunk kernels exist, but this path over
NCCL has not run on a GPU, so it refuses CUDA tensors.
"""
import torch
import torch.distributed as dist

from ._ops import _check, _kernel, _pairs, checked_window, merge_chunks


def segments_of(seq_len, world, layout="contiguous"):
    """[(start, length), ...] of each rank for a sequence of seq_len tokens."""
    if layout not in ("contiguous", "zigzag"):
        raise ValueError(f"gka: layout must be 'contiguous' or 'zigzag', got {layout!r}")
    pieces = world if layout == "contiguous" else 2 * world
    bounds = [seq_len * k // pieces for k in range(pieces + 1)]
    piece = [(bounds[k], bounds[k + 1] - bounds[k]) for k in range(pieces)]
    if layout == "contiguous":
        return [[p] for p in piece]
    return [[piece[r], piece[pieces - 1 - r]] for r in range(world)]


def shard(x, rank, world, layout="contiguous"):
    """This rank's tokens of a whole tensor x [B, T, ...], as segments_of cuts them."""
    return torch.cat([x[:, s:s + n] for s, n in segments_of(x.shape[1], world, layout)[rank]], dim=1)


def _reach(queries, key_segment, window):
    """The slices [(start, length), ...] of key_segment that some query of the
    segments `queries` reaches under the window, merged and in order: a query
    segment [s, s + n) reaches the keys [s - left, s + n - 1 + right]."""
    left, right = window
    start, length = key_segment
    spans = []
    for s, n in queries:
        first = start if left < 0 else max(start, s - left)
        last = start + length - 1 if right < 0 else min(start + length - 1, s + n - 1 + right)
        if n > 0 and last >= first:
            spans.append([first, last])
    merged = []
    for first, last in sorted(spans):
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return [(first, last - first + 1) for first, last in merged]


class _Plan:
    """Who sends which slices to whom: the same on every rank."""

    def __init__(self, segments, rank, window):
        self.rank, self.segments, self.window = rank, segments, window
        # lent[(holder, reader)]: the holder's slices the reader's queries reach.
        self.lent = {}
        for holder, held in enumerate(segments):
            for reader, queries in enumerate(segments):
                if holder != reader:
                    slices = [r for g in held for r in _reach(queries, g, window)]
                    if slices:
                        self.lent[(holder, reader)] = slices
        self.offsets = []  # each of this rank's segments' first index along x_local's dim 1
        at = 0
        for _, n in segments[rank]:
            self.offsets.append(at)
            at += n

    def local(self, position):
        """Index along x_local of one of this rank's positions."""
        for (s, n), at in zip(self.segments[self.rank], self.offsets):
            if s <= position < s + n:
                return at + position - s
        raise AssertionError(f"position {position} is not rank {self.rank}'s")


# Bytes this process has passed to isend (features forward, their gradients
# backward), for measuring what a step communicates.
bytes_sent = 0


def _exchange(sends, receives, group):
    """Posts the isends ((tensor, peer), ...) and irecvs ((buffer, peer), ...), peers
    by their rank in `group`; returns their works."""
    global bytes_sent
    bytes_sent += sum(t.numel() * t.element_size() for t, _ in sends)
    rank = (lambda r: dist.get_global_rank(group, r)) if group else (lambda r: r)  # isend/irecv take global ranks
    works = [dist.isend(t.contiguous(), rank(peer), group=group) for t, peer in sends]
    works += [dist.irecv(buf, rank(peer), group=group) for buf, peer in receives]
    return works


def _slice(x, plan, s, n):
    at = plan.local(s)
    return x[:, at:at + n]


class _ContextParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, sigma, window, segments, group, kernel):
        rank = dist.get_rank(group)
        plan = _Plan(segments, rank, window)
        B, _, H, D = x.shape
        x = x.contiguous()
        sends = [(_slice(x, plan, s, n), reader)
                 for (holder, reader), slices in sorted(plan.lent.items()) if holder == rank for s, n in slices]
        keys = []  # (holder, start, tensor): every key block this rank's queries read, its own first
        receives = []
        for (holder, reader), slices in sorted(plan.lent.items()):
            if reader == rank:
                for s, n in slices:
                    buf = x.new_empty((B, n, H, D))
                    keys.append((holder, s, buf))
                    receives.append((buf, holder))
        works = _exchange(sends, receives, group)
        own = [(rank, s, _slice(x, plan, s, n)) for s, n in segments[rank] if n]
        partials = {k: [] for k in range(len(segments[rank]))}

        def run(blocks):
            for q, (qs, qn) in enumerate(segments[rank]):
                if not qn:
                    continue
                xq = _slice(x, plan, qs, qn)
                for _, ks, xk in blocks:
                    if _pairs(qs, qn, ks, xk.shape[1], window):
                        partials[q].append(torch.ops.gka.forward_chunk(xq, xk, sigma, qs, ks, *window, kernel))

        run(own)  # while the transfers run
        for w in works:
            w.wait()
        run(keys)
        ys, lses = [], []
        for q, (qs, qn) in enumerate(segments[rank]):
            y, lse = merge_chunks(*zip(*partials[q])) if partials[q] else (
                x.new_zeros((B, qn, H, D)), x.new_full((B, H, qn), float("-inf")))
            ys.append(y), lses.append(lse)
        y, lse = torch.cat(ys, dim=1), torch.cat(lses, dim=2)
        ctx.save_for_backward(x, sigma, y, lse, *[t for _, _, t in keys])
        ctx.key_origins = [(holder, s) for holder, s, _ in keys]
        ctx.window, ctx.segments, ctx.group, ctx.plan, ctx.kernel = window, segments, group, plan, kernel
        return y

    @staticmethod
    def backward(ctx, dy):
        x, sigma, y, lse, *lent_keys = ctx.saved_tensors
        plan, segments, window, group = ctx.plan, ctx.segments, ctx.window, ctx.group
        rank = plan.rank
        dy = dy.contiguous().to(x.dtype)
        dx = torch.zeros_like(x)
        dsigma = torch.zeros(sigma.shape, dtype=torch.float32)
        keys = [(rank, s, _slice(x, plan, s, n)) for s, n in segments[rank] if n]
        keys += [(holder, s, t) for (holder, s), t in zip(ctx.key_origins, lent_keys)]
        borrowed = {}  # (holder, start) -> the gradient of a lent key block, sent back
        for q, (qs, qn) in enumerate(segments[rank]):
            if not qn:
                continue
            at = plan.offsets[q]
            xq, yq, dyq = (t[:, at:at + qn] for t in (x, y, dy))
            lq = lse[:, :, at:at + qn]
            for holder, ks, xk in keys:
                if not _pairs(qs, qn, ks, xk.shape[1], window):
                    continue
                dq, dk, ds = torch.ops.gka.backward_chunk(xq, xk, sigma, yq, lq, dyq, qs, ks, *window,
                                                          ctx.kernel)
                dx[:, at:at + qn] += dq
                dsigma += ds
                if holder == rank:
                    kat = plan.local(ks)
                    dx[:, kat:kat + xk.shape[1]] += dk
                else:
                    borrowed[(holder, ks)] = borrowed.get((holder, ks), 0) + dk
        # The lent keys' gradients go back to their holders; this rank's come in, added in rank order.
        B, _, H, D = x.shape
        sends = [(borrowed.get((holder, s), x.new_zeros((B, n, H, D))), holder)
                 for (holder, reader), slices in sorted(plan.lent.items()) if reader == rank for s, n in slices]
        receives = [(x.new_empty((B, n, H, D)), s, reader)
                    for (holder, reader), slices in sorted(plan.lent.items()) if holder == rank for s, n in slices]
        works = _exchange(sends, [(buf, p) for buf, _, p in receives], group)
        for w in works:
            w.wait()
        for buf, s, _ in receives:
            at = plan.local(s)
            dx[:, at:at + buf.shape[1]] += buf
        dist.all_reduce(dsigma, group=group)
        return dx, dsigma.to(sigma.dtype), None, None, None, None


def context_parallel_gka(x_local, sigma, window=(-1, 0), group=None, layout="contiguous", segments=None,
                         kernel="gaussian"):
    """y_local [B, T_local, H, D]: GKA of the sequence whose tokens are sharded
    across `group` (default: the whole world), this rank's outputs. x_local holds
    this rank's tokens: under layout "contiguous", the r-th run of the sequence
    (any lengths; each rank's T_local is gathered), under "zigzag", the pieces
    segments_of(T, world, "zigzag") gives it (shard() cuts them). `segments`
    (one [(start, length), ...] per rank) overrides both. Gradients flow to
    x_local and sigma (summed over the group). float32 CPU tensors, gloo.
    kernel: as gka_attention's."""
    window = checked_window(window)  # before any rank waits on another
    kernel = _kernel(kernel)
    _check(x_local, sigma)
    if x_local.device.type != "cpu" or x_local.dtype != torch.float32:
        raise NotImplementedError(f"gka: context_parallel_gka runs the chunk kernels, float32 on the CPU; got "
                                  f"{x_local.dtype} on {x_local.device}")
    world = dist.get_world_size(group)
    lengths = [None] * world
    dist.all_gather_object(lengths, x_local.shape[1], group=group)
    if segments is None:
        if layout == "zigzag":
            segments = segments_of(sum(lengths), world, "zigzag")
        elif layout == "contiguous":
            starts = [sum(lengths[:r]) for r in range(world)]
            segments = [[(starts[r], lengths[r])] for r in range(world)]
        else:
            raise ValueError(f"gka: layout must be 'contiguous' or 'zigzag', got {layout!r}")
    # Every rank checks every rank, so that all raise together rather than wait on one that did.
    wrong = [r for r in range(world) if sum(n for _, n in segments[r]) != lengths[r]]
    if wrong:
        raise ValueError(f"gka: ranks {wrong} hold {[lengths[r] for r in wrong]} tokens, their segments say "
                         f"{[sum(n for _, n in segments[r]) for r in wrong]}")
    return _ContextParallel.apply(x_local, sigma, window, segments, group, kernel)

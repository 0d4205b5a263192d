#!/usr/bin/env python3
"""Data-parallel training of a small GKA language model with PyTorch's DDP (gloo, CPU).

    python examples/ddp/train_gka_ddp.py [--processes 2] [--steps 20] [--fsdp]

Trains the same byte-level model (embedding, blocks of RMSNorm -> gka_attention
-> W_O and RMSNorm -> MLP, head) from the same weights on the same global
batches twice: in one process on the whole batch, and with DistributedDataParallel
over --processes processes, each taking its share of every batch. DDP averages
the gradients, so both runs take the same steps: it prints both loss curves and
their largest difference, and exits 1 if that exceeds --tolerance. --fsdp wraps
the model with FSDP (fully_shard) instead of DDP. Set GKA_LIBRARY (or install
the project) so that gka_torch finds libgka; PYTHONPATH=python in the source tree.
"""
import argparse
import datetime
import gc
import os
import sys
import tempfile

try:
    import torch
except ImportError:
    print(f"SKIPPED: torch is not installed in {sys.executable} (docs/pytorch.md)")
    sys.exit(77)  # CTest's Skipped
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

from gka_torch import gka_attention


class Block(nn.Module):
    def __init__(self, heads, head_dim):
        super().__init__()
        dim = heads * head_dim
        self.heads, self.head_dim = heads, head_dim
        self.log_sigma = nn.Parameter(torch.full((heads,), 0.5 * float(torch.log(torch.tensor(head_dim / 2)))))
        self.out = nn.Linear(dim, dim, bias=False)
        self.fc, self.proj = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        h = F.rms_norm(x, (x.shape[-1],)).view(B, T, self.heads, self.head_dim)
        x = x + self.out(gka_attention(h, self.log_sigma.exp(), (-1, 0)).reshape(B, T, -1))
        return x + self.proj(F.relu(self.fc(F.rms_norm(x, (x.shape[-1],)))).square())


class Model(nn.Module):
    def __init__(self, layers=2, heads=2, head_dim=32):
        super().__init__()
        self.embed = nn.Embedding(256, heads * head_dim)
        self.blocks = nn.ModuleList(Block(heads, head_dim) for _ in range(layers))
        self.head = nn.Linear(heads * head_dim, 256, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(F.rms_norm(x, (x.shape[-1],)))


def batches(args):
    """The global batches: windows of seq + 1 bytes of the text at seeded offsets."""
    text = open(args.data, "rb").read() if os.path.isfile(args.data) else b"the quick brown fox jumps. " * 400
    data = torch.tensor(list(text), dtype=torch.long)
    g = torch.Generator().manual_seed(args.seed)
    for _ in range(args.steps):
        starts = torch.randint(0, len(data) - args.seq - 1, (args.batch,), generator=g)
        yield torch.stack([data[s:s + args.seq + 1] for s in starts])


def train(model, args, rank=0, world=1):
    """Losses of the global batch, step by step; this rank takes rows rank::world."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    losses = []
    for batch in batches(args):
        rows = batch[rank::world]
        logits = model(rows[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 256), rows[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        if world > 1:
            dist.all_reduce(mean)
            mean /= world
        losses.append(mean.item())
    return losses


def worker(rank, world, args, path, out):
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    model = Model()
    if args.fsdp:
        from torch.distributed.fsdp import fully_shard
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        wrapped = model
    else:
        wrapped = nn.parallel.DistributedDataParallel(model)
    losses = train(wrapped, args, rank, world)
    if rank == 0:
        torch.save(losses, out)
    # Leaving the group. DDP's reducer and FSDP's state hold the process group:
    # while they live, destroy_process_group() only unregisters it, and gloo's
    # worker threads run on into the interpreter's finalization, where dropping
    # the last reference to a work's tensors takes the GIL and aborts the process
    # ("terminate called without an active exception": 5 runs in 50 with DDP,
    # 9 in 50 with FSDP, on 2 cores).
    # So: every rank done with its peers, the holders released, then the group
    # destroyed and its threads joined while the interpreter is whole.
    dist.barrier()
    del wrapped, model
    gc.collect()
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8, help="global batch (a multiple of --processes)")
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", default="/usr/share/common-licenses/GPL-3")
    parser.add_argument("--fsdp", action="store_true", help="FSDP (fully_shard) instead of DDP")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()
    if args.batch % args.processes:
        parser.error("--batch must be a multiple of --processes")

    if args.fsdp:
        try:
            from torch.distributed.fsdp import fully_shard  # noqa: F401  (torch >= 2.6)
        except ImportError:
            print(f"SKIPPED: this torch ({torch.__version__}) has no torch.distributed.fsdp.fully_shard")
            return 77
    torch.manual_seed(args.seed)
    single = train(Model(), args)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "losses.pt")
        mp.spawn(worker, args=(args.processes, args, os.path.join(d, "rendezvous"), out), nprocs=args.processes)
        parallel = torch.load(out)
    kind = "FSDP" if args.fsdp else "DDP"
    print(f"step  one process  {kind} x{args.processes}")
    for step, (a, b) in enumerate(zip(single, parallel)):
        print(f"{step:4d}  {a:.6f}     {b:.6f}")
    worst = max(abs(a - b) for a, b in zip(single, parallel))
    print(f"largest loss difference: {worst:.2e} (tolerance {args.tolerance:g})")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())

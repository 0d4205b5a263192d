#!/usr/bin/env python3
"""Trains the ViT of vit.py on scikit-learn's handwritten digits (8x8 images, shipped
inside the scikit-learn wheel: nothing is downloaded) with GKA or dot-product attention.

    python examples/vision/train.py --attention gka|dot [--steps N] [--out DIR]

Prints the step, losses and accuracies of the whole train and test splits, images/s and
the learned sigmas; with --out writes DIR/log.csv and DIR/summary.json. Set GKA_LIBRARY
(or install the project) so that gka_torch finds libgka; PYTHONPATH=python in the
source tree.
"""
import argparse
import csv
import json
import math
import pathlib
import time

import torch
import torch.nn.functional as F

import gka_torch
from vit import ViT

TEST_FRACTION = 0.2  # 1,437 training and 360 test images, stratified by class
SPLIT_SEED = 0       # the split is fixed, whatever --seed


def digits():
    """(train images, train labels, test images, test labels): [N, 8, 8] float32 in [0, 1]."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    data = load_digits()
    images = torch.tensor(data.images, dtype=torch.float32) / 16  # 17 grey levels, 0 to 16
    labels = torch.tensor(data.target)
    train, test = train_test_split(range(len(labels)), test_size=TEST_FRACTION, random_state=SPLIT_SEED,
                                   stratify=data.target)
    return images[train], labels[train], images[test], labels[test]


def batches(count, batch, steps, seed):
    """Index batches: a seeded shuffle of the training set each epoch, the same order for both attentions."""
    g = torch.Generator().manual_seed(seed)
    order = torch.empty(0, dtype=torch.long)
    for _ in range(steps):
        if len(order) < batch:
            order = torch.cat([order, torch.randperm(count, generator=g)])
        yield order[:batch]
        order = order[batch:]


def learning_rate(args, step):
    """Linear warm-up over the first 5% of the steps, then a cosine decay to 10% (examples/train_lm's)."""
    warmup = max(1, args.steps // 20)
    if step < warmup:
        return args.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, args.steps - warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def optimizer_for(model, args):
    """AdamW as examples/train_lm's: weight decay on matrices only (not the bandwidths)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([dict(params=decay, weight_decay=args.weight_decay), dict(params=rest, weight_decay=0)],
                             lr=args.lr, betas=(0.9, 0.95), eps=1e-8)


@torch.no_grad()
def evaluate(model, images, labels):
    """(mean cross-entropy, accuracy) over a whole split."""
    logits = model(images)
    return F.cross_entropy(logits, labels).item(), (logits.argmax(1) == labels).float().mean().item()


def train(attention, args, log=print):
    """Trains one model, "gka" or "dot"; returns (log rows, summary)."""
    train_x, train_y, test_x, test_y = digits()
    torch.manual_seed(args.seed)
    model = ViT(attention, patch=args.patch, heads=args.heads, head_dim=args.head_dim, layers=args.layers)
    optimizer = optimizer_for(model, args)
    flops, attention_flops = model.training_flops_per_image()
    log(f"train: {attention} attention, {args.layers} layers, width {args.heads * args.head_dim} "
        f"({args.heads} heads x {args.head_dim}), {model.tokens} patches of {args.patch}x{args.patch}, "
        f"{sum(p.numel() for p in model.parameters())} parameters ({model.attention_parameters()} in attention), "
        f"{flops:.3g} training FLOPs/image ({attention_flops:.3g} in attention); {len(train_y)} training and "
        f"{len(test_y)} test images; libgka family {gka_torch.cpu_family()}, {torch.get_num_threads()} threads")
    rows, seconds, images_per_s = [], 0.0, 0.0
    for step, index in enumerate(batches(len(train_y), args.batch, args.steps + 1, args.seed)):
        if step % args.eval_every == 0 or step == args.steps:
            train_loss, train_accuracy = evaluate(model, train_x, train_y)
            test_loss, test_accuracy = evaluate(model, test_x, test_y)
            rows.append(dict(step=step, train_loss=train_loss, test_loss=test_loss, train_accuracy=train_accuracy,
                             test_accuracy=test_accuracy, images_per_s=images_per_s, elapsed_s=seconds))
            log(f"step {step:5d}/{args.steps}  loss train {train_loss:.4f} test {test_loss:.4f}  accuracy train "
                f"{train_accuracy:.4f} test {test_accuracy:.4f}  {images_per_s:.0f} images/s  sigma {model.sigmas()}")
        if step == args.steps:
            break
        start = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(args, step)
        loss = F.cross_entropy(model(train_x[index]), train_y[index])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seconds += time.perf_counter() - start
        images_per_s = args.batch * (step + 1) / seconds
    final = rows[-1]
    summary = dict(attention=attention, tokens=model.tokens, parameters=sum(p.numel() for p in model.parameters()),
                   attention_parameters=model.attention_parameters(), training_flops_per_image=flops,
                   attention_training_flops_per_image=attention_flops, sigma=model.sigmas(),
                   cpu_family=gka_torch.cpu_family(), threads=torch.get_num_threads(), **final)
    return rows, summary


def add_options(p):
    """The options of the model, the optimizer and the budget (compare.py's too)."""
    p.add_argument("--patch", type=int, default=2, help="patch side in pixels (8x8 images)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=16)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--eval-every", type=int, default=40)
    p.add_argument("--seed", type=int, default=1, help="initialization and data order")
    return p


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--attention", choices=("gka", "dot"), default="gka")
    p.add_argument("--out", help="writes log.csv and summary.json here")
    args = add_options(p).parse_args()
    rows, summary = train(args.attention, args)
    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "log.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()

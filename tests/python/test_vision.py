"""The ViT of examples/vision with GKA over the whole image (window (-1, -1)), on
scikit-learn's digits: every parameter's gradient, over a few training steps, against
the same model in double with an eager GKA (gka_torch.reference) in place of libgka;
and a short training run lowers the loss.

Run: GKA_LIBRARY=build/runtime/libgka.so PYTHONPATH=python python tests/python/test_vision.py [-v]
(CTest: gka.torch.vision). Without torch or scikit-learn it prints SKIPPED and exits 77,
which CTest reports as Skipped.

Tolerance: the model runs in float32 and the reference in double, so each gradient is
compared relative to its largest magnitude, at 1e-4: float32 rounding through four
blocks measures below 1e-5, while a wrong or missing term of GKA's backward (a path
of dx, or dsigma) errs by far more than 1e-2.
"""
import argparse
import copy
import importlib.util
import pathlib
import sys
import unittest

SKIP_RETURN_CODE = 77
missing = [package for package, module in (("torch", "torch"), ("scikit-learn", "sklearn"))
           if importlib.util.find_spec(module) is None]
if missing:
    message = (f"SKIPPED: {' and '.join(missing)} not installed in {sys.executable}; bash scripts/setup.sh torch "
               "installs torch and scikit-learn into .venv (docs/vision.md)")
    if __name__ == "__main__":
        print(message)
        sys.exit(SKIP_RETURN_CODE)
    raise unittest.SkipTest(message)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "vision"))
import gka_torch  # noqa: E402
import train  # noqa: E402
import vit  # noqa: E402

RTOL = 1e-4


class EagerGka(nn.Module):
    """GaussianKernelAttention's forward in plain PyTorch, with the same log_sigma."""

    def __init__(self, kernel):
        super().__init__()
        self.heads, self.head_dim = kernel.heads, kernel.head_dim
        self.log_sigma = nn.Parameter(kernel.log_sigma.detach().clone())

    def forward(self, h):
        x = h.unflatten(2, (self.heads, self.head_dim))
        return gka_torch.gka_attention_reference(x, self.log_sigma.exp(), vit.FULL_WINDOW).flatten(2)


def options(*argv):
    return train.add_options(argparse.ArgumentParser()).parse_args(list(argv))


def gradients(model, images, labels):
    model.zero_grad()
    F.cross_entropy(model(images), labels).backward()
    return {name: p.grad.double() for name, p in model.named_parameters()}


class VisionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = train.digits()

    def test_gradients_match_eager_reference(self):
        args = options()
        train_x, train_y = self.data[:2]
        torch.manual_seed(args.seed)
        model = vit.ViT("gka")
        reference = copy.deepcopy(model).double()
        for block in reference.blocks:
            block.attention.kernel = EagerGka(block.attention.kernel)
        optimizer = train.optimizer_for(model, args)
        initial_sigma = [block.attention.kernel.sigma for block in model.blocks]
        worst = 0.0
        for step, index in enumerate(train.batches(len(train_y), args.batch, 4, args.seed)):
            reference.load_state_dict(model.state_dict())  # the model's weights at this step, in double
            got = gradients(model, train_x[index], train_y[index])
            want = gradients(reference, train_x[index].double(), train_y[index])
            self.assertEqual(got.keys(), want.keys())
            for name in want:
                error = ((got[name] - want[name]).abs().max() / want[name].abs().max().clamp_min(1e-30)).item()
                self.assertLessEqual(error, RTOL, f"step {step}: {name}")
                worst = max(worst, error)
            sigma_grads = [want[n] for n in want if n.endswith("log_sigma")]
            self.assertEqual(len(sigma_grads), len(model.blocks))
            self.assertTrue(all(g.abs().max() > 0 for g in sigma_grads))
            optimizer.step()
        for block, sigma in zip(model.blocks, initial_sigma):  # the later steps were at other bandwidths
            self.assertFalse(torch.equal(block.attention.kernel.sigma, sigma))
        print(f"largest relative gradient error: {worst:.1e} (tolerance {RTOL:g})", file=sys.stderr)

    def test_training_lowers_the_loss(self):
        # GKA leaves the plateau at log(10) after about 15 steps; 60 take it to about 1.2 (seed 1).
        rows, _ = train.train("gka", options("--steps", "60", "--eval-every", "60"), log=lambda line: None)
        first, last = rows[0], rows[-1]
        self.assertEqual(last["step"], 60)
        self.assertLess(last["train_loss"], 0.6 * first["train_loss"])
        self.assertGreater(last["test_accuracy"], 0.5)  # chance is 0.1


if __name__ == "__main__":
    print(f"torch {torch.__version__}, libgka {gka_torch.library_path} ({gka_torch.cpu_family()})", file=sys.stderr)
    unittest.main()

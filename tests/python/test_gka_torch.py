"""gka_torch against a plain PyTorch GKA (gka_torch.reference) in double precision.

Run: GKA_LIBRARY=build/runtime/libgka.so PYTHONPATH=python python tests/python/test_gka_torch.py [-v]
(CTest: gka.torch). Without PyTorch it prints SKIPPED and exits 77, which CTest
reports as Skipped; under unittest/pytest discovery the module is skipped.

Tolerances: the kernels compute in float32, so each tensor is compared with the
double reference relative to its largest magnitude, at 1e-5: the largest errors
measured on every CPU family are 6e-7 (y), 9e-7 (dx) and 1.4e-6 (dsigma, a sum
over B*T*T pairs), while a wrong or missing term errs by far more than 1e-3.
"""
import os
import sys
import unittest

SKIP_RETURN_CODE = 77
try:
    import torch
except ImportError:
    torch = None
    SKIP_MESSAGE = (f"SKIPPED: torch is not installed in {sys.executable}; install with "
                    f"{sys.executable} -m pip install torch (PyPI; where download.pytorch.org is reachable, "
                    "--index-url https://download.pytorch.org/whl/cpu gets the smaller CPU-only wheel; see "
                    "docs/pytorch.md)")
if torch is None:
    if __name__ == "__main__":
        print(SKIP_MESSAGE)
        sys.exit(SKIP_RETURN_CODE)
    raise unittest.SkipTest(SKIP_MESSAGE)

import gka_torch  # noqa: E402  (after the torch check)
from gka_torch import gka_attention, gka_forward_reference  # noqa: E402

WINDOWS = [(-1, -1), (-1, 0), (3, 0), (2, 2)]
HEAD_DIMS = [64, 128, 24]  # the two constant-loop kernels and the any-D one
B, T, H = 2, 37, 3
RTOL = 1e-5


def inputs(d, seed=0, b=B, t=T, h=H):
    """x [b,t,h,d] and sigma [h] in double: sigmas around the typical distance
    (|x_i - x_j|^2 ~ 2d) so that heads range from sharp to flat."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, h, d, generator=g, dtype=torch.float64)
    sigma = torch.linspace(0.5, 1.5, h, dtype=torch.float64) * d ** 0.5
    return x, sigma


def reference_with_gradients(x, sigma, window, seed, kernel="gaussian"):
    """The double reference's y and, for L = sum(y * dy) with a random dy, dL/dx and dL/dsigma."""
    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    xr, sr = x.clone().requires_grad_(), sigma.clone().requires_grad_()
    y = gka_forward_reference(xr, sr, window, kernel)[0]
    (y * dy).sum().backward()
    return y.detach(), dy, xr.grad, sr.grad


def rel_err(got, want):
    return ((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


class ForwardBackward(unittest.TestCase):
    max_errors = {}

    @classmethod
    def tearDownClass(cls):
        print("\nlargest relative errors vs the double reference:",
              ", ".join(f"{k} {v:.2e}" for k, v in cls.max_errors.items()), file=sys.stderr)

    def note(self, name, err):
        self.max_errors[name] = max(self.max_errors.get(name, 0.0), err)
        return err

    def test_forward_matches_reference(self):
        for d in HEAD_DIMS:
            for window in WINDOWS:
                with self.subTest(d=d, window=window):
                    x, sigma = inputs(d)
                    want_y, want_lse = gka_forward_reference(x, sigma, window)
                    y, lse = torch.ops.gka.forward(x.float(), sigma.float(), *window)
                    self.assertEqual(y.shape, x.shape)
                    self.assertEqual(lse.shape, (B, H, T))
                    self.assertLess(self.note("y", rel_err(y, want_y)), RTOL)
                    self.assertLess(self.note("lse", rel_err(lse, want_lse)), RTOL)
                    self.assertTrue(torch.equal(gka_attention(x.float(), sigma.float(), window), y))

    def test_gradients_match_reference(self):
        for d in HEAD_DIMS:
            for window in WINDOWS:
                with self.subTest(d=d, window=window):
                    x, sigma = inputs(d, seed=1)
                    _, dy, want_dx, want_dsigma = reference_with_gradients(x, sigma, window, seed=2)
                    xf, sf = x.float().requires_grad_(), sigma.float().requires_grad_()
                    (gka_attention(xf, sf, window) * dy.float()).sum().backward()
                    self.assertLess(self.note("dx", rel_err(xf.grad, want_dx)), RTOL)
                    self.assertLess(self.note("dsigma", rel_err(sf.grad, want_dsigma)), RTOL)
                    self.assertGreater(want_dsigma.abs().min().item(), 0.0)  # a real test of dsigma

    def test_score_forms(self):
        # Each score form from PyTorch, as from the C ABI: same results within the
        # contract, and libgka says which kernel ran.
        x, sigma = inputs(24, seed=5)
        want_y, _ = gka_forward_reference(x, sigma, (-1, 0))
        try:
            for form in ("direct", "centred", "origin", "auto"):
                gka_torch.set_score_form(form)
                self.assertEqual(gka_torch.score_form(), form)
                y, _ = torch.ops.gka.forward(x.float(), sigma.float(), -1, 0)
                ran = gka_torch.last_kernel()  # x ~ N(0, 1): "auto" keeps the origin form
                self.assertEqual(ran.endswith("_direct"), form == "direct")
                self.assertEqual(ran.endswith("_origin"), form in ("origin", "auto"))
                self.assertLess(rel_err(y, want_y), RTOL)
            gka_torch.set_score_form("expansion")  # the centred form's alias
            self.assertEqual(gka_torch.score_form(), "centred")
            with self.assertRaises(ValueError):
                gka_torch.set_score_form("fast")
        finally:
            gka_torch.set_score_form("auto")
        self.assertEqual(gka_torch.score_form(), "auto")

    def test_gradient_through_sum(self):
        # y.sum().backward() hands the op an expanded (stride 0) dy.
        x, sigma = inputs(24, seed=3)
        xr, sr = x.clone().requires_grad_(), sigma.clone().requires_grad_()
        gka_forward_reference(xr, sr)[0].sum().backward()
        xf, sf = x.float().requires_grad_(), sigma.float().requires_grad_()
        gka_attention(xf, sf).sum().backward()
        self.assertLess(rel_err(xf.grad, xr.grad), RTOL)
        self.assertLess(rel_err(sf.grad, sr.grad), RTOL)

    def test_sigma_gradient_only(self):
        x, sigma = inputs(64, seed=4)
        sf = sigma.float().requires_grad_()
        gka_attention(x.float(), sf).square().sum().backward()
        sr = sigma.clone().requires_grad_()
        gka_forward_reference(x, sr)[0].square().sum().backward()
        self.assertLess(rel_err(sf.grad, sr.grad), RTOL)

    def test_non_contiguous_input(self):
        x, sigma = inputs(24, seed=5)
        xt = x.float().transpose(1, 2).contiguous().transpose(1, 2)  # [B,T,H,D] view, not contiguous
        self.assertFalse(xt.is_contiguous())
        self.assertTrue(torch.equal(gka_attention(xt, sigma.float()), gka_attention(xt.contiguous(), sigma.float())))

    def test_lse_is_not_differentiable(self):
        x, sigma = inputs(24)
        y, lse = torch.ops.gka.forward(x.float().requires_grad_(), sigma.float(), -1, 0)
        self.assertTrue(y.requires_grad)
        self.assertFalse(lse.requires_grad)

    def test_any_zero_dimension_gives_empty_results(self):
        # gka.h: libgka refuses every zero dimension alike and gka_torch gives the
        # results without a kernel: y and dx empty, dsigma 0, and where only D is
        # 0 every score is 0, so lse is the log of each row's key count, as the
        # reference gives it.
        for shape in ((0, 5, 2, 8), (2, 0, 2, 8), (2, 5, 0, 8), (2, 5, 2, 0)):
            for window in WINDOWS:
                with self.subTest(shape=shape, window=window):
                    x = torch.zeros(shape, requires_grad=True)
                    sigma = torch.ones(shape[2], requires_grad=True)
                    y, lse = gka_attention(x, sigma, window, return_lse=True)
                    want_y, want_lse = gka_forward_reference(x.detach().double(), sigma.detach().double(), window)
                    self.assertEqual((y.shape, lse.shape), (want_y.shape, want_lse.shape))
                    self.assertTrue(torch.equal(lse, want_lse.float()))
                    y.sum().backward()
                    self.assertEqual(x.grad.shape, x.shape)
                    self.assertTrue(torch.equal(sigma.grad, torch.zeros(shape[2])))

    def test_zero_head_dim_in_every_op(self):
        # The same rule in the varlen, chunk and decode ops: log key counts.
        x, sigma = torch.zeros(1, 6, 2, 0), torch.ones(2)
        counts = torch.arange(1, 7).double().log().float()  # causal: row t has t + 1 keys
        lse = torch.ops.gka.forward_varlen(x[0], torch.tensor([0, 2, 6]), sigma, -1, 0)[1]
        self.assertTrue(torch.equal(lse, torch.cat([counts[:2], counts[:4]]).expand(2, 6)))
        lse = torch.ops.gka.forward_chunk(x[:, 3:], x[:, :2], sigma, 3, 0, 2, 0)[1]  # keys 0, 1 for queries 3..5
        self.assertTrue(torch.equal(lse, torch.tensor([0.0, float("-inf"), float("-inf")]).expand(1, 2, 3)))
        y, lse = torch.ops.gka.decode(x[:, :2], torch.zeros(1, 8, 2, 0), torch.tensor([3]), sigma, -1, 0)
        self.assertTrue(torch.equal(lse, counts[3:5].expand(1, 2, 2)))
        self.assertEqual(y.shape, (1, 2, 2, 0))


class BFloat16(unittest.TestCase):
    """bfloat16 features run libgka's bfloat16 kernels (float32 arithmetic, y and
    dx rounded once): against the double reference of the same bfloat16 inputs,
    relative to each tensor's largest magnitude, within the bfloat16 contract's
    1e-2 (y) and 2e-2 (dx, dsigma); lse within 2e-3 absolute."""

    def test_forward_and_gradients_match_reference(self):
        for d in HEAD_DIMS:
            for window in WINDOWS:
                with self.subTest(d=d, window=window):
                    x, sigma = inputs(d, seed=11)
                    xb = x.to(torch.bfloat16)
                    want_y, want_lse = gka_forward_reference(xb.double(), sigma, window)
                    _, dy, want_dx, _ = reference_with_gradients(xb.double(), sigma, window, seed=12)
                    xr, sr = xb.clone().requires_grad_(), sigma.float().requires_grad_()
                    y, lse = torch.ops.gka.forward(xr, sr, *window)
                    self.assertIn("_bf16", gka_torch.last_kernel())
                    self.assertEqual((y.dtype, lse.dtype), (torch.bfloat16, torch.float32))
                    self.assertLess(rel_err(y, want_y), 1e-2)
                    self.assertLess((lse.double() - want_lse).abs().max().item(), 2e-3)
                    (y * dy.to(torch.bfloat16)).sum().backward()
                    self.assertIn("_bf16", gka_torch.last_kernel())
                    self.assertEqual((xr.grad.dtype, sr.grad.dtype), (torch.bfloat16, torch.float32))
                    self.assertLess(rel_err(xr.grad, want_dx), 2e-2)
                    # dsigma sums terms that cancel and move with y's rounding to
                    # bfloat16 (the C++ tests judge it by the contract's metric, fed
                    # the kernel's y): here, the float32 backward given the same y.
                    _, want_ds32 = torch.ops.gka.backward(xb.float(), sr.detach(), y.float(), lse,
                                                          dy.to(torch.bfloat16).float(), *window)
                    self.assertLess(rel_err(sr.grad, want_ds32.double()), 1e-5)

    def test_bf16_sigma_and_its_gradient(self):
        # A bfloat16 sigma is widened exactly: the float32 sigma of the same values
        # gives the same y and the same gradient, which comes back rounded.
        x, sigma = inputs(24, seed=13)
        xb = x.to(torch.bfloat16)
        sb = sigma.to(torch.bfloat16).requires_grad_()
        sf = sigma.to(torch.bfloat16).float().requires_grad_()
        y = gka_attention(xb, sb)
        self.assertTrue(torch.equal(y, gka_attention(xb, sf)))
        y.float().sum().backward()
        gka_attention(xb, sf).float().sum().backward()
        self.assertEqual(sb.grad.dtype, torch.bfloat16)
        self.assertTrue(torch.equal(sb.grad, sf.grad.to(torch.bfloat16)))

    def test_autocast_runs_the_bf16_kernels_and_keeps_sigma(self):
        x, sigma = inputs(64, seed=6)
        sigma = sigma * 0.35 + 0.001234  # sharp heads, a sigma that bfloat16 would round
        sf = sigma.float().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = gka_attention(x.float(), sf)
        self.assertEqual(y.dtype, torch.bfloat16)
        self.assertIn("_bf16", gka_torch.last_kernel())
        # x rounded, sigma not: a bfloat16 sigma would move sharp heads' scores.
        self.assertTrue(torch.equal(y, gka_attention(x.to(torch.bfloat16), sigma.float())))
        self.assertFalse(torch.equal(y, gka_attention(x.to(torch.bfloat16), sigma.to(torch.bfloat16))))
        y.float().sum().backward()
        self.assertEqual(sf.grad.dtype, torch.float32)

    def test_compiled_step_is_one_graph(self):
        torch._dynamo.reset()
        x, sigma = (t.to(torch.bfloat16) for t in inputs(24, seed=14))

        def step(x, sigma):
            return gka_attention(torch.tanh(x), sigma, window=(3, 0)).float().square().mean()
        explained = torch._dynamo.explain(step)(x, sigma)
        self.assertEqual(explained.graph_break_count, 0, explained.break_reasons)
        xr = x.clone().requires_grad_()
        compiled = torch.compile(step, fullgraph=True)
        loss = compiled(xr, sigma)
        loss.backward()
        xe = x.clone().requires_grad_()
        step(xe, sigma).backward()
        torch.testing.assert_close(loss, step(x, sigma))
        self.assertTrue(torch.equal(xr.grad, xe.grad))


@unittest.skipUnless(torch.cuda.is_available() and gka_torch.has_cuda(),
                     "needs a CUDA device and a libgka with CUDA entry points")
class CudaTensors(unittest.TestCase):
    """CUDA tensors go to gka_forward_cuda / gka_backward_cuda on torch's current
    stream (tests/gpu/check.sh runs this class on a GPU machine)."""

    def test_forward_and_gradients_match_reference(self):
        stream = torch.cuda.Stream()  # not the default one: the op must follow torch's current stream
        for d in HEAD_DIMS:
            for window in WINDOWS:
                with self.subTest(d=d, window=window):
                    x, sigma = inputs(d, seed=7)
                    want_y, dy, want_dx, want_dsigma = reference_with_gradients(x, sigma, window, seed=8)
                    with torch.cuda.stream(stream):
                        xc = x.float().cuda().requires_grad_()
                        sc = sigma.float().cuda().requires_grad_()
                        y = gka_attention(xc, sc, window)
                        (y * dy.float().cuda()).sum().backward()
                    stream.synchronize()
                    self.assertEqual(y.device.type, "cuda")
                    self.assertLess(rel_err(y.cpu(), want_y), RTOL)
                    self.assertLess(rel_err(xc.grad.cpu(), want_dx), RTOL)
                    self.assertLess(rel_err(sc.grad.cpu(), want_dsigma), RTOL)

    def test_bf16_runs_the_bf16_kernels(self):
        for window in WINDOWS:
            with self.subTest(window=window):
                x, sigma = inputs(64, seed=9)
                want_y, dy, want_dx, want_dsigma = reference_with_gradients(x.to(torch.bfloat16).double(), sigma,
                                                                            window, seed=10)
                xc = x.to(torch.bfloat16).cuda().requires_grad_()
                y = gka_attention(xc, sigma.float().cuda(), window)
                self.assertIn("_bf16", gka_torch.last_kernel())
                self.assertEqual(y.dtype, torch.bfloat16)
                (y * dy.to(torch.bfloat16).cuda()).sum().backward()
                self.assertEqual(xc.grad.dtype, torch.bfloat16)
                self.assertLess(rel_err(y.cpu(), want_y), 1e-2)
                self.assertLess(rel_err(xc.grad.cpu(), want_dx), 2e-2)

    def test_decode_matches_reference(self):
        for window, capacity, dtype, tol in (((-1, 0), 40, torch.float32, RTOL), ((5, 0), 5, torch.float32, RTOL),
                                             ((-1, 0), 40, torch.bfloat16, 1e-2)):
            with self.subTest(window=window, capacity=capacity, dtype=dtype):
                x, sigma = inputs(64, seed=3, b=2, t=40, h=2)
                x = x.to(dtype).double()
                want = gka_forward_reference(x, sigma, window)[0]
                y = decode_all(x, sigma, window, capacity, dtype, "cuda")
                self.assertIn("cuda", gka_torch.last_kernel())
                self.assertLess(rel_err(y, want), tol)

    def test_chunks_match_reference(self):
        for window in ((-1, 0), (4, 0), (2, 3)):
            with self.subTest(window=window):
                x, sigma = inputs(64, seed=11, b=2, t=70, h=2)
                want, dy, want_dx, want_dsigma = reference_with_gradients(x, sigma, window, seed=12)
                xc, sc = x.float().cuda().requires_grad_(), sigma.float().cuda().requires_grad_()
                y = gka_torch.gka_attention_chunked(xc, sc, window, 32)
                self.assertIn("cuda", gka_torch.last_kernel())
                (y.double() * dy.cuda()).sum().backward()
                self.assertLess(rel_err(y.cpu(), want), RTOL)
                self.assertLess(rel_err(xc.grad.cpu(), want_dx), RTOL)
                self.assertLess(rel_err(sc.grad.cpu(), want_dsigma), RTOL)

    def test_varlen_matches_cpu(self):
        lengths = [5, 0, 23, 1, 40]
        x, sigma = inputs(64, seed=13, b=1, t=sum(lengths), h=2)
        cu = torch.tensor([0] + lengths).cumsum(0)
        dy = torch.randn(x[0].shape, generator=torch.Generator().manual_seed(14))
        for window in ((-1, 0), (4, 0), (-1, -1)):
            with self.subTest(window=window):
                grads = []
                for device in ("cpu", "cuda"):
                    xd = x[0].float().to(device).requires_grad_()
                    sd = sigma.float().to(device).requires_grad_()
                    y = gka_torch.gka_attention_varlen(xd, cu.to(device), sd, window)  # a CUDA cu_seqlens too
                    self.assertEqual(y.device.type, device)
                    (y * dy.to(device)).sum().backward()
                    grads.append((y.detach().cpu(), xd.grad.cpu(), sd.grad.cpu()))
                self.assertIn("cuda", gka_torch.last_kernel())
                for got, want in zip(grads[1], grads[0]):
                    self.assertLess(rel_err(got.double(), want.double()), RTOL)

    def test_autocast_runs_bf16_and_float16_runs_float32(self):
        x, sigma = inputs(24)
        sf = sigma.float().cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = gka_attention(x.float().cuda(), sf)
        self.assertEqual(y.dtype, torch.bfloat16)
        self.assertIn("_bf16", gka_torch.last_kernel())
        with torch.autocast("cuda", dtype=torch.float16):
            y = gka_attention(x.half().cuda(), sf)
        self.assertEqual(y.dtype, torch.float32)


class Gradcheck(unittest.TestCase):
    """torch.autograd.gradcheck in double on a tiny shape. The kernels are float32
    only, so (1) the reference itself is gradchecked (its autograd gradients,
    which the tests above hold the kernels to, against finite differences), and
    (2) libgka's backward is gradchecked as the analytic gradient of the double
    reference's forward: finite differences in double, the analytic Jacobian
    from gka::backward in float32, hence float32-sized tolerances there."""

    shape = dict(b=1, t=6, h=2, d=3)

    def test_reference_gradcheck(self):
        for window in WINDOWS:
            with self.subTest(window=window):
                x, sigma = inputs(seed=7, **self.shape)
                x.requires_grad_(), sigma.requires_grad_()
                self.assertTrue(torch.autograd.gradcheck(
                    lambda a, s: gka_forward_reference(a, s, window)[0], (x, sigma)))

    def test_gka_backward_gradcheck_against_reference(self):
        class KernelGradientOfReference(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, sigma, window):
                ctx.save_for_backward(x, sigma)
                ctx.window = window
                return gka_forward_reference(x, sigma, window)[0]

            @staticmethod
            def backward(ctx, dy):
                x, sigma = ctx.saved_tensors
                xf, sf = x.float(), sigma.float()
                y, lse = torch.ops.gka.forward(xf, sf, *ctx.window)
                dx, dsigma = torch.ops.gka.backward(xf, sf, y, lse, dy.float(), *ctx.window)
                return dx.double(), dsigma.double(), None

        for window in WINDOWS:
            with self.subTest(window=window):
                x, sigma = inputs(seed=8, **self.shape)
                x.requires_grad_(), sigma.requires_grad_()
                self.assertTrue(torch.autograd.gradcheck(
                    lambda a, s: KernelGradientOfReference.apply(a, s, window), (x, sigma),
                    eps=1e-6, atol=1e-5, rtol=1e-4))


class Errors(unittest.TestCase):
    def setUp(self):
        self.x, self.sigma = (t.float() for t in inputs(8, b=1, t=5, h=2))

    def test_wrong_dtype(self):
        with self.assertRaisesRegex(TypeError, "float32"):
            gka_attention(self.x.double(), self.sigma)
        with self.assertRaisesRegex(TypeError, "sigma must be float32 or bfloat16"):
            gka_attention(self.x, self.sigma.half())

    def test_wrong_shape(self):
        with self.assertRaisesRegex(ValueError, r"x must be \[batch, seq_len, heads, head_dim\]"):
            gka_attention(self.x[0], self.sigma)
        with self.assertRaisesRegex(ValueError, r"sigma must be \[heads\] = \[2\]"):
            gka_attention(self.x, torch.ones(3))

    def test_bad_sigma_values(self):
        for bad in (0.0, -1.0, float("nan"), float("inf")):
            with self.subTest(sigma=bad), self.assertRaisesRegex(ValueError, "each sigma must be finite and > 0"):
                gka_attention(self.x, torch.tensor([1.0, bad]))

    def test_bad_window(self):
        with self.assertRaisesRegex(ValueError, r"window \(-2, 0\): left and right must be >= -1"):
            gka_attention(self.x, self.sigma, (-2, 0))
        with self.assertRaisesRegex(ValueError, "window left must be an int"):
            gka_attention(self.x, self.sigma, (1.5, 0))
        with self.assertRaisesRegex(TypeError, "window must be a pair"):
            gka_attention(self.x, self.sigma, 3)

    def test_wrong_device(self):
        with self.assertRaisesRegex(ValueError, "CPU or a CUDA device"):
            gka_attention(self.x.to("meta"), self.sigma.to("meta"))

    def test_cuda_without_entry_points(self):
        if gka_torch.has_cuda():
            self.skipTest("this libgka has CUDA entry points")
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():  # CUDA tensors' metadata, no GPU needed
            x, sigma = torch.empty(1, 5, 2, 8, device="cuda"), torch.ones(2, device="cuda")
            with self.assertRaisesRegex(NotImplementedError, "has no CUDA kernels"):
                gka_attention(x, sigma)


def decode_all(x, sigma, window, capacity, dtype=torch.float32, device="cpu"):
    """y of x [B,T,H,D] decoded a token at a time into an empty cache of `capacity` slots."""
    b, t, h, d = x.shape
    cache = torch.full((b, capacity, h, d), float("nan"), dtype=dtype, device=device)  # never read before written
    ys = []
    for pos in range(t):
        lens = torch.full((b,), pos, dtype=torch.int64)
        ys.append(gka_torch.gka_decode(x[:, pos:pos + 1].to(device, dtype), cache, lens,
                                       sigma.to(device, torch.float32), window))
    return torch.cat(ys, dim=1).cpu()


class Decode(unittest.TestCase):
    """gka_decode token by token against the double reference of the whole sequence."""

    def test_token_by_token_matches_reference(self):
        for window, capacity in (((-1, 0), 40), ((5, 0), 5), ((5, 0), 8)):
            with self.subTest(window=window, capacity=capacity):
                x, sigma = inputs(24, seed=3, b=2, t=40, h=2)
                want = gka_forward_reference(x, sigma, window)[0]
                y = decode_all(x, sigma, window, capacity)
                self.assertEqual(gka_torch.last_kernel()[:len("gka_decode_")], "gka_decode_")
                self.assertLess(rel_err(y, want), RTOL)

    def test_bf16(self):
        x, sigma = inputs(64, seed=4, b=1, t=20, h=2)
        x = x.to(torch.bfloat16).double()
        want = gka_forward_reference(x, sigma, (-1, 0))[0]
        y = decode_all(x, sigma, (-1, 0), 20, torch.bfloat16)
        self.assertEqual(y.dtype, torch.bfloat16)
        self.assertLess(rel_err(y, want), 1e-2)

    def test_several_new_tokens_and_lengths(self):
        x, sigma = inputs(16, seed=5, b=2, t=12, h=3)
        want = gka_forward_reference(x, sigma, (-1, 0))[0]
        cache = torch.zeros(2, 16, 3, 16)
        cache[0, :5], cache[1, :9] = x[0, :5].float(), x[1, :9].float()
        lens = torch.tensor([5, 9])
        new = torch.stack([x[0, 5:8], x[1, 9:12]]).float()
        y = gka_torch.gka_decode(new, cache, lens, sigma.float())
        self.assertLess(rel_err(y[0], want[0, 5:8]), RTOL)
        self.assertLess(rel_err(y[1], want[1, 9:12]), RTOL)
        self.assertTrue(torch.equal(cache[1, 9:12], new[1]))  # appended
        self.assertTrue(torch.equal(lens, torch.tensor([5, 9])))  # the caller's to advance

    def test_cache_lens_as_a_list(self):
        x, sigma = (t.float() for t in inputs(8, seed=6, b=2, t=3, h=2))
        cache = torch.zeros(2, 4, 2, 8)
        y = gka_torch.gka_decode(x[:, :1], cache.clone(), [0, 0], sigma)
        self.assertTrue(torch.equal(y, gka_torch.gka_decode(x[:, :1], cache, torch.tensor([0, 0]), sigma)))
        with self.assertRaisesRegex(TypeError, "cache_lens must be an int64 CPU tensor .* or a list of ints"):
            gka_torch.gka_decode(x[:, :1], cache, [0.0, 1], sigma)

    def test_errors(self):
        x, sigma, lens = torch.ones(1, 1, 2, 4), torch.ones(2), torch.tensor([3])
        with self.assertRaisesRegex(ValueError, "right span must be 0"):
            gka_torch.gka_decode(x, torch.zeros(1, 8, 2, 4), lens, sigma, (-1, -1))
        with self.assertRaisesRegex(ValueError, "do not fit"):
            gka_torch.gka_decode(x, torch.zeros(1, 3, 2, 4), lens, sigma)
        with self.assertRaisesRegex(TypeError, "contiguous"):
            gka_torch.gka_decode(x, torch.zeros(1, 2, 8, 4).transpose(1, 2), lens, sigma)
        with self.assertRaisesRegex(TypeError, "int64"):
            gka_torch.gka_decode(x, torch.zeros(1, 8, 2, 4), lens.int(), sigma)
        with self.assertRaisesRegex(ValueError, "cache must be"):
            gka_torch.gka_decode(x, torch.zeros(1, 8, 3, 4), lens, sigma)

    def test_empty_calls_refuse_what_libgka_refuses(self):
        # A call with no elements (Tq or D 0) skips libgka (gka.h); a window or
        # cache libgka refuses is refused all the same, in libgka's words.
        def refusal(tq, d, capacity, length, window):
            x, cache = torch.ones(1, tq, 2, d), torch.zeros(1, capacity, 2, d)
            with self.assertRaises(ValueError) as caught:
                gka_torch.gka_decode(x, cache, torch.tensor([length]), torch.ones(2), window)
            return str(caught.exception).split(": ", 1)[1]  # after "gka_decode failed (...)" or "gka"

        for name, tq, capacity, length, window in (("right span must be 0", 1, 8, 0, (-1, -1)),
                                                   ("needs capacity >= 7, got 5", 1, 5, 0, (7, 0)),
                                                   ("do not fit", 2, 4, 3, (-1, 0))):
            with self.subTest(name):
                libgka = refusal(tq, 4, capacity, length, window)
                self.assertIn(name, libgka)
                self.assertEqual(refusal(tq, 0, capacity, length, window), libgka)
                if name != "do not fit":  # which depends on Tq
                    self.assertEqual(refusal(0, 4, capacity, length, window), libgka)
        self.assertIn("5 + 0 new tokens do not fit a cache of capacity 4", refusal(0, 4, 4, 5, (-1, 0)))

    def test_opcheck(self):
        x, sigma = (t.float() for t in inputs(8, b=1, t=2, h=2))
        torch.library.opcheck(torch.ops.gka.decode.default,
                              (x, torch.zeros(1, 6, 2, 8), torch.tensor([3]), sigma, -1, 0),
                              test_utils=("test_schema", "test_faketensor"))


class Varlen(unittest.TestCase):
    """gka_attention_varlen: each packed sequence against the double reference of it alone."""

    LENGTHS = [5, 0, 23, 1, 40]

    def packed(self, d, seed):
        x, sigma = inputs(d, seed=seed, b=1, t=sum(self.LENGTHS), h=2)
        cu = torch.tensor([0] + self.LENGTHS).cumsum(0)
        return x[0], cu, sigma

    def test_forward_and_gradients_match_reference(self):
        for window in ((-1, 0), (4, 0), (-1, -1)):
            with self.subTest(window=window):
                x, cu, sigma = self.packed(24, seed=8)
                dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
                xf, sf = x.float().requires_grad_(), sigma.float().requires_grad_()
                y = gka_torch.gka_attention_varlen(xf, cu.int(), sf, window)  # int32 cu_seqlens too
                (y.double() * dy).sum().backward()
                want_dsigma = torch.zeros_like(sigma)
                for s in range(len(self.LENGTHS)):
                    a, b = cu[s].item(), cu[s + 1].item()
                    if a == b:
                        continue
                    xr, sr = x[None, a:b].clone().requires_grad_(), sigma.clone().requires_grad_()
                    yr = gka_forward_reference(xr, sr, window)[0]
                    (yr * dy[None, a:b]).sum().backward()
                    want_dsigma += sr.grad
                    self.assertLess(rel_err(y[a:b], yr[0].detach()), RTOL)
                    self.assertLess(rel_err(xf.grad[a:b], xr.grad[0]), RTOL)
                self.assertLess(rel_err(sf.grad, want_dsigma), RTOL)

    def test_bf16_and_autocast(self):
        x, cu, sigma = self.packed(64, seed=10)
        y = gka_torch.gka_attention_varlen(x.to(torch.bfloat16), cu, sigma.float())
        self.assertEqual(y.dtype, torch.bfloat16)
        self.assertIn("_bf16", gka_torch.last_kernel())
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            self.assertTrue(torch.equal(gka_torch.gka_attention_varlen(x.float(), cu, sigma.float()), y))

    def test_errors(self):
        x, sigma = torch.ones(6, 2, 4), torch.ones(2)
        with self.assertRaisesRegex(ValueError, "non-decreasing"):
            gka_torch.gka_attention_varlen(x, torch.tensor([0, 4, 3, 6]), sigma)
        with self.assertRaisesRegex(ValueError, "total token count"):
            gka_torch.gka_attention_varlen(x, torch.tensor([0, 4]), sigma)
        with self.assertRaisesRegex(TypeError, "int32 or int64"):
            gka_torch.gka_attention_varlen(x, torch.tensor([0.0, 6.0]), sigma)
        with self.assertRaisesRegex(ValueError, "total, heads, head_dim"):
            gka_torch.gka_attention_varlen(x[None], torch.tensor([0, 6]), sigma)
        with self.assertRaisesRegex(ValueError, r"\[sequences \+ 1\] .*\[0\] for no sequences"):
            gka_torch.gka_attention_varlen(x[:0], torch.tensor([], dtype=torch.int64), sigma)
        # No sequence at all: the exact empty results.
        self.assertEqual(gka_torch.gka_attention_varlen(x[:0], torch.tensor([0]), sigma).shape, (0, 2, 4))

    def test_every_sequence_empty(self):
        # A total of 0: libgka gives the exact empty results, forward and
        # backward, after checking cu_seqlens as for any call.
        for window in WINDOWS:
            with self.subTest(window=window):
                x, sigma = torch.zeros(0, 2, 4, requires_grad=True), torch.ones(2, requires_grad=True)
                y, lse = torch.ops.gka.forward_varlen(x, torch.tensor([0, 0, 0]), sigma, *window)
                self.assertEqual((y.shape, lse.shape), ((0, 2, 4), (2, 0)))
                y.sum().backward()
                self.assertEqual(x.grad.shape, (0, 2, 4))
                self.assertTrue(torch.equal(sigma.grad, torch.zeros(2)))
        for cu, error in (([0, 1], "total token count"), ([1, 0], r"cu_seqlens\[0\] = 1"),
                          ([0, 2, 0], "non-decreasing")):
            with self.subTest(cu=cu), self.assertRaisesRegex(ValueError, error):
                gka_torch.gka_attention_varlen(torch.zeros(0, 2, 4), torch.tensor(cu), torch.ones(2))

    def test_opcheck(self):
        x, sigma = (t.float() for t in inputs(8, b=1, t=7, h=2))
        args = (x[0], torch.tensor([0, 3, 7]), sigma, -1, 0)
        torch.library.opcheck(torch.ops.gka.forward_varlen.default, args)
        y, lse = torch.ops.gka.forward_varlen(*args)
        torch.library.opcheck(torch.ops.gka.backward_varlen.default, (*args[:3], y, lse, torch.ones_like(y), -1, 0))


class Chunks(unittest.TestCase):
    """gka_attention_chunked (the chunk kernels, merged) against the double reference."""

    def test_forward_and_gradients_match_reference(self):
        for window in ((-1, 0), (4, 0), (-1, -1), (2, 3)):
            for chunk_size in (7, 16, 64):
                with self.subTest(window=window, chunk_size=chunk_size):
                    x, sigma = inputs(24, seed=11, b=2, t=37, h=2)
                    want, dy, want_dx, want_dsigma = reference_with_gradients(x, sigma, window, seed=12)
                    xf, sf = x.float().requires_grad_(), sigma.float().requires_grad_()
                    y = gka_torch.gka_attention_chunked(xf, sf, window, chunk_size)
                    (y.double() * dy).sum().backward()
                    self.assertLess(rel_err(y, want), RTOL)
                    self.assertLess(rel_err(xf.grad, want_dx), RTOL)
                    self.assertLess(rel_err(sf.grad, want_dsigma), RTOL)

    def test_merge_of_partial_results_is_the_one_call_forward(self):
        x, sigma = (t.float() for t in inputs(16, seed=13, b=1, t=30, h=2))
        y, lse = torch.ops.gka.forward(x, sigma, -1, -1)
        parts = [torch.ops.gka.forward_chunk(x, x[:, k:k + 10], sigma, 0, k, -1, -1) for k in (0, 10, 20)]
        merged_y, merged_lse = gka_torch.merge_chunks(*zip(*parts))
        self.assertLess(rel_err(merged_y, y.double()), RTOL)
        self.assertLess((merged_lse - lse).abs().max().item(), 1e-5)
        # No pair (causal, later keys): lse -inf, y 0, merging as nothing.
        empty_y, empty_lse = torch.ops.gka.forward_chunk(x[:, :10], x[:, 20:], sigma, 0, 20, -1, 0)
        self.assertTrue(torch.equal(empty_y, torch.zeros_like(empty_y)))
        self.assertTrue(torch.isneginf(empty_lse).all())

    def test_errors(self):
        x, sigma = torch.ones(1, 4, 2, 8), torch.ones(2)
        with self.assertRaisesRegex(ValueError, "starts and key_len must be >= 0"):
            torch.ops.gka.forward_chunk(x, x, sigma, -1, 0, -1, 0)
        with self.assertRaisesRegex(ValueError, "keys must be"):
            torch.ops.gka.forward_chunk(x, torch.ones(1, 4, 3, 8), sigma, 0, 0, -1, 0)
        with self.assertRaisesRegex(NotImplementedError, "chunk kernels take float32 features"):
            torch.ops.gka.forward_chunk(x.bfloat16(), x.bfloat16(), sigma, 0, 0, -1, 0)
        with self.assertRaisesRegex(ValueError, "chunk_size"):
            gka_torch.gka_attention_chunked(x, sigma, (-1, 0), 0)

    def test_no_tokens(self):
        # T = 0: no chunk pair to merge; the exact empty results, and gradients.
        for window in WINDOWS:
            with self.subTest(window=window):
                x, sigma = torch.zeros(2, 0, 3, 8, requires_grad=True), torch.ones(3, requires_grad=True)
                y = gka_torch.gka_attention_chunked(x, sigma, window, chunk_size=4)
                self.assertEqual(y.shape, x.shape)
                y.sum().backward()
                self.assertEqual(x.grad.shape, x.shape)
                self.assertTrue(torch.equal(sigma.grad, torch.zeros(3)))

    def test_opcheck(self):
        x, sigma = (t.float() for t in inputs(8, b=1, t=6, h=2))
        args = (x, x[:, :4], sigma, 2, 0, -1, 0)
        torch.library.opcheck(torch.ops.gka.forward_chunk.default, args)
        y, lse = torch.ops.gka.forward(x, sigma, -1, 0)
        torch.library.opcheck(torch.ops.gka.backward_chunk.default,
                              (x, x[:, :4], sigma, y, lse, torch.ones_like(y), 0, 0, -1, 0))


class RandomFeatures(unittest.TestCase):
    """gka_attention_features against the dense double reference of the same
    feature map (gka_features_reference), gradients by its autograd."""

    def test_forward_and_gradients_match_reference(self):
        for window in ((-1, 0), (-1, -1)):
            for t, d, m in ((37, 24, 16), (70, 8, 33)):
                with self.subTest(window=window, t=t, d=d, m=m):
                    x, _ = inputs(d, seed=21, b=2, t=t, h=2)
                    x = 0.4 * x / d ** 0.5  # |u|^2 ~ 0.16 at sigma 1: the estimator's regime
                    sigma = torch.tensor([1.0, 1.3], dtype=torch.float64)
                    w = torch.randn(2, m, d, generator=torch.Generator().manual_seed(22), dtype=torch.float64)
                    dy = torch.randn(x.shape, generator=torch.Generator().manual_seed(23), dtype=torch.float64)
                    leaves = [v.clone().requires_grad_() for v in (x, sigma, w)]
                    want_y, want_lse = gka_torch.gka_features_reference(*leaves, window)
                    (want_y * dy).sum().backward()
                    got = [v.float().requires_grad_() for v in (x, sigma, w)]
                    y, lse = gka_torch.gka_attention_features(*got, window, return_lse=True)
                    (y * dy.float()).sum().backward()
                    self.assertLess(rel_err(y, want_y.detach()), RTOL)
                    self.assertLess((lse.double() - want_lse.detach()).abs().max().item(), 1e-5)
                    for name, g, want in zip(("dx", "dsigma", "dW"), got, leaves):
                        self.assertLess(rel_err(g.grad, want.grad), 1e-4, name)

    def test_errors(self):
        x, sigma, w = torch.ones(1, 4, 2, 8), torch.ones(2), torch.ones(2, 3, 8)
        with self.assertRaisesRegex(ValueError, "frequencies must be"):
            gka_torch.gka_attention_features(x, sigma, torch.ones(2, 3, 7))
        with self.assertRaisesRegex(TypeError, "frequencies must be float32"):
            gka_torch.gka_attention_features(x, sigma, w.double())
        with self.assertRaisesRegex(NotImplementedError, "O\\(T\\*W\\)"):
            gka_torch.gka_attention_features(x, sigma, w, window=(3, 0))
        with self.assertRaisesRegex(ValueError, "must be finite"):
            gka_torch.gka_attention_features(x, sigma, torch.full((2, 3, 8), float("nan")))

    def test_draw_frequencies(self):
        a = gka_torch.draw_frequencies(2, 20, 8, seed=3)
        self.assertTrue(torch.equal(a, gka_torch.draw_frequencies(2, 20, 8, seed=3)))
        block = a[0, :8].double()
        gram = block @ block.T
        self.assertLess((gram - torch.diag(gram.diagonal())).abs().max().item(), 1e-4 * gram.diagonal().max().item())
        iid = gka_torch.draw_frequencies(1, 1000, 16, seed=4, orthogonal=False)
        self.assertLess(abs(iid.mean().item()), 0.03)
        self.assertLess(abs(iid.var().item() - 1), 0.05)
        torch.manual_seed(9)
        first = gka_torch.draw_frequencies(1, 4, 4)
        torch.manual_seed(9)
        self.assertTrue(torch.equal(first, gka_torch.draw_frequencies(1, 4, 4)))
        with self.assertRaisesRegex(ValueError, "must be >= 0"):
            gka_torch.draw_frequencies(-1, 4, 4, seed=1)

    def test_module(self):
        torch.manual_seed(5)
        fixed = gka_torch.GaussianKernelAttention(2, 8, features=16)
        learned = gka_torch.GaussianKernelAttention(2, 8, window=(-1, -1), features=16, learn_frequencies=True)
        self.assertNotIn("frequencies", dict(fixed.named_parameters()))
        self.assertIn("frequencies", fixed.state_dict())  # the estimator's draws are kept with the model
        self.assertEqual(learned.frequencies.shape, (2, 16, 8))
        x = torch.randn(2, 9, 16, requires_grad=True)
        y = fixed(x)
        want = gka_torch.gka_attention_features(x.unflatten(2, (2, 8)), fixed.sigma, fixed.frequencies).flatten(2)
        self.assertTrue(torch.equal(y, want))
        learned(x).sum().backward()
        self.assertIsNotNone(learned.frequencies.grad)
        self.assertIsNotNone(learned.log_sigma.grad)
        self.assertIn("features=16", repr(learned))
        for kwargs, says in ((dict(features=0), "features must be an int >= 1"),
                             (dict(features=4, window=(3, 0)), "causal"),
                             (dict(features=4, kernel="laplace"), "Gaussian"),
                             (dict(learn_frequencies=True), "needs features")):
            with self.subTest(kwargs=kwargs), self.assertRaisesRegex(ValueError, says):
                gka_torch.GaussianKernelAttention(2, 8, **kwargs)
        with self.assertRaisesRegex(ValueError, "decodes under the causal window"):
            learned.new_cache(1)

    def test_varlen_is_each_sequence_alone(self):
        # Packed sequences, each from zero states: the same kernels on the same
        # tokens as each alone, so y, lse and dx bit for bit; dsigma and dW sum
        # the sequences' (in another order: to rounding).
        torch.manual_seed(8)
        cu = torch.tensor([0, 30, 31, 100], dtype=torch.int32)
        sigma, w = torch.tensor([1.0, 1.7]), gka_torch.draw_frequencies(2, 12, 8, seed=9)
        for window in ((-1, 0), (-1, -1)):
            with self.subTest(window=window):
                x = (0.4 * torch.randn(100, 2, 8)).requires_grad_()
                ws, ss = w.clone().requires_grad_(), sigma.clone().requires_grad_()
                y, lse = gka_torch.gka_attention_features(x, ss, ws, window, return_lse=True, cu_seqlens=cu)
                dy = torch.randn(y.shape)
                (y * dy).sum().backward()
                grads = torch.zeros_like(sigma), torch.zeros_like(w)
                for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
                    xs, wo, so = (t.detach().clone().requires_grad_() for t in (x[a:b], w, sigma))
                    ya, la = gka_torch.gka_attention_features(xs[None], so, wo, window, return_lse=True)
                    (ya[0] * dy[a:b]).sum().backward()
                    self.assertTrue(torch.equal(ya[0], y[a:b].detach()))
                    self.assertTrue(torch.equal(la[0], lse[:, a:b]))
                    self.assertTrue(torch.equal(xs.grad, x.grad[a:b]))
                    grads[0].add_(so.grad), grads[1].add_(wo.grad)
                self.assertLess(rel_err(ss.grad, grads[0]), 1e-5)
                self.assertLess(rel_err(ws.grad, grads[1]), 1e-5)
        with self.assertRaisesRegex(TypeError, "cu_seqlens must be"):
            gka_torch.gka_attention_features(x, sigma, w, cu_seqlens=[0, 100])

    def test_decode_equals_the_forward(self):
        # A prompt, then tokens one at a time and a few at once, from the keys'
        # state: y as the causal forward of the whole sequence, to rounding.
        torch.manual_seed(6)
        x = 0.5 * torch.randn(2, 40, 3, 8)
        sigma, w = torch.tensor([1.0, 1.5, 2.0]), gka_torch.draw_frequencies(3, 20, 8, seed=7)
        want = gka_torch.gka_attention_features(x, sigma, w)
        state = gka_torch.new_feature_state(2, 3, 20, 8)
        with torch.no_grad():
            pieces = [gka_torch.gka_decode_features(x[:, a:b], state, sigma, w)
                      for a, b in ((0, 17), (17, 18), (18, 19), (19, 40))]
        self.assertLess(rel_err(torch.cat(pieces, 1), want.detach()), 1e-5)
        module = gka_torch.GaussianKernelAttention(3, 8, features=20)
        cache = module.new_cache(2)
        self.assertIsInstance(cache, gka_torch.FeatureStateCache)
        flat = x.flatten(2)
        with torch.no_grad():
            y = torch.cat([module.prefill(flat[:, :30], cache)] + [module.decode(flat[:, t:t + 1], cache)
                                                                   for t in range(30, 40)], 1)
            self.assertLess(rel_err(y, module(flat)), 1e-5)
        self.assertEqual(cache.lengths.tolist(), [40, 40])
        with self.assertRaisesRegex(ValueError, "prefill takes an empty cache"):
            module.prefill(flat, cache)
        cache.reset()
        self.assertEqual(cache.state.abs().sum().item(), 0)
        with self.assertRaisesRegex(TypeError, "must be a FeatureStateCache"):
            module.decode(flat, gka_torch.GaussianKernelAttention(3, 8).new_cache(2, 40))
        with self.assertRaisesRegex(ValueError, "state must be"):
            gka_torch.gka_decode_features(x, torch.zeros(2, 3, 20, 8), sigma, w)
        with self.assertRaisesRegex(RuntimeError, "inference-only"):
            gka_torch.gka_decode_features(x, state, sigma, w.requires_grad_())

    def test_opcheck(self):
        x, sigma = (t.float() for t in inputs(8, b=1, t=6, h=2))
        w = torch.randn(2, 5, 8)
        torch.library.opcheck(torch.ops.gka.forward_features.default, (x, sigma, w, -1, 0))
        y, lse = torch.ops.gka.forward_features(x, sigma, w, -1, 0)
        torch.library.opcheck(torch.ops.gka.backward_features.default,
                              (x, sigma, w, y, lse, torch.ones_like(y), -1, 0))
        torch.library.opcheck(torch.ops.gka.decode_features.default, (x, torch.zeros(1, 2, 5, 9), sigma, w))
        packed, cu = x[0], torch.tensor([0, 2, 6])
        torch.library.opcheck(torch.ops.gka.forward_features_varlen.default, (packed, cu, sigma, w, -1, 0))
        y, lse = torch.ops.gka.forward_features_varlen(packed, cu, sigma, w, -1, 0)
        torch.library.opcheck(torch.ops.gka.backward_features_varlen.default,
                              (packed, cu, sigma, w, y, lse, torch.ones_like(y), -1, 0))


class Module(unittest.TestCase):
    """GaussianKernelAttention against the functional op it wraps: the same values and
    gradients (bitwise: the same kernels on the same numbers) in every layout and
    input form."""

    H, D = 3, 8

    def module(self, **kwargs):
        m = gka_torch.GaussianKernelAttention(self.H, self.D, window=(3, 0), **kwargs)
        with torch.no_grad():
            m.log_sigma.copy_(torch.tensor([-0.5, 0.5, 1.5]))  # heads from sharp to flat
        return m

    def features(self, seed=20):
        return inputs(self.D, seed=seed, h=self.H)[0].float()  # [B,T,H,D]

    def functional(self, x_bthd, log_sigma, window=(3, 0)):
        """y [B,T,H,D], lse, dL/dx, dL/dlog_sigma of gka_attention for L = sum(y * dy)."""
        x, log_sigma = x_bthd.clone().requires_grad_(), log_sigma.detach().clone().requires_grad_()
        y, lse = gka_attention(x, log_sigma.exp(), window, return_lse=True)
        (y * self.dy(y)).sum().backward()
        return y.detach(), lse, x.grad, log_sigma.grad

    @staticmethod
    def dy(y):
        return torch.randn(y.shape, generator=torch.Generator().manual_seed(21)).to(y.dtype)

    def test_matches_the_functional_op(self):
        x = self.features()
        # (layout, the module's input, its [B,T,H,D] view)
        forms = (("bthd", x, lambda t: t), ("bthd", x.flatten(2), lambda t: t.unflatten(2, (self.H, self.D))),
                 ("bhtd", x.transpose(1, 2).contiguous(), lambda t: t.transpose(1, 2)))
        for layout, given, as_bthd in forms:
            with self.subTest(layout=layout, shape=tuple(given.shape)):
                m = self.module(layout=layout)
                xin = given.clone().requires_grad_()
                y = m(xin)
                self.assertEqual(y.shape, given.shape)
                want_y, _, want_dx, want_dlog_sigma = self.functional(x, m.log_sigma)
                self.assertTrue(torch.equal(as_bthd(y), want_y))
                (as_bthd(y) * self.dy(want_y)).sum().backward()
                self.assertTrue(torch.equal(as_bthd(xin.grad), want_dx))
                self.assertTrue(torch.equal(m.log_sigma.grad, want_dlog_sigma))

    def test_return_lse(self):
        x = self.features()
        _, want_lse, _, _ = self.functional(x, self.module().log_sigma)
        for layout, given in (("bthd", x), ("bhtd", x.transpose(1, 2))):
            with self.subTest(layout=layout):
                y, lse = self.module(layout=layout, return_lse=True)(given)
                self.assertEqual(y.shape, given.shape)
                self.assertEqual(lse.dtype, torch.float32)
                self.assertTrue(torch.equal(lse, want_lse))  # [B,H,T] in both layouts
        y, lse = torch.ops.gka.forward(x, self.module().sigma, 3, 0)
        got_y, got_lse = gka_attention(x, self.module().sigma, (3, 0), return_lse=True)
        self.assertTrue(torch.equal(got_y, y) and torch.equal(got_lse, lse))

    def test_bhtd_saves_one_contiguous_copy_of_x(self):
        # The backward copies no x: the op saves the [B,T,H,D] copy the forward made
        # (contiguous, so the backward's .contiguous() is the tensor itself).
        x = self.features().transpose(1, 2).contiguous().requires_grad_()  # [B,H,T,D]
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
            y = self.module(layout="bhtd")(x)
        features = [t for t in saved if t.dim() == 4 and t.shape[1:] == (T, self.H, self.D)]
        self.assertEqual(len(features), 2)  # x's copy and y
        self.assertTrue(all(t.is_contiguous() for t in saved))
        self.assertTrue(torch.equal(features[0], x.detach().transpose(1, 2)))

    def test_dtypes_follow_the_input_and_sigma_stays_float32(self):
        m = self.module()
        x = self.features().to(torch.bfloat16)
        y = m(x)
        self.assertIn("_bf16", gka_torch.last_kernel())
        self.assertEqual(y.dtype, torch.bfloat16)
        self.assertTrue(torch.equal(y, gka_attention(x, m.sigma.detach(), (3, 0))))
        y.float().sum().backward()
        self.assertEqual((m.log_sigma.dtype, m.log_sigma.grad.dtype, m.sigma.dtype), (torch.float32,) * 3)

    def test_autocast(self):
        m = self.module()
        x = self.features()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = m(x)
        self.assertEqual(y.dtype, torch.bfloat16)
        self.assertIn("_bf16", gka_torch.last_kernel())
        self.assertTrue(torch.equal(y, m(x.to(torch.bfloat16))))  # x rounded, sigma not
        y.float().sum().backward()
        self.assertEqual(m.log_sigma.grad.dtype, torch.float32)

    def test_state_dict_round_trip(self):
        import io
        m = self.module()
        buffer = io.BytesIO()
        torch.save(m.state_dict(), buffer)
        buffer.seek(0)
        fresh = gka_torch.GaussianKernelAttention(self.H, self.D, window=(3, 0))
        self.assertFalse(torch.equal(fresh.log_sigma, m.log_sigma))
        fresh.load_state_dict(torch.load(buffer))
        self.assertEqual(list(m.state_dict()), ["log_sigma"])
        x = self.features()
        self.assertTrue(torch.equal(fresh(x), m(x)))

    def test_compiled_module_is_one_graph(self):
        torch._dynamo.reset()
        x = self.features()
        for layout, given in (("bthd", x.flatten(2)), ("bhtd", x.transpose(1, 2))):
            with self.subTest(layout=layout):
                m = self.module(layout=layout)
                explained = torch._dynamo.explain(m)(given)
                self.assertEqual(explained.graph_break_count, 0, explained.break_reasons)
                compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
                xc, xe = given.clone().requires_grad_(), given.clone().requires_grad_()
                yc = compiled(xc)
                yc.square().sum().backward()
                dsigma_compiled = m.log_sigma.grad.clone()
                m.log_sigma.grad = None
                ye = m(xe)
                ye.square().sum().backward()
                self.assertTrue(torch.equal(yc, ye))
                self.assertTrue(torch.equal(xc.grad, xe.grad))
                self.assertTrue(torch.equal(dsigma_compiled, m.log_sigma.grad))

    def test_sigma_stays_positive_after_a_step_pushing_it_down(self):
        # A loss that rewards sharp kernels (y near x) pushes every sigma down; a
        # step large enough to take a plain sigma parameter below 0 leaves
        # exp(log_sigma) positive, and the module still runs.
        m = gka_torch.GaussianKernelAttention(self.H, self.D)
        x = self.features()
        (m(x) - x).square().sum().backward()
        grad = m.log_sigma.grad.clone()
        self.assertTrue((grad > 0).all(), grad)
        before = m.sigma.detach()
        lr = 10.0 / grad.max().item()  # the fastest head's log sigma falls by 10
        self.assertTrue((before - lr * grad / before < 0).any())  # dL/dsigma = dL/dlog_sigma / sigma
        torch.optim.SGD(m.parameters(), lr=lr).step()
        after = m.sigma.detach()
        self.assertTrue(((after > 0) & (after < before)).all(), after)
        self.assertTrue(torch.isfinite(m(x)).all())

    def test_defaults_and_repr(self):
        m = gka_torch.GaussianKernelAttention(4, 32)
        self.assertTrue(torch.allclose(m.sigma, torch.full((4,), 4.0)))  # sqrt(head_dim / 2)
        self.assertEqual(repr(m), "GaussianKernelAttention(heads=4, head_dim=32, window=(-1, 0), layout='bthd', "
                                  "return_lse=False, kernel='gaussian')")
        self.assertIn("window=(7, 0), layout='bhtd', return_lse=True",
                      repr(gka_torch.GaussianKernelAttention(4, 32, (7, 0), 2.0, "bhtd", True)))

    def test_errors(self):
        make = gka_torch.GaussianKernelAttention
        with self.assertRaisesRegex(ValueError, "layout must be one of"):
            make(2, 8, layout="bsd")
        with self.assertRaisesRegex(ValueError, "sigma must be finite and > 0"):
            make(2, 8, sigma=0.0)
        with self.assertRaisesRegex(ValueError, "heads must be an int >= 1"):
            make(0, 8)
        with self.assertRaisesRegex(ValueError, r"window \(-3, 0\): left and right must be >= -1"):
            make(2, 8, window=(-3, 0))
        with self.assertRaisesRegex(ValueError, r"takes x \[B, T, 2, 8\] or \[B, T, 16\]"):
            make(2, 8)(torch.ones(1, 5, 12))
        with self.assertRaisesRegex(ValueError, r"takes x \[B, 2, T, 8\]"):
            make(2, 8, layout="bhtd")(torch.ones(1, 5, 2, 8))
        m = make(2, 8)
        with torch.no_grad():
            m.log_sigma[1] = float("nan")
        with self.assertRaisesRegex(ValueError, r"log_sigma\[1\] = nan: the module's bandwidths are exp"):
            m(torch.ones(1, 5, 16))


class ModuleDecode(unittest.TestCase):
    """GaussianKernelAttention generates by itself: prefill and decode with its own
    sigma, window, kernel and layout equal its forward over the whole sequence."""

    H, D = 2, 16

    def module(self, window, kernel="gaussian", layout="bthd"):
        m = gka_torch.GaussianKernelAttention(self.H, self.D, window=window, kernel=kernel, layout=layout)
        with torch.no_grad():
            m.log_sigma.copy_(torch.tensor([0.5, 1.5]))
        return m

    def test_prefill_then_decode_equals_the_forward(self):
        x = inputs(self.D, seed=40, b=2, t=30, h=self.H)[0].float()
        # (window, capacity): a whole-sequence cache, a ring of the window's
        # length (the default) and a larger ring, whose prompt outlasts it.
        for window, capacity in (((-1, 0), 30), ((5, 0), None), ((5, 0), 8)):
            for kernel in gka_torch.KERNELS:
                with self.subTest(window=window, capacity=capacity, kernel=kernel):
                    m = self.module(window, kernel)
                    want = m(x).detach()
                    cache = m.new_cache(2, capacity)
                    got = [m.prefill(x[:, :12], cache)]
                    self.assertEqual(cache.lengths.tolist(), [12, 12])
                    got.append(m.decode(x[:, 12:15], cache))  # several tokens at once
                    got += [m.decode(x[:, t:t + 1], cache) for t in range(15, 30)]
                    self.assertEqual(cache.lengths.tolist(), [30, 30])
                    self.assertLess(rel_err(torch.cat(got, dim=1), want.double()), RTOL)
                    self.assertFalse(got[-1].requires_grad)

    def test_layouts_and_bf16(self):
        x = inputs(self.D, seed=41, b=1, t=10, h=self.H)[0].float()
        for layout, given, cut in (("bthd", x.flatten(2), lambda t, a, b: t[:, a:b]),
                                   ("bhtd", x.transpose(1, 2).contiguous(), lambda t, a, b: t[:, :, a:b])):
            with self.subTest(layout=layout):
                m = self.module((-1, 0), layout=layout)
                cache = m.new_cache(1, 10)
                y = torch.cat([m.prefill(cut(given, 0, 6), cache), m.decode(cut(given, 6, 10), cache)],
                              dim=1 if layout == "bthd" else 2)
                self.assertEqual(y.shape, given.shape)
                self.assertLess(rel_err(y, m(given).detach().double()), RTOL)
        m = self.module((3, 0))
        cache = m.new_cache(1, dtype=torch.bfloat16)
        xb = x.bfloat16()
        y = torch.cat([m.prefill(xb[:, :4], cache), m.decode(xb[:, 4:], cache)], dim=1)
        self.assertEqual(y.dtype, torch.bfloat16)
        self.assertLess(rel_err(y, m(xb).detach().double()), 1e-2)

    def test_refusals(self):
        m = self.module((-1, 0))
        with self.assertRaisesRegex(ValueError, "pass capacity"):
            m.new_cache(1)
        with self.assertRaisesRegex(ValueError, "right span is 0"):
            self.module((-1, -1)).new_cache(1, 8)
        with self.assertRaisesRegex(ValueError, r"capacity must be an int >= 5"):
            self.module((5, 0)).new_cache(1, 4)
        cache = m.new_cache(1, 8)
        x = torch.ones(1, 6, self.H, self.D)
        with self.assertRaisesRegex(ValueError, "does not fit a cache of capacity 4"):
            m.prefill(x, m.new_cache(1, 4))
        m.prefill(x, cache)
        with self.assertRaisesRegex(ValueError, "prefill takes an empty cache"):
            m.prefill(x, cache)
        with self.assertRaisesRegex(ValueError, "do not fit a cache of capacity 8"):
            m.decode(x[:, :3], cache)
        with self.assertRaisesRegex(TypeError, "DecodeCache"):
            m.decode(x[:, :1], cache.features)
        with self.assertRaisesRegex(TypeError, "the cache holds torch.float32"):
            m.prefill(x.bfloat16(), m.new_cache(1, 8))
        cache.reset()
        self.assertEqual(cache.lengths.tolist(), [0])
        self.assertIn("capacity=8", repr(cache))


class Package(unittest.TestCase):
    def test_public_names(self):
        # What dir() shows a user: the API, with no imported module or private alias.
        for name in ("os", "torch", "LIBRARY_PATH"):
            self.assertNotIn(name, dir(gka_torch))
        for name in gka_torch.__all__:
            self.assertTrue(hasattr(gka_torch, name), name)

    def test_version_is_the_projects(self):
        import re
        self.assertRegex(gka_torch.__version__, r"^\d+\.\d+\.\d+$")
        cmakelists = os.path.join(os.path.dirname(__file__), "..", "..", "CMakeLists.txt")
        with open(cmakelists) as f:
            project = re.search(r"project\(gka VERSION (\S+)", f.read()).group(1)
        self.assertEqual(gka_torch.__version__, project)

    def test_num_threads_round_trip(self):
        before = gka_torch.get_num_threads()
        try:
            for n in (1, 3):
                gka_torch.set_num_threads(n)
                self.assertEqual(gka_torch.get_num_threads(), n)
            with self.assertRaisesRegex(ValueError, "not in 1..1024"):
                gka_torch.set_num_threads(0)
            with self.assertRaises(TypeError):
                gka_torch.set_num_threads(2.0)
        finally:
            gka_torch.set_num_threads(before)

    def test_memory_stats_count_a_backwards_working_buffers(self):
        x = torch.randn(1, 2048, 8, 64, requires_grad=True)
        sigma = torch.full((8,), 8.0, requires_grad=True)
        y = gka_torch.gka_attention(x, sigma, window=(255, 0))
        gka_torch.reset_peak_memory()
        y.sum().backward()
        stats = gka_torch.memory_stats()
        self.assertEqual(set(stats), {"in_use", "peak", "idle"})
        self.assertEqual(stats["in_use"], 0)
        tensor = x.numel() * x.element_size()
        self.assertGreater(stats["peak"], tensor // 4)  # the head-major copies and the sums of a few heads
        gka_torch.reset_peak_memory()
        self.assertEqual(gka_torch.memory_stats()["peak"], 0)

    def test_default_threads_follow_torch_unless_the_environment_says(self):
        import subprocess
        script = "import torch; torch.set_num_threads(3); import gka_torch; print(gka_torch.get_num_threads())"
        for env_threads, want in ((None, "3"), ("2", "2")):
            with self.subTest(GKA_NUM_THREADS=env_threads):
                env = {k: v for k, v in os.environ.items() if k != "GKA_NUM_THREADS"}
                if env_threads is not None:
                    env["GKA_NUM_THREADS"] = env_threads
                run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
                self.assertEqual(run.returncode, 0, run.stderr)
                self.assertEqual(run.stdout.strip(), want)

    def test_info(self):
        text = gka_torch.info()
        for part in (gka_torch.__version__, gka_torch.library_path, gka_torch.cpu_family(),
                     gka_torch._LIB.gka_cpu_families().decode(), f"threads: {gka_torch.get_num_threads()}",
                     f"score form: {gka_torch.score_form()}", "CUDA kernels: ", "torch.cuda.is_available(): "):
            self.assertIn(part, text)


class Refusals(unittest.TestCase):
    """Errors at the call that causes them, saying what is wrong."""

    def test_a_ring_shorter_than_the_window_is_refused_at_the_first_call(self):
        x, sigma = torch.ones(1, 1, 2, 4), torch.ones(2)
        with self.assertRaisesRegex(ValueError, "needs capacity >= 7, got 5"):
            gka_torch.gka_decode(x, torch.zeros(1, 5, 2, 4), torch.tensor([0]), sigma, (7, 0))
        gka_torch.gka_decode(x, torch.zeros(1, 7, 2, 4), torch.tensor([0]), sigma, (7, 0))

    def test_decode_refuses_inputs_that_require_grad(self):
        x, cache, lens = torch.ones(1, 1, 2, 4), torch.zeros(1, 4, 2, 4), torch.tensor([0])
        sigma = torch.ones(2, requires_grad=True)
        for args in ((x.requires_grad_(), cache, lens, sigma.detach()), (x.detach(), cache, lens, sigma)):
            with self.assertRaisesRegex(RuntimeError, "inference-only"):
                gka_torch.gka_decode(*args)
        with torch.no_grad():
            y = gka_torch.gka_decode(x, cache, lens, sigma)
        self.assertTrue(torch.equal(y, x.detach()))  # the first token is itself

    def test_double_backward_says_it_is_unsupported(self):
        x, sigma = (t.float().requires_grad_() for t in inputs(8, b=1, t=6, h=2))
        cu = torch.tensor([0, 2, 6])
        for name, run in (("gka_attention", lambda: gka_attention(x, sigma)),
                          ("gka_attention_varlen", lambda: gka_torch.gka_attention_varlen(x[0], cu, sigma)),
                          ("gka_attention_chunked", lambda: gka_torch.gka_attention_chunked(x, sigma, chunk_size=4))):
            with self.subTest(name):
                dx, = torch.autograd.grad(run().square().sum(), x, create_graph=True)
                with self.assertRaisesRegex(NotImplementedError, "double backward is not supported"):
                    torch.autograd.grad(dx.square().sum(), (x, sigma))


class Registration(unittest.TestCase):
    def test_opcheck(self):
        # Schema, fake (meta) implementation, autograd registration and
        # AOTAutograd dispatch, as torch.library checks them.
        x, sigma = (t.float() for t in inputs(24, b=1, t=9, h=2))
        for window in ((-1, 0), (2, 2)):
            with self.subTest(window=window):
                torch.library.opcheck(torch.ops.gka.forward.default,
                                      (x.clone().requires_grad_(), sigma.clone().requires_grad_(), *window))
                y, lse = torch.ops.gka.forward(x, sigma, *window)
                torch.library.opcheck(torch.ops.gka.backward.default, (x, sigma, y, lse, torch.randn_like(x), *window))


class Compile(unittest.TestCase):
    """torch.compile(fullgraph=True) sees gka::forward and gka::backward as one
    opaque op each: no graph break, and compiled results equal eager ones."""

    @staticmethod
    def step(x, sigma, w, kernel="gaussian"):
        y = gka_attention(torch.tanh(x), sigma, window=(3, 0), kernel=kernel)
        return (y @ w).square().mean()

    def args(self):
        x, sigma = (t.float() for t in inputs(24, seed=9))
        w = torch.randn(24, 24, generator=torch.Generator().manual_seed(10))
        return x.requires_grad_(), sigma.requires_grad_(), w

    def check_against_eager(self, compiled, kernel="gaussian"):
        x, sigma, w = self.args()
        loss = self.step(x, sigma, w, kernel)
        dx, ds = torch.autograd.grad(loss, (x, sigma))
        closs = compiled(x, sigma, w, kernel)
        cdx, cds = torch.autograd.grad(closs, (x, sigma))
        torch.testing.assert_close(closs, loss, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(cdx, dx, rtol=1e-4, atol=1e-7)
        torch.testing.assert_close(cds, ds, rtol=1e-4, atol=1e-7)

    def test_one_graph_with_opaque_ops(self):
        torch._dynamo.reset()
        from functorch.compile import make_boxed_func
        from torch._dynamo.backends.common import aot_autograd
        forward_graphs, backward_graphs = [], []

        def keep(store):
            def compiler(gm, example_inputs):
                store.append(gm)
                return make_boxed_func(gm.forward)
            return compiler

        explained = torch._dynamo.explain(self.step)(*self.args())
        self.assertEqual(explained.graph_break_count, 0, explained.break_reasons)
        self.assertEqual(explained.graph_count, 1)

        backend = aot_autograd(fw_compiler=keep(forward_graphs), bw_compiler=keep(backward_graphs))
        self.check_against_eager(torch.compile(self.step, fullgraph=True, backend=backend))

        def gka_calls(gm):
            return [n.target for n in gm.graph.nodes if n.op == "call_function" and "gka" in str(n.target)]
        self.assertEqual(gka_calls(forward_graphs[0]), [torch.ops.gka.forward.default])
        self.assertEqual(gka_calls(backward_graphs[0]), [torch.ops.gka.backward.default])

    @unittest.skipIf(os.environ.get("GKA_TORCH_SKIP_INDUCTOR") == "1", "GKA_TORCH_SKIP_INDUCTOR=1")
    def test_inductor(self):
        # The default backend generates and compiles C++ for the ops around ours,
        # for each kernel function, with static shapes and with dynamic ones.
        for kernel in gka_torch.KERNELS:
            for dynamic in (False, True):
                with self.subTest(kernel=kernel, dynamic=dynamic):
                    torch._dynamo.reset()
                    self.check_against_eager(torch.compile(self.step, fullgraph=True, dynamic=dynamic), kernel)


class KernelFunctions(unittest.TestCase):
    """The kernel functions other than the Gaussian (kernel="laplace", "cauchy")
    through every entry point, against the double reference's autograd."""
    OTHERS = [k for k in gka_torch.KERNELS if k != "gaussian"]

    def test_listed(self):
        self.assertEqual(gka_torch.KERNELS, ("gaussian", "laplace", "cauchy"))

    def test_forward_and_gradients_match_reference(self):
        for kernel in self.OTHERS:
            for d in HEAD_DIMS:
                for window in WINDOWS:
                    with self.subTest(kernel=kernel, d=d, window=window):
                        x, sigma = inputs(d, seed=31)
                        want, dy, want_dx, want_dsigma = reference_with_gradients(x, sigma, window, 32, kernel)
                        xf, sf = x.float().requires_grad_(), sigma.float().requires_grad_()
                        y, lse = gka_attention(xf, sf, window, return_lse=True, kernel=kernel)
                        (y.double() * dy).sum().backward()
                        want_lse = gka_forward_reference(x, sigma, window, kernel)[1]
                        self.assertLess(rel_err(y, want), RTOL)
                        self.assertLess(rel_err(lse, want_lse), RTOL)
                        self.assertLess(rel_err(xf.grad, want_dx), RTOL)
                        self.assertLess(rel_err(sf.grad, want_dsigma), RTOL)
                        self.assertIn("_" + kernel, gka_torch.last_kernel())
                        # Not the Gaussian's results.
                        self.assertGreater(rel_err(y, gka_forward_reference(x, sigma, window)[0]), 1e-3)

    def test_varlen_chunked_decode_and_bf16(self):
        for kernel in self.OTHERS:
            with self.subTest(kernel=kernel):
                x, sigma = (t.float() for t in inputs(24, seed=33, b=1, t=30, h=2))
                y = gka_attention(x, sigma, (-1, 0), kernel=kernel)
                packed = gka_torch.gka_attention_varlen(x[0], torch.tensor([0, 30]), sigma, kernel=kernel)
                self.assertTrue(torch.equal(packed, y[0]))
                chunked = gka_torch.gka_attention_chunked(x, sigma, (-1, 0), 7, kernel=kernel)
                self.assertLess(rel_err(chunked, y.double()), RTOL)
                cache = torch.zeros(1, 30, 2, 24)
                with torch.no_grad():
                    decoded = gka_torch.gka_decode(x, cache, torch.tensor([0]), sigma, kernel=kernel)
                self.assertLess(rel_err(decoded, y.double()), RTOL)
                y16 = gka_attention(x.bfloat16(), sigma, (-1, 0), kernel=kernel)
                self.assertEqual(y16.dtype, torch.bfloat16)
                self.assertLess(rel_err(y16, y.double()), 1e-2)

    def test_module_learns_sigma_with_each_kernel(self):
        for kernel in self.OTHERS:
            with self.subTest(kernel=kernel):
                m = gka_torch.GaussianKernelAttention(2, 16, kernel=kernel)
                x = torch.randn(1, 20, 2, 16)
                y = m(x)
                self.assertLess(rel_err(y, gka_attention(x, m.sigma.detach(), kernel=kernel).double()), RTOL)
                y.square().sum().backward()
                self.assertTrue(torch.isfinite(m.log_sigma.grad).all() and (m.log_sigma.grad != 0).all())
                self.assertIn(f"kernel='{kernel}'", repr(m))

    def test_compiled_and_opcheck(self):
        x, sigma = (t.float() for t in inputs(16, seed=34, b=1, t=12, h=2))
        torch.library.opcheck(torch.ops.gka.forward.default, (x, sigma, -1, 0, "laplace"))
        y, lse = torch.ops.gka.forward(x, sigma, -1, 0, "cauchy")
        torch.library.opcheck(torch.ops.gka.backward.default, (x, sigma, y, lse, torch.ones_like(y), -1, 0, "cauchy"))
        torch._dynamo.reset()
        step = torch.compile(lambda x, s: gka_attention(x, s, kernel="laplace"), fullgraph=True, backend="eager")
        self.assertTrue(torch.equal(step(x, sigma), gka_attention(x, sigma, kernel="laplace")))

    def test_unknown_kernel(self):
        x, sigma = torch.ones(1, 4, 2, 8), torch.ones(2)
        with self.assertRaisesRegex(ValueError, "kernel must be one of gaussian, laplace, cauchy"):
            gka_attention(x, sigma, kernel="epanechnikov")
        with self.assertRaisesRegex(ValueError, "kernel must be one of"):
            gka_torch.GaussianKernelAttention(2, 8, kernel="gauss")


if __name__ == "__main__":
    print(f"torch {torch.__version__}, libgka {gka_torch.library_path} ({gka_torch.cpu_family()}), "
          f"CUDA entry points: {gka_torch.has_cuda()}", file=sys.stderr)
    unittest.main()

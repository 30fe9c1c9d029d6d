"""Each update rule against an independent NumPy transcription of the paper's equations.

The optimizers run a few steps of a real sampled-gradient loop on a separable quadratic
F(θ) = Σ ½ a θ² + b θ, whose gradient a θ + b the references compute themselves in
float64. The noise ε is the only thing shared: the references redraw it from a
``torch.Generator`` seeded identically, in the same parameter order.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils import _pytree as pytree

import param_explore as pe

from conftest import DEVICES

pytestmark = pytest.mark.trains  # .ci/run runs these again under another kernel set

SHAPES = [(3, 2), (2,)]
STEPS = 4
SEED = 1234


def quadratic_coefficients():
    rng = np.random.default_rng(0)
    a = [rng.uniform(0.5, 2.0, size=s) for s in SHAPES]
    b = [rng.normal(size=s) * 50.0 for s in SHAPES]
    return a, b


def initial_means():
    rng = np.random.default_rng(1)
    return [rng.normal(size=s) for s in SHAPES]


#: How the gradient is taken and the step made: the two eager paths of the sampling
#: interface, and the traced form a compiled update runs (``param_explore.traceable``),
#: here executed op by op — its numbers from the step as an int (``traced``) or, as a
#: compiled update computes them, from a float64 tensor of its count (``counted``).
MODES = ["sampled_params", "sample", "traced", "counted"]


def traced_step(opt, params, loss_of, counted: bool = False) -> None:
    """One step through ``traceable_step()``: training point, gradient there, update."""
    step = opt.traceable_step()
    t = step.next_step()
    numbers = step.coefficients(torch.tensor(float(t), dtype=torch.float64) if counted else t)
    c = pytree.tree_map(lambda value: torch.as_tensor(value).to(torch.float32), numbers)
    means = [p.detach() for p in params]
    with torch.no_grad():
        point = [t.clone().requires_grad_() for t in step.training_point(means, step.state, c)]
    loss_of(point).backward()
    step.advance()
    with torch.no_grad():
        step.update(means, [t.grad for t in point], step.state, c)


def run_optimizer(name: str | type, steps: int = STEPS, mode: str = "sampled_params", **overrides):
    """μ after every step, and σ before every step, from the code under test (``name``: a
    registered strategy, or an optimizer class)."""
    a, b = quadratic_coefficients()
    params = [torch.nn.Parameter(torch.tensor(m, dtype=torch.float32)) for m in initial_means()]
    if isinstance(name, str):
        opt = pe.make_optimizer(name, params, **overrides)
    else:
        opt = name(params, **overrides)
    gen = torch.Generator().manual_seed(SEED)
    means, stds = [], []
    for _ in range(steps):
        opt.zero_grad()
        opt.resample_noise(gen)
        stds.append([s.double().numpy().copy() for s in opt.sampling_std()])

        def loss_of(thetas):
            return sum(
                (0.5 * torch.tensor(ai, dtype=torch.float32) * th**2).sum()
                + (torch.tensor(bi, dtype=torch.float32) * th).sum()
                for th, ai, bi in zip(thetas, a, b)
            )

        if mode in ("traced", "counted"):
            traced_step(opt, params, loss_of, counted=mode == "counted")
        elif mode == "sample":
            loss_of(opt.sample() if opt.gradient_at_sample else params).backward()
            opt.step()
        else:
            with opt.training_params():
                loss_of(params).backward()
            opt.step()
        means.append([p.detach().double().numpy().copy() for p in params])
    return means, stds


def reference_noise(steps: int, explores: bool = True):
    gen = torch.Generator().manual_seed(SEED)
    if not explores:
        return [[np.zeros(s) for s in SHAPES] for _ in range(steps)]
    return [[torch.randn(s, generator=gen).double().numpy() for s in SHAPES] for _ in range(steps)]


def assert_trajectories_close(actual, expected, rtol=2e-5, atol=1e-7):
    assert len(actual) == len(expected)
    for step, (act, exp) in enumerate(zip(actual, expected)):
        for a_, e_ in zip(act, exp):
            np.testing.assert_allclose(a_, e_, rtol=rtol, atol=atol, err_msg=f"step {step}")


# ----------------------------------------------------------------------------- references
def reference_vadam(lr=1e-4, g1=0.9, g2=0.999, lam=1e-8, c=1e4, n=1.0, steps=STEPS):
    """Alg. 2 / Fig. 1 as the released code orders it (docs/decisions.md#vadam)."""
    a, b = quadratic_coefficients()
    mu = initial_means()
    m = [np.zeros(s) for s in SHAPES]
    s_ = [np.zeros(s) for s in SHAPES]
    means, stds = [], []
    for t, eps in enumerate(reference_noise(steps), start=1):
        sigma = [1.0 / np.sqrt(n * si + lam + c) for si in s_]  # raw s, line 3
        stds.append(sigma)
        theta = [mi + sg * e for mi, sg, e in zip(mu, sigma, eps)]
        g = [ai * th + bi for ai, th, bi in zip(a, theta, b)]
        for i in range(len(mu)):
            s_[i] = g2 * s_[i] + (1 - g2) * g[i] ** 2
            m[i] = g1 * m[i] + (1 - g1) * (g[i] + lam * mu[i] / n)  # old μ
            m_hat = m[i] / (1 - g1**t)
            s_hat = s_[i] / (1 - g2**t)
            # folded correction: α m̂ / (√ŝ + (λ/N)/√(1-γ₂ᵗ))
            mu[i] = mu[i] - lr * m_hat / (np.sqrt(s_hat) + (lam / n) / np.sqrt(1 - g2**t))
        means.append([x.copy() for x in mu])
    return means, stds


def reference_vadagrad(lr=1e-2, g2=0.99, s1=1e4, steps=STEPS):
    """Eq. 96 / Alg. 1 line 8 (docs/decisions.md#vadagrad)."""
    a, b = quadratic_coefficients()
    mu = initial_means()
    s_ = [np.full(s, s1) for s in SHAPES]
    means, stds = [], []
    for eps in reference_noise(steps):
        sigma = [1.0 / np.sqrt(si) for si in s_]
        stds.append(sigma)
        g = [ai * (mi + sg * e) + bi for ai, mi, sg, e, bi in zip(a, mu, sigma, eps, b)]
        s_ = [si + (1 - g2) * gi**2 for si, gi in zip(s_, g)]
        mu = [mi - lr * gi / np.sqrt(si) for mi, gi, si in zip(mu, g, s_)]
        means.append([x.copy() for x in mu])
    return means, stds


def reference_adam_plain(lr=1e-4, g1=0.9, g2=0.999, delta=1e-8, steps=STEPS):
    """Fig. 1 (left): Adam with explicit bias correction, θ = μ."""
    a, b = quadratic_coefficients()
    mu = initial_means()
    m = [np.zeros(s) for s in SHAPES]
    s_ = [np.zeros(s) for s in SHAPES]
    means = []
    for t in range(1, steps + 1):
        for i in range(len(mu)):
            g = a[i] * mu[i] + b[i]
            m[i] = g1 * m[i] + (1 - g1) * g
            s_[i] = g2 * s_[i] + (1 - g2) * g**2
            mu[i] = mu[i] - lr * (m[i] / (1 - g1**t)) / (np.sqrt(s_[i] / (1 - g2**t)) + delta)
        means.append([x.copy() for x in mu])
    return means, [[np.zeros(s) for s in SHAPES]] * steps


def reference_sgd_plain(lr=1e-4, steps=STEPS):
    a, b = quadratic_coefficients()
    mu = initial_means()
    means = []
    for _ in range(steps):
        mu = [mi - lr * (ai * mi + bi) for mi, ai, bi in zip(mu, a, b)]
        means.append([x.copy() for x in mu])
    return means, [[np.zeros(s) for s in SHAPES]] * steps


def explore_gradients(mu, prec, eps, a, b):
    """∇μ and ∇p of F(μ + ε/√p): g and −g ε / (2 p^{3/2})."""
    g = [ai * (mi + e / np.sqrt(pi)) + bi for ai, mi, e, pi, bi in zip(a, mu, eps, prec, b)]
    return g, [-gi * e / (2 * pi**1.5) for gi, e, pi in zip(g, eps, prec)]


def reference_sgd_explore(lr=1e-4, lr_prec=1e-2, p1=1e4, steps=STEPS):
    a, b = quadratic_coefficients()
    mu = initial_means()
    prec = [np.full(s, p1) for s in SHAPES]
    means, stds = [], []
    for eps in reference_noise(steps):
        stds.append([1 / np.sqrt(p) for p in prec])
        g_mu, g_p = explore_gradients(mu, prec, eps, a, b)
        mu = [m_ - lr * g for m_, g in zip(mu, g_mu)]
        prec = [p - lr_prec * g for p, g in zip(prec, g_p)]
        means.append([x.copy() for x in mu])
    return means, stds


def reference_adam_explore(lr=1e-4, lr_prec=1e-2, p1=1e4, g1=0.9, g2=0.999, delta=1e-8):
    def adam(x, g, m, v, t, alpha):
        m = g1 * m + (1 - g1) * g
        v = g2 * v + (1 - g2) * g**2
        x = x - alpha * np.sqrt(1 - g2**t) / (1 - g1**t) * m / (np.sqrt(v) + delta)
        return x, m, v

    a, b = quadratic_coefficients()
    mu = initial_means()
    prec = [np.full(s, p1) for s in SHAPES]
    zeros = [[np.zeros(s) for s in SHAPES] for _ in range(4)]
    m_mu, v_mu, m_p, v_p = zeros
    means, stds = [], []
    for t, eps in enumerate(reference_noise(STEPS), start=1):
        stds.append([1 / np.sqrt(p) for p in prec])
        g_mu, g_p = explore_gradients(mu, prec, eps, a, b)
        for i in range(len(mu)):
            mu[i], m_mu[i], v_mu[i] = adam(mu[i], g_mu[i], m_mu[i], v_mu[i], t, lr)
            prec[i], m_p[i], v_p[i] = adam(prec[i], g_p[i], m_p[i], v_p[i], t, lr_prec)
        means.append([x.copy() for x in mu])
    return means, stds


def reference_noisy_adam(
    lr=1.0, b1=0.9, b2=0.99, lam=0.0, n=1.0, eta=1.0, gamma_ex=0.0, f1=1e4, steps=STEPS
):
    """Zhang et al. Alg. 1 in descent form; λ = 0 is Sec. 4's VO form (running sum)."""
    a, b = quadratic_coefficients()
    mu = initial_means()
    m = [np.zeros(s) for s in SHAPES]
    f = [np.full(s, f1) for s in SHAPES]
    gamma_in = lam / (n * eta)
    means, stds = [], []
    for k, eps in enumerate(reference_noise(steps), start=1):
        # w ~ N(μ, λ/N diag(f + γ_in)⁻¹) (VI), N(μ, diag(f)⁻¹) (VO)
        sigma = [np.sqrt((lam / n if lam else 1.0) / (fi + gamma_in)) for fi in f]
        stds.append(sigma)
        w = [mi + sg * e for mi, sg, e in zip(mu, sigma, eps)]
        for i in range(len(mu)):
            grad = a[i] * w[i] + b[i]  # −∇ log p
            v = -grad - gamma_in * w[i]  # Alg. 1: v ← ∇ log p − γ_in w
            m[i] = b1 * m[i] + (1 - b1) * v
            f[i] = (b2 * f[i] if lam else f[i]) + (1 - b2) * grad**2
            m_hat = m[i] / (1 - b1**k) / (f[i] + gamma_in + gamma_ex)
            mu[i] = mu[i] + lr * m_hat
        means.append([x.copy() for x in mu])
    return means, stds


def reference_bbb(lr=0.05, g1=0.9, g2=0.999, delta=1e-8, lam=2.0, n=10.0, eta=0.5, std0=0.3):
    """Blundell et al. (2015) as VIME trains it: σ = log(1 + e^ρ), θ = μ + σε, Adam (folded
    bias correction, lasagne's) on μ and ρ of E[F(θ)] + (λ/N) KL(N(μ, σ²) ‖ N(0, η))."""
    a, b = quadratic_coefficients()
    mu = initial_means()
    rho = [np.full(s, np.log(np.expm1(std0))) for s in SHAPES]
    moments = {key: [np.zeros(s) for s in SHAPES] for key in ("m", "v", "m_rho", "v_rho")}
    means, stds = [], []
    for t, eps in enumerate(reference_noise(STEPS), start=1):
        sigma = [np.log1p(np.exp(r)) for r in rho]
        stds.append(sigma)
        for i in range(len(mu)):
            g = a[i] * (mu[i] + sigma[i] * eps[i]) + b[i]
            # KL = log(√η/σ) + (σ² + μ²)/(2η) − ½: ∂/∂μ = μ/η, ∂/∂σ = σ/η − 1/σ
            g_mu = g + lam / n * mu[i] / eta
            g_sigma = g * eps[i] + lam / n * (sigma[i] / eta - 1 / sigma[i])
            g_rho = g_sigma / (1 + np.exp(-rho[i]))  # dσ/dρ = sigmoid(ρ)
            step = lr * np.sqrt(1 - g2**t) / (1 - g1**t)
            for x, grad, m, v in ((mu, g_mu, "m", "v"), (rho, g_rho, "m_rho", "v_rho")):
                moments[m][i] = g1 * moments[m][i] + (1 - g1) * grad
                moments[v][i] = g2 * moments[v][i] + (1 - g2) * grad**2
                x[i] = x[i] - step * moments[m][i] / (np.sqrt(moments[v][i]) + delta)
        means.append([x.copy() for x in mu])
    return means, stds


def reference_param_noise(lr=1e-4, sigma=0.2, steps=STEPS):
    """Plappert et al.: θ̃ = μ + σε acts; μ is trained by Adam at μ itself."""
    means, _ = reference_adam_plain(lr=lr, steps=steps)
    return means, [[np.full(s, sigma) for s in SHAPES]] * steps


def reference_fixed_noise(lr=1e-4, p1=1e4, steps=STEPS):
    """Adam on μ at θ = μ + ε/√p₁ with p₁ fixed: Adam-Explore's reference with α^(σ) = 0."""
    assert steps == STEPS
    return reference_adam_explore(lr=lr, lr_prec=0.0, p1=p1)


REFERENCES = {
    "vadam": reference_vadam,
    "fixed-noise": reference_fixed_noise,
    "vadagrad": reference_vadagrad,
    "adam-plain": reference_adam_plain,
    "sgd-plain": reference_sgd_plain,
    "sgd-explore": reference_sgd_explore,
    "adam-explore": reference_adam_explore,
    "noisy-adam": reference_noisy_adam,
    "param-noise": reference_param_noise,
}
#: Checked on a real two-layer network in test_noisy_kfac.py (it needs Linear layers), and
#: IVON against its authors' implementation in test_ivon.py.
REFERENCES_ELSEWHERE = {"noisy-kfac", "ivon"}


def test_every_registered_strategy_has_a_reference():
    assert set(REFERENCES) | REFERENCES_ELSEWHERE == set(pe.available_optimizers())


@pytest.mark.parametrize("name", sorted(REFERENCES))
@pytest.mark.parametrize("mode", MODES)
def test_update_rule_matches_reference(name, mode):
    means, stds = run_optimizer(name, mode=mode)
    ref_means, ref_stds = REFERENCES[name]()
    assert_trajectories_close(means, ref_means)
    assert_trajectories_close(stds, ref_stds, rtol=1e-5, atol=1e-9)
    # The steps must actually move μ, or the comparison proves nothing.
    assert not np.allclose(means[-1][0], initial_means()[0])


@pytest.mark.parametrize("mode", ["sampled_params", "traced"])
def test_vadam_vi_form_matches_reference(mode):
    """Fig. 1 with N = 50, λ = 2, c = 0 and a larger step so that λμ/N matters."""
    kwargs = dict(lr=1e-2, prior_precision=2.0, sample_constant=0.0, num_data=50.0)
    means, stds = run_optimizer("vadam", mode=mode, **kwargs)
    ref_means, ref_stds = reference_vadam(lr=1e-2, lam=2.0, c=0.0, n=50.0)
    assert_trajectories_close(means, ref_means)
    assert_trajectories_close(stds, ref_stds, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("mode", ["sampled_params", "traced"])
def test_vadam_without_momentum_matches_reference(mode):
    """γ₁ = 0 with a prior term: the one case the fused Adam kernel cannot express."""
    kwargs = dict(lr=1e-2, betas=(0.0, 0.99), prior_precision=2.0, sample_constant=1.0)
    means, stds = run_optimizer("vadam", mode=mode, **kwargs)
    ref_means, ref_stds = reference_vadam(lr=1e-2, g1=0.0, g2=0.99, lam=2.0, c=1.0)
    assert_trajectories_close(means, ref_means)
    assert_trajectories_close(stds, ref_stds, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("mode", ["sampled_params", "traced"])
def test_noisy_adam_vi_form_matches_reference(mode):
    """Alg. 1 verbatim: moving-average f from 0, prior term γ_in·w, extrinsic damping."""
    kwargs = dict(
        lr=0.05, betas=(0.8, 0.9), kl_weight=0.5, num_data=10.0, prior_variance=2.0,
        damping=0.1, initial_precision=0.0,
    )  # fmt: skip
    means, stds = run_optimizer("noisy-adam", mode=mode, **kwargs)
    ref_means, ref_stds = reference_noisy_adam(
        lr=0.05, b1=0.8, b2=0.9, lam=0.5, n=10.0, eta=2.0, gamma_ex=0.1, f1=0.0
    )
    assert_trajectories_close(means, ref_means)
    assert_trajectories_close(stds, ref_stds, rtol=1e-5, atol=1e-9)
    assert not np.allclose(means[-1][0], initial_means()[0])


def test_noisy_adam_vo_precision_evolves_like_vadagrads():
    """Sec. 4 VO form with the defaults: f follows VadaGrad's s exactly (same σ)."""
    _, noisy = run_optimizer("noisy-adam")
    _, vadagrad = run_optimizer("vadagrad")
    # Same gradients only at the first step (the means then differ); σ before steps 1-2.
    assert_trajectories_close(noisy[:2], vadagrad[:2], rtol=1e-6, atol=0)


def test_vadam_first_step_by_hand():
    """t = 1 from s = m = 0: μ moves by α·(1−γ₁)g/(1−γ₁) / (√((1−γ₂)g²)/√(1−γ₂)) = α·sign(g)."""
    p = torch.nn.Parameter(torch.tensor([0.5, -0.25]))
    opt = pe.Vadam([p], lr=0.1, prior_precision=0.0, sample_constant=4.0)
    assert torch.allclose(opt.sampling_std()[0], torch.full((2,), 0.5))  # 1/√(0+0+4)
    p.grad = torch.tensor([3.0, -2.0])
    opt.step()
    assert torch.allclose(p.detach(), torch.tensor([0.4, -0.15]))
    # σ uses the raw (not bias-corrected) s = (1−γ₂) g² plus c.
    expected = 1.0 / torch.sqrt(0.001 * torch.tensor([9.0, 4.0]) + 4.0)
    assert torch.allclose(opt.sampling_std()[0], expected)


@pytest.mark.parametrize("device", DEVICES)
def test_a_parameter_that_skipped_an_update_takes_its_own_bias_correction(device):
    """Vadam with λ = 0: q has no gradient at the second step, so at the third its moments
    are at their second step and it takes t = 2's bias correction, p t = 3's (the step
    counts read in one copy, ``advance_steps``); the moves from Adam's recursions in NumPy,
    which Vadam's step is for λ = 0."""

    def moved(start: float, grads: list) -> float:
        m = s = 0.0
        t = 0
        for g in grads:
            if g is None:  # no gradient: no step, no count
                continue
            t += 1
            m, s = 0.9 * m + 0.1 * g, 0.999 * s + 0.001 * g * g
            start -= 0.1 * (m / (1 - 0.9**t)) / np.sqrt(s / (1 - 0.999**t))
        return start

    p = torch.nn.Parameter(torch.tensor([0.5], device=device))
    q = torch.nn.Parameter(torch.tensor([-0.25], device=device))
    opt = pe.Vadam([p, q], lr=0.1, prior_precision=0.0, sample_constant=4.0)
    grads = {"p": [3.0, 2.0, 1.0], "q": [3.0, None, 1.0]}
    for t in range(3):
        for name, x in (("p", p), ("q", q)):
            g = grads[name][t]
            x.grad = None if g is None else torch.tensor([g], device=device)
        opt.step()
    assert [float(opt.state[x]["step"]) for x in (p, q)] == [3.0, 2.0]
    np.testing.assert_allclose(p.item(), moved(0.5, grads["p"]), rtol=1e-6)
    np.testing.assert_allclose(q.item(), moved(-0.25, grads["q"]), rtol=1e-6)


def test_vadagrad_precision_never_decreases():
    p = torch.nn.Parameter(torch.zeros(1000))
    opt = pe.VadaGrad([p], lr=0.1, initial_precision=1.0)
    gen = torch.Generator().manual_seed(0)
    previous = opt.sampling_std()[0]
    for _ in range(20):
        p.grad = torch.randn(1000, generator=gen) * 5
        opt.step()
        current = opt.sampling_std()[0]
        assert torch.all(current <= previous)
        previous = current
    assert previous.max() < 1.0  # it did contract


def test_vadam_precision_can_decrease_again():
    """Unlike VadaGrad, Vadam's s forgets: after large gradients stop, σ grows back."""
    p = torch.nn.Parameter(torch.zeros(10))
    opt = pe.Vadam([p], betas=(0.9, 0.5), sample_constant=1.0)
    p.grad = torch.full((10,), 10.0)
    opt.step()
    after_big = opt.sampling_std()[0].clone()
    for _ in range(5):
        p.grad = torch.zeros(10)
        opt.step()
    assert torch.all(opt.sampling_std()[0] > after_big)


@pytest.mark.parametrize("mode", ["sampled_params", "traced"])
def test_adam_plain_with_a_large_eps_matches_reference(mode):
    """δ large enough to matter: where torch's Adam adds δ (to √ŝ) must be kept exactly."""
    means, _ = run_optimizer("adam-plain", mode=mode, lr=1e-2, eps=0.5)
    ref_means, _ = reference_adam_plain(lr=1e-2, delta=0.5)
    assert_trajectories_close(means, ref_means)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["sgd-explore", "adam-explore"])
def test_explore_precision_step_matches_reference(name, mode):
    """A small precision and a large precision step, so that ∇p visibly moves σ (at the
    paper's p = 1e4 a precision step changes σ by ~1e-11 relative, invisible above)."""
    kwargs = dict(precision_lr=0.1, initial_precision=4.0, min_precision=1e-3)
    means, stds = run_optimizer(name, mode=mode, **kwargs)
    ref_means, ref_stds = REFERENCES[name](lr_prec=0.1, p1=4.0)
    assert_trajectories_close(means, ref_means)
    assert_trajectories_close(stds, ref_stds, rtol=1e-5, atol=1e-9)
    assert not np.allclose(stds[-1][0], stds[0][0], rtol=1e-2)


@pytest.mark.parametrize("name", ["sgd-explore", "adam-explore"])
def test_explore_clamped_fraction_counts_precisions_held_at_the_floor(name):
    """Hand values: p = 1, ε = 1, so ∇p = −g/2. A gradient of −4 on an entry gives ∇p = 2
    and lowers its precision below 0 (SGD: 1 − 0.75·2; Adam's first step moves p by
    −α·sign(∇p) = −2), so the clamp holds it at the floor 0.5; +4 raises it, 0 leaves it.
    3 of the 8 entries (6 weights, 2 biases) end at the floor."""
    weight = torch.nn.Parameter(torch.zeros(3, 2))
    bias = torch.nn.Parameter(torch.zeros(2))
    lr = 0.75 if name == "sgd-explore" else 2.0
    opt = pe.make_optimizer(
        name, [weight, bias], precision_lr=lr, initial_precision=1.0, min_precision=0.5
    )
    assert opt.exploration_statistics()["clamped_fraction"] == 0.0
    opt.resample_noise()
    for p in (weight, bias):
        opt.state[p]["noise"].fill_(1.0)
    weight.grad = torch.tensor([[4.0, -4.0], [4.0, 0.0], [-4.0, 0.0]])
    bias.grad = torch.tensor([4.0, -4.0])
    opt.step()
    stats = opt.exploration_statistics()
    assert stats["clamped_fraction"] == 3 / 8
    assert stats["sigma_max"] == pytest.approx(0.5**-0.5)  # σ = 1/√0.5 at the floor


def test_strategies_without_a_clamp_report_sigma_statistics_only():
    net = torch.nn.Linear(2, 2)
    stats = pe.make_optimizer("vadam", net).exploration_statistics()
    assert set(stats) == {"sigma_mean", "sigma_min", "sigma_max", "sigma_q10", "sigma_median",
                          "sigma_q90", "sigma_median/weight", "sigma_median/bias"}  # fmt: skip
    assert stats["sigma_mean"] == pytest.approx(1 / np.sqrt(1e-8 + 1e4))


@pytest.mark.parametrize("mode", MODES)
def test_fixed_noise_is_adam_explore_without_a_precision_step(mode):
    """The ablation preset equals Adam-Explore whose variance step is zero (eq. 111 with
    α^(σ) = 0): the same μ after every step and the same σ = 0.01 throughout."""
    fixed = run_optimizer("fixed-noise", mode=mode)
    explore = run_optimizer("adam-explore", mode=mode, precision_lr=0.0)
    for actual, expected in zip(fixed, explore):
        assert_trajectories_close(actual, expected, rtol=0, atol=0)
    assert all(np.allclose(s, 0.01, rtol=1e-6) for step in fixed[1] for s in step)


@pytest.mark.parametrize("mode", MODES)
def test_bayes_by_backprop_matches_reference(mode):
    """μ and σ = softplus(ρ) both move: the prior term and the reparameterised ρ gradient."""
    kwargs = dict(lr=0.05, kl_weight=2.0, num_data=10.0, prior_variance=0.5, initial_std=0.3)
    means, stds = run_optimizer(pe.BayesByBackprop, mode=mode, **kwargs)
    ref_means, ref_stds = reference_bbb()
    assert_trajectories_close(means, ref_means)
    assert_trajectories_close(stds, ref_stds, rtol=1e-5, atol=1e-9)
    assert not np.allclose(means[-1][0], initial_means()[0])
    assert not np.allclose(stds[-1][0], stds[0][0], rtol=1e-3)


def test_bayes_by_backprop_starts_at_the_prior_and_reports_its_kl():
    """σ₀ = √η by default; at μ = 0 the KL to the prior is 0, and by hand otherwise."""
    p = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    opt = pe.BayesByBackprop([p], prior_variance=0.25)
    torch.testing.assert_close(opt.sampling_std()[0], torch.full((3,), 0.5, dtype=torch.float64))
    assert opt.kl_divergence_to_prior() == pytest.approx(0.0, abs=1e-12)
    with torch.no_grad():
        p.fill_(1.0)
    assert opt.kl_divergence_to_prior() == pytest.approx(3 * 0.5 * 1.0 / 0.25)


def traceable_optimizers():
    """A fresh optimizer of every strategy with a traced form, and torch's Adam (the
    critic's), each over one small parameter."""
    from agents.ddpg.compiled_update import critic_traceable_step

    found = {}
    for name in pe.available_optimizers():
        if name == "noisy-kfac":  # no traced form (it watches its layers)
            continue
        params = [torch.nn.Parameter(torch.zeros(3))]
        step = pe.make_optimizer(name, params).traceable_step()
        found[name] = step
    adam = torch.optim.Adam([torch.nn.Parameter(torch.zeros(3))], lr=3e-4, betas=(0.9, 0.999))
    found["torch-adam"] = critic_traceable_step(adam)
    return found


@pytest.mark.parametrize("t", [1, 2, 17, 1000, 31_000, 10**6])
def test_numbers_from_a_counted_step_are_the_eager_numbers(t):
    """The numbers a compiled graph computes from its float64 count t are, rounded to
    float32, those the eager step computes in Python from the int t: in Adam's step size
    α√(1 − γ₂ᵗ)/(1 − γ₁ᵗ), written out here by hand, and in every other number."""
    for name, step in traceable_optimizers().items():
        eager = pytree.tree_leaves(step.coefficients(t))
        counted = pytree.tree_leaves(step.coefficients(torch.tensor(float(t), dtype=torch.float64)))
        assert len(eager) == len(counted), name
        for e, c in zip(eager, counted):
            expected = torch.tensor(float(e), dtype=torch.float32)
            assert torch.equal(torch.as_tensor(c).to(torch.float32), expected), (name, e, c)
    step_size = 3e-4 * np.sqrt(1 - 0.999**t) / (1 - 0.9**t)
    adam = traceable_optimizers()["torch-adam"].coefficients(
        torch.tensor(float(t), dtype=torch.float64)
    )
    assert float(adam.step_size) == pytest.approx(step_size, rel=1e-12)


def test_sigma_from_a_counted_step_is_sigma_from_the_int_step():
    """A sampling strategy's σ with the numbers of a count kept on an accelerator (a float64
    tensor, which acting reads without waiting for the device) is its σ from the int count."""
    for name in pe.available_optimizers():
        if name == "noisy-kfac":
            continue
        opt = pe.make_optimizer(name, [torch.nn.Parameter(torch.randn(4, 3))])
        if not isinstance(opt, pe.WeightSampling) or type(opt)._std is pe.WeightSampling._std:
            continue
        group = opt.param_groups[0]
        states = [opt._init_state(group, p) for p in group["params"]]
        state = {key: [s[key] for s in states] for key in opt._state_keys}
        for t in (1, 7, 5000):
            from_int = opt._std(group, state, opt._coefficients(group, t))
            counted = torch.tensor(float(t), dtype=torch.float64)
            from_tensor = opt._std(group, state, opt._coefficients(group, counted))
            for a, b in zip(from_int, from_tensor, strict=True):
                assert torch.equal(a, b.to(a.dtype)), (name, t)

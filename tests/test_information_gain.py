"""The information gain of an example under each posterior, against direct computations.

Noisy Adam and noisy K-FAC (VI forms): ``information_gain`` is a closed form of the KL
divergence between the posterior after one step on the example and the posterior now. It is
checked against the actual ``step()`` of a copy of the optimizer on that one example (the
same ε): both posteriors are read from the optimizer states and built here as dense
Gaussians in NumPy — noisy K-FAC's covariance as c · kron(S_in⁻¹, A_in⁻¹) with eq. 13's
damping split computed here — and their KL taken with dense linear algebra. This is done
for several examples, at several points of a training run.

IVON: its gain, the exact KL of its momentum-free step at each weight sample, against the same
computed in NumPy from hand-written gradients.

Bayes by Backprop, as released (``bbb_gain_noise: unit``, the default): the dynamics model's
batched gain is checked against a transcription of the released ``loss_last_sample`` and
``fast_kl_div`` (bnn.py l.138-161, l.374-391, l.474-497, with the paper's ½): the local
reparameterisation's forward pass built here for one example and one noise draw per unit at
a time, its gradient w.r.t. (μ, ρ) taken by autograd on that example alone, and
``fast_kl_div``'s formula applied to it; and against the exact KL divergence after the
Newton step it approximates. The per-weight option (``bbb_gain_noise: weight``) applies the
same quadratic form to gradients through weight samples θ_k = μ + σ ε_k; it is checked against
that form with gradients from a hand-written NumPy forward and backward pass, and against the
exact KL after its Newton step.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import param_explore as pe
from agents.curiosity import VimeConfig
from agents.curiosity.dynamics import BayesianDynamics

IN, HIDDEN, OUT = 2, 3, 2
STD = 1.5  # the likelihood's σ
LAM, N, ETA = 1.0, 20.0, 0.5


def make_net() -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, OUT)
    ).double()


def data():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(40, IN, generator=gen, dtype=torch.float64)
    return x, torch.randn(40, OUT, generator=gen, dtype=torch.float64)


def nll(prediction, target):
    return 0.5 * (prediction - target).square().sum(-1) / STD**2


def train(net, opt, gen, rounds, start):
    """``rounds`` steps on minibatches of 6, mean loss, one weight sample each."""
    x, y = data()
    for t in range(start, start + rounds):
        rows = slice(6 * t % 30, 6 * t % 30 + 6)
        opt.zero_grad()
        opt.resample_noise(gen)
        with opt.training_params():
            nll(net(x[rows]), y[rows]).mean().backward()
        opt.step()


#: Each Linear layer's weight and bias in the parameters' order.
LAYERS = [(0, 1), (2, 3)]


def example_gradients(theta, x, y):
    """Per layer inputs and output gradients of each example's loss at θ (K = 1)."""
    inputs, output_grads = [[], []], [[], []]
    for row in range(len(x)):
        w1, b1, w2, b2 = (t.detach().clone().requires_grad_() for t in theta)
        s1 = x[row] @ w1.T + b1
        h = torch.tanh(s1)
        s2 = h @ w2.T + b2
        s1.retain_grad()
        s2.retain_grad()
        nll(s2, y[row]).backward()
        for layer, (a, s) in enumerate(((x[row], s1), (h.detach(), s2))):
            inputs[layer].append(a)
            output_grads[layer].append(s.grad)

    def stacked(tensors):  # (B, K = 1, ...)
        return [torch.stack(ts)[:, None] for ts in tensors]

    return stacked(inputs), stacked(output_grads)


def copy_of(net, opt, build):
    """An independent network and optimizer in the same state (ε included)."""
    twin = make_net()
    twin.load_state_dict(net.state_dict())
    twin_opt = build(twin)
    twin_opt.load_state_dict(copy.deepcopy(opt.state_dict()))
    return twin, twin_opt


def gaussian_kl(mean1, cov1, mean0, cov0):
    """KL(N(mean1, cov1) ‖ N(mean0, cov0)), dense."""
    inverse = np.linalg.inv(cov0)
    diff = mean0 - mean1
    return 0.5 * (
        np.trace(inverse @ cov1)
        + diff @ inverse @ diff
        - len(mean0)
        + np.linalg.slogdet(cov0)[1]
        - np.linalg.slogdet(cov1)[1]
    )


def noisy_adam_posterior(net, opt):
    """One dense Gaussian over all weights: N(μ, diag((λ/N)/(f + λ/(Nη)))) (Alg. 1 line 3)."""
    mean = np.concatenate([p.detach().numpy().ravel() for p in net.parameters()])
    fisher = np.concatenate([opt.state[p]["fisher"].numpy().ravel() for p in net.parameters()])
    return [(mean, np.diag((LAM / N) / (fisher + LAM / (N * ETA))))]


def noisy_kfac_posterior(net, opt):
    """Per layer a dense Gaussian over vec_row([W | b]): c · kron(S_in⁻¹, A_in⁻¹), eq. 13."""
    out = []
    gamma = LAM / (N * ETA)
    for layer in (net[0], net[2]):
        state = opt.state[layer.weight]
        A, S = state["A"].numpy(), state["S"].numpy()
        ta, ts = np.trace(A) / len(A), np.trace(S) / len(S)
        pi = np.sqrt(ta / ts) if ta > 0 and ts > 0 else 1.0
        s_in = S + np.sqrt(gamma) / pi * np.eye(len(S))
        a_in = A + pi * np.sqrt(gamma) * np.eye(len(A))
        cov = (LAM / N) * np.kron(np.linalg.inv(s_in), np.linalg.inv(a_in))
        mean = torch.cat([layer.weight, layer.bias[:, None]], 1).detach().numpy().ravel()
        out.append((mean, cov))
    return out


def dense_kl(after, before):
    return sum(gaussian_kl(m1, c1, m0, c0) for (m1, c1), (m0, c0) in zip(after, before))


def build_noisy_adam(net):
    """Without momentum (β₁ = 0): information_gain's step is Alg. 1's without it."""
    return pe.NoisyAdam(
        net.parameters(), lr=0.1, betas=(0.0, 0.9), kl_weight=LAM, num_data=N,
        prior_variance=ETA, damping=0.05, initial_precision=0.0,
    )  # fmt: skip


def build_noisy_kfac(net):
    return pe.NoisyKFAC(
        net, lr=0.1, beta=0.2, kl_weight=LAM, num_data=N, prior_variance=ETA, damping=0.05,
        stats_interval=1, inverse_interval=1,
    )  # fmt: skip


POSTERIORS = {
    "noisy-adam": (build_noisy_adam, noisy_adam_posterior),
    "noisy-kfac": (build_noisy_kfac, noisy_kfac_posterior),
}


@pytest.mark.parametrize("name", list(POSTERIORS))
def test_information_gain_is_the_kl_of_the_actual_step(name):
    """… and the KL term of the ELBO is the KL to the prior of the same dense Gaussian."""
    build, posterior = POSTERIORS[name]
    net = make_net()
    opt = build(net)
    gen = torch.Generator().manual_seed(2)
    x, y = data()
    examples = slice(30, 36)
    for checkpoint in range(3):  # before any step (factors 0, f 0), then after 3 and 6
        if checkpoint:
            train(net, opt, gen, 3, start=3 * checkpoint)
        opt.resample_noise(gen)
        noise = [opt.state[p]["noise"].clone() for p in net.parameters()]
        theta = opt.posterior_sample([e[None] for e in noise])
        with torch.no_grad():  # the optimizer's own sample, with its own ε
            for own, sample in zip(opt.sample(), theta):
                torch.testing.assert_close(own, sample[0], rtol=1e-12, atol=1e-12)
        inputs, output_grads = example_gradients([t[0] for t in theta], x[examples], y[examples])
        state = copy.deepcopy(opt.state_dict())
        evidence = pe.SampledGradients(
            [e[None] for e in noise], theta, inputs, output_grads, LAYERS
        )
        gains = opt.information_gain(evidence)
        expected = []
        before = posterior(net, opt)
        prior = [(np.zeros_like(mean), ETA * np.eye(len(mean))) for mean, _ in before]
        assert opt.kl_divergence_to_prior() == pytest.approx(dense_kl(before, prior), rel=1e-9)
        for row in range(examples.start, examples.stop):
            twin, twin_opt = copy_of(net, opt, build)
            twin_opt.zero_grad()
            with twin_opt.training_params():
                nll(twin(x[row : row + 1]), y[row : row + 1]).mean().backward()
            twin_opt.step()
            expected.append(dense_kl(posterior(twin, twin_opt), before))
        np.testing.assert_allclose(gains.numpy(), expected, rtol=1e-8)
        assert min(expected) > 0
        # Nothing changed: the information gain is a what-if.
        after = opt.state_dict()
        for key, value in state["state"].items():
            for name_, tensor in value.items():
                assert torch.equal(after["state"][key][name_], tensor), name_


def test_bbb_per_weight_information_gain_is_the_second_order_kl():
    """The per-weight option: the quadratic form of fast_kl_div (bnn.py l.474-497) on
    gradients through weight samples — not the released gradients (those go through the
    local reparameterisation: test_bbb_information_gain_is_vimes_released_fast_kl_div)."""
    net = make_net()
    opt = pe.BayesByBackprop(
        net.parameters(), lr=0.05, kl_weight=LAM, num_data=N, prior_variance=ETA, initial_std=0.4
    )
    gen = torch.Generator().manual_seed(3)
    train(net, opt, gen, 6, start=0)  # σ now differs between weights
    x, y = data()
    samples, step = 4, 0.01
    noises = [
        torch.randn((samples, *p.shape), generator=gen, dtype=torch.float64)
        for p in net.parameters()
    ]
    thetas = opt.posterior_sample(noises)
    rows = range(30, 36)
    # NumPy: every example's ∇θ at every θ_k by a hand-written backward pass.
    mu = [p.detach().numpy() for p in net.parameters()]
    rho = [opt.state[p]["rho"].numpy() for p in net.parameters()]
    eps = [e.numpy() for e in noises]
    sigma = [np.log1p(np.exp(r)) for r in rho]
    per_example, factors = hand_gradients(mu, sigma, eps, x[rows].numpy(), y[rows].numpy())
    evidence = pe.SampledGradients(noises, thetas, *factors, LAYERS)
    gains = opt.information_gain(evidence, step_size=step).numpy()
    # fast_kl_div's form on these gradients: Σ step² ∇² H⁻¹, H⁻¹_μ = σ², H_ρ = 2e^{2ρ}/(1+e^ρ)²/σ²
    reference, exact = [], []
    for g in per_example:
        quad, kl = 0.0, 0.0
        for i in range(4):
            grad_mu = np.mean([g[k][i] for k in range(samples)], axis=0)
            sig = 1 / (1 + np.exp(-rho[i]))
            grad_rho = np.mean([g[k][i] * eps[i][k] for k in range(samples)], axis=0) * sig
            h_rho = 2 * np.exp(2 * rho[i]) / (1 + np.exp(rho[i])) ** 2 / sigma[i] ** 2
            quad += np.sum(grad_mu**2 * sigma[i] ** 2 + grad_rho**2 / h_rho)
            # the Newton step it approximates, and the exact KL it causes
            new_mu = mu[i] - step * sigma[i] ** 2 * grad_mu
            new_sigma = np.log1p(np.exp(rho[i] - step * grad_rho / h_rho))
            ratio = (new_sigma / sigma[i]) ** 2
            kl += 0.5 * np.sum(ratio - 1 - np.log(ratio) + (new_mu - mu[i]) ** 2 / sigma[i] ** 2)
        reference.append(0.5 * step**2 * quad)
        exact.append(kl)
    np.testing.assert_allclose(gains, reference, rtol=1e-10)
    np.testing.assert_allclose(gains, exact, rtol=1e-2)
    assert all(torch.equal(t, m + s * e) for t, m, s, e in zip(
        thetas, net.parameters(), opt.sampling_std(), noises))  # fmt: skip


def hand_gradients(mu, sigma, eps, x, y):
    """NumPy: every example's ∇θ at every θ_k = μ + σ ε_k by a hand-written backward pass
    of the tanh network (``[example][k][parameter]``), and the per-layer factors, inputs a
    and output gradients Ds, (B, K, units) as tensors."""
    per_example, factors = [], [[[], []], [[], []]]
    for xr, yr in zip(x, y):
        g_samples, rows = [], [[[], []], [[], []]]
        for k in range(len(eps[0])):
            w1, b1, w2, b2 = (m + s * e[k] for m, s, e in zip(mu, sigma, eps))
            h = np.tanh(w1 @ xr + b1)
            d2 = (w2 @ h + b2 - yr) / STD**2
            d1 = (w2.T @ d2) * (1 - h**2)
            g_samples.append([np.outer(d1, xr), d1, np.outer(d2, h), d2])
            for kind, values in enumerate(((xr, h), (d1, d2))):
                for layer, value in enumerate(values):
                    rows[kind][layer].append(value)
        per_example.append(g_samples)
        for kind in range(2):
            for layer in range(2):
                factors[kind][layer].append(rows[kind][layer])
    tensors = [[torch.tensor(np.array(layer)) for layer in kind] for kind in factors]
    return per_example, tensors


@pytest.mark.parametrize(
    "hess_approx, clip_radius", [("price", None), ("gradsq", None), ("price", 0.05)]
)
def test_ivon_information_gain_is_the_kl_of_its_step_in_numpy(hess_approx, clip_radius):
    """IVON's gain: the exact KL between the diagonal Gaussians before and after its step on
    one example at each weight sample, without momentum, averaged over the samples — here
    from hand-written gradients, h′ and Δμ in NumPy. And its KL to the prior N(0, 1/(ess δ))."""
    net = make_net()
    settings = pe.IVON.posterior_settings(num_data=N, prior_variance=ETA)
    settings.update(lr=0.05, beta2=0.8, hess_approx=hess_approx, clip_radius=clip_radius)
    opt = pe.make_optimizer("ivon", net, **settings)
    gen = torch.Generator().manual_seed(5)
    train(net, opt, gen, 6, start=0)  # h now differs between weights
    x, y = data()
    samples = 3
    noises = [
        torch.randn((samples, *p.shape), generator=gen, dtype=torch.float64)
        for p in net.parameters()
    ]
    thetas = opt.posterior_sample(noises)
    ess, delta, beta2 = settings["ess"], settings["weight_decay"], settings["beta2"]
    step = settings["lr"] * (settings["hess_init"] + delta)
    radius = np.inf if clip_radius is None else clip_radius
    mu = [p.detach().numpy() for p in net.parameters()]
    hess = [opt.state[p]["hess"].numpy() for p in net.parameters()]
    assert np.std(np.concatenate([h.ravel() for h in hess])) > 1e-3
    sigma = [1 / np.sqrt(ess * (h + delta)) for h in hess]
    eps = [e.numpy() for e in noises]
    per_example, factors = hand_gradients(mu, sigma, eps, x[30:36].numpy(), y[30:36].numpy())
    expected, clipped = [], 0
    for g in per_example:
        kl = 0.0
        for k in range(samples):
            for i in range(4):
                if hess_approx == "price":
                    estimate = ess * (hess[i] + delta) * (sigma[i] * eps[i][k]) * g[k][i]
                else:
                    estimate = ess * g[k][i] ** 2
                after = (
                    beta2 * hess[i] + (1 - beta2) * estimate
                    + 0.5 * (1 - beta2) ** 2 * (hess[i] - estimate) ** 2 / (hess[i] + delta)
                )  # fmt: skip
                direction = (g[k][i] + delta * mu[i]) / (after + delta)
                clipped += int(np.sum(np.abs(direction) > radius))
                shift = -step * np.clip(direction, -radius, radius)
                ratio = (1 / (after + delta)) / (1 / (hess[i] + delta))  # σ′²/σ²
                kl += 0.5 * np.sum(ratio - 1 - np.log(ratio) + shift**2 / sigma[i] ** 2)
        expected.append(kl / samples)
    evidence = pe.SampledGradients(noises, thetas, *factors, LAYERS)
    np.testing.assert_allclose(opt.information_gain(evidence).numpy(), expected, rtol=1e-9)
    assert (clipped > 0) == (clip_radius is not None)
    assert min(expected) > 0 and np.std(expected) > 0
    eta = 1 / (ess * delta)
    prior_kl = sum(
        0.5 * np.sum((s**2 + m**2) / eta - 1 - np.log(s**2 / eta)) for m, s in zip(mu, sigma)
    )
    assert opt.kl_divergence_to_prior() == pytest.approx(prior_kl, rel=1e-10)


def softplus(x):
    return torch.log1p(torch.exp(x))


def released_fast_kl_div(mu, rho, x, y, eps, step, likelihood_std):
    """bnn.py's gain of one example, transcribed: lasagne's layout (W: in × out, x @ W),
    ``mu``/``rho`` per layer [W, b] as float64 leaves, ``eps[l]`` (K, units) the noise of
    layer l for each of the K samples. Returns the KL and the gradients w.r.t. μ and ρ."""
    mu = [[t.clone().requires_grad_() for t in layer] for layer in mu]
    rho = [[t.clone().requires_grad_() for t in layer] for layer in rho]
    samples = len(eps[0])
    log_p = 0.0
    for k in range(samples):  # loss_last_sample's n_samples predictions, l.381-388
        h = x
        for layer, ((w, b), (rho_w, rho_b), e) in enumerate(zip(mu, rho, eps)):
            # get_output_for_reparametrization, l.153-161
            gamma = h @ w + b
            delta = h.square() @ softplus(rho_w).square() + softplus(rho_b).square()
            activation = gamma + torch.sqrt(delta) * e[k]
            h = torch.relu(activation) if layer < len(mu) - 1 else activation
        # _log_prob_normal, l.345-349
        sd = torch.tensor(likelihood_std, dtype=torch.float64)
        log_p = log_p + torch.sum(
            -torch.log(sd)
            - torch.log(torch.sqrt(torch.tensor(2 * np.pi)))
            - (y - h) ** 2 / (2 * sd**2)
        )
    # kl_div_new_old (l.177-190) with the old parameters saved equal to the new (pse l.93);
    # the released denominator's 1e-8 guard is left out (its gradient, −1e-8/(2σ³) per ρ,
    # is what makes the term's gradient non-zero there).
    kl = 0.0
    for (w, b), (rho_w, rho_b) in zip(mu, rho):
        for m, r in ((w, rho_w), (b, rho_b)):
            m_old, s_old, s_new = m.detach(), softplus(r.detach()), softplus(r)
            kl = kl + torch.sum(
                ((m - m_old) ** 2 + s_new**2 - s_old**2) / (2 * s_old**2)
                + torch.log(s_old) - torch.log(s_new)
            )  # fmt: skip
    loss = kl - log_p / samples
    flat_mu = [t for layer in mu for t in layer]
    flat_rho = [t for layer in rho for t in layer]
    grad_mu = torch.autograd.grad(loss, flat_mu, retain_graph=True)
    grad_rho = torch.autograd.grad(loss, flat_rho)
    # fast_kl_div, l.474-497: Σ step² grad² invH, no ½
    total = 0.0
    for g, r in zip(grad_mu, flat_rho):
        total += float(torch.sum(step**2 * g**2 * softplus(r.detach()) ** 2))
    for g, r in zip(grad_rho, flat_rho):
        p = r.detach()
        h = 2.0 * torch.exp(2 * p) / (1 + torch.exp(p)) ** 2 / softplus(p) ** 2
        total += float(torch.sum(step**2 * g**2 / h))
    return total, grad_mu, grad_rho


def test_bbb_information_gain_is_vimes_released_fast_kl_div():
    """The default estimator (noise per unit) of the dynamics model, batched over examples
    and samples, against bnn.py's gain one example at a time, with the same ε."""
    config = VimeConfig(
        hidden_sizes=[HIDDEN], num_samples=4, likelihood_std=STD, lr=0.05, prior_std=0.4
    )
    assert config.bbb_gain_noise == "unit"
    dynamics = BayesianDynamics(IN, OUT, config, torch.Generator().manual_seed(4))
    dynamics.network.double()  # float64 for a tight comparison (the optimizer's state too)
    x, y = data()
    for t in range(8):  # σ now differs between weights
        dynamics.train_step(x[6 * t % 30 : 6 * t % 30 + 6], y[6 * t % 30 : 6 * t % 30 + 6])
    rows = slice(30, 36)
    noises = dynamics.information_noise(6)  # per layer (examples, samples, units)
    assert [tuple(e.shape) for e in noises] == [(6, 4, HIDDEN), (6, 4, OUT)]
    step = config.second_order_step
    gains = dynamics.information_gain(x[rows], y[rows], noises).numpy()
    mean_grads, std_grads = dynamics.local_gradients(
        dynamics.local_example_statistics(x[rows], y[rows], noises)
    )
    opt = dynamics.optimizer
    layers = dynamics.linears
    mu = [[m.weight.detach().T, m.bias.detach()] for m in layers]
    rho = [[opt.state[m.weight]["rho"].T, opt.state[m.bias]["rho"]] for m in layers]
    flat_rho = [r for layer in rho for r in layer]
    assert float(torch.cat([r.flatten() for r in flat_rho]).std()) > 1e-3
    reference, exact = [], []
    for b, row in enumerate(range(rows.start, rows.stop)):
        eps = [e[b] for e in noises]
        kl, grad_mu, grad_rho = released_fast_kl_div(mu, rho, x[row], y[row], eps, step, STD)
        reference.append(kl)
        # the project's per-example gradients (torch layout: W is out × in) are autograd's
        for i, (g_mu, g_rho, r) in enumerate(zip(grad_mu, grad_rho, flat_rho)):
            g_sigma = g_rho / torch.sigmoid(r)
            if g_mu.dim() == 2:
                g_mu, g_sigma = g_mu.T, g_sigma.T
            torch.testing.assert_close(mean_grads[i][b], g_mu, rtol=1e-10, atol=1e-14)
            torch.testing.assert_close(std_grads[i][b], g_sigma, rtol=1e-10, atol=1e-14)
        # the Newton step fast_kl_div approximates, and the exact KL it causes
        kl_exact = 0.0
        for g_mu, g_rho, r in zip(grad_mu, grad_rho, flat_rho):
            sigma = softplus(r)
            h_rho = 2 * torch.sigmoid(r) ** 2 / sigma**2
            new_sigma = softplus(r - step * g_rho / h_rho)
            ratio = (new_sigma / sigma) ** 2
            shift = step * sigma**2 * g_mu
            kl_exact += 0.5 * float(torch.sum(ratio - 1 - torch.log(ratio) + shift**2 / sigma**2))
        exact.append(kl_exact)
    np.testing.assert_allclose(gains, 0.5 * np.array(reference), rtol=1e-10)  # the paper's ½
    np.testing.assert_allclose(gains, exact, rtol=1e-2)
    assert min(reference) > 0 and np.std(reference) > 0


def test_information_gain_needs_the_vi_form():
    net = make_net()
    with pytest.raises(ValueError, match="VI form"):
        pe.NoisyAdam(net.parameters()).information_gain(pe.SampledGradients([], [], [], [], []))
    with pytest.raises(ValueError, match="VI form"):
        pe.NoisyKFAC(net).kl_divergence_to_prior()

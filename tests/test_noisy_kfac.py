"""Noisy K-FAC (Zhang et al. 2018, Alg. 2 and eq. 12-13) against an independent NumPy model.

The reference runs a two-layer tanh network forward and backward by hand in float64,
builds the Kronecker factors from its own activations and output gradients (eq. 12:
per-example means of ā āᵀ and of Ds Dsᵀ with Ds = M ∂L/∂s), and forms the precision as a
full matrix: np.kron of the damped factors (VI, eq. 13) or p₀ I + np.kron(S, A) (VO), with
np.linalg.inv and a full-matrix inverse square root. Only ε is shared with the code under
test, redrawn from an identically seeded ``torch.Generator`` in parameter order.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import param_explore as pe

pytestmark = pytest.mark.trains  # .ci/run runs these again under another kernel set

SEED = 99
IN, HIDDEN, OUT, ROWS = 3, 4, 2, 8


def data():
    rng = np.random.default_rng(5)
    return rng.normal(size=(ROWS, IN)), rng.normal(size=(ROWS, OUT))


def make_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, OUT)
    ).double()


def run_code(steps, **kwargs):
    """μ (as [W | b] per layer) after every step, σ before every step."""
    net = make_net()
    opt = pe.make_optimizer("noisy-kfac", net, **kwargs)
    x, t = (torch.tensor(v) for v in data())
    gen = torch.Generator().manual_seed(SEED)
    layers = [net[0], net[2]]
    means, stds = [], []
    for _ in range(steps):
        opt.zero_grad()
        opt.resample_noise(gen)
        sigma = opt.sampling_std()
        stds.append(
            [torch.cat([sigma[2 * i], sigma[2 * i + 1][:, None]], 1).numpy() for i in range(2)]
        )
        with opt.training_params():
            (0.5 * (net(x) - t).pow(2).sum()).backward()
        opt.step()
        means.append(
            [torch.cat([m.weight, m.bias[:, None]], 1).detach().numpy().copy() for m in layers]
        )
    return means, stds


def inverse_sqrt(matrix):
    values, vectors = np.linalg.eigh(matrix)
    return vectors @ np.diag(values**-0.5) @ vectors.T


def reference(steps, lr=1.0, beta=0.01, lam=0.0, n=1.0, eta=1.0, gamma_ex=0.0, p0=1e4,
              t_stats=10, t_inv=100):  # fmt: skip
    """Alg. 2 (descent form) on the two-layer net; λ = 0 is the VO form of the docstring."""
    x, t = data()
    net = make_net()
    mu = [
        np.concatenate([m.weight.detach().numpy(), m.bias.detach().numpy()[:, None]], 1)
        for m in (net[0], net[2])
    ]
    widths = [(HIDDEN, IN + 1), (OUT, HIDDEN + 1)]
    A = [np.zeros((w, w)) for _, w in widths]
    S = [np.zeros((o, o)) for o, _ in widths]
    updates = 0
    vi = lam > 0
    g_in = lam / (n * eta) if vi else p0
    c = lam / n if vi else 1.0

    def refresh(layer):
        """Full precision matrices over vec_row([W | b]): for the step and for sampling."""
        a, s_ = A[layer], S[layer]
        eye = np.eye(len(a) * len(s_))
        if vi:  # eq. 13: damping split between the factors
            a_mean, s_mean = np.trace(a) / len(a), np.trace(s_) / len(s_)
            pi = np.sqrt(a_mean / s_mean) if a_mean > 0 and s_mean > 0 else 1.0

            def precision(g):
                return np.kron(
                    s_ + np.sqrt(g) / pi * np.eye(len(s_)), a + pi * np.sqrt(g) * np.eye(len(a))
                )
        else:  # VO: p₀ I + S ⊗ A, exactly

            def precision(g):
                return np.kron(s_, a) + g * eye

        return dict(step=np.linalg.inv(precision(g_in + gamma_ex)),
                    root=inverse_sqrt(precision(g_in)), shape=(len(s_), len(a)))  # fmt: skip

    inv = [refresh(0), refresh(1)]
    gen = torch.Generator().manual_seed(SEED)
    means, stds = [], []
    for k in range(1, steps + 1):
        eps = [torch.randn(s, generator=gen).double().numpy()
               for s in [(HIDDEN, IN), (HIDDEN,), (OUT, HIDDEN), (OUT,)]]  # fmt: skip
        noise = [np.concatenate([eps[0], eps[1][:, None]], 1),
                 np.concatenate([eps[2], eps[3][:, None]], 1)]  # fmt: skip
        marginal = [np.diag(i["root"] @ i["root"]).reshape(i["shape"]) for i in inv]
        stds.append([np.sqrt(c * v) for v in marginal])
        theta = [
            m + np.sqrt(c) * (i["root"] @ e.ravel()).reshape(i["shape"])
            for m, i, e in zip(mu, inv, noise)
        ]
        # forward / backward by hand
        a0 = np.concatenate([x, np.ones((ROWS, 1))], 1)
        h = np.tanh(a0 @ theta[0].T)
        a1 = np.concatenate([h, np.ones((ROWS, 1))], 1)
        ds1 = a1 @ theta[1].T - t  # ∂loss/∂s of layer 2
        ds0 = (ds1 @ theta[1][:, :HIDDEN]) * (1 - h**2)
        grads = [ds0.T @ a0, ds1.T @ a1]
        if k % t_stats == 0:
            updates += 1
            for i, (a, ds) in enumerate([(a0, ds0), (a1, ds1)]):
                a_t, s_t = a.T @ a / ROWS, (ROWS * ds).T @ (ROWS * ds) / ROWS
                if vi:
                    A[i] = (1 - beta) * A[i] + beta * a_t
                    S[i] = (1 - beta) * S[i] + beta * s_t
                else:
                    A[i] = A[i] + (a_t - A[i]) / updates
                    S[i] = S[i] + beta * t_stats * s_t
        if k % t_inv == 0:
            inv = [refresh(0), refresh(1)]
        for i in range(2):
            v = grads[i] + (lam / (n * eta)) * theta[i] if vi else grads[i]
            mu[i] = mu[i] - lr * (inv[i]["step"] @ v.ravel()).reshape(inv[i]["shape"])
        means.append([m.copy() for m in mu])
    return means, stds


def assert_close(actual, expected, rtol=1e-6, atol=1e-7):
    for k, (act, exp) in enumerate(zip(actual, expected, strict=True)):
        for a_, e_ in zip(act, exp, strict=True):
            np.testing.assert_allclose(a_, e_, rtol=rtol, atol=atol, err_msg=f"step {k}")


CASES = {
    "vo-defaults-every-step": dict(stats_interval=1, inverse_interval=1),
    "vo-intervals": dict(stats_interval=2, inverse_interval=3, initial_precision=50.0, lr=0.5),
    "vo-damping": dict(stats_interval=1, inverse_interval=2, initial_precision=20.0, damping=5.0),
    "vi": dict(
        kl_weight=0.5, num_data=4.0, prior_variance=2.0, damping=0.3, beta=0.3,
        stats_interval=1, inverse_interval=2, lr=0.05,
    ),
}  # fmt: skip


def reference_kwargs(kw):
    names = dict(
        stats_interval="t_stats", inverse_interval="t_inv", initial_precision="p0",
        kl_weight="lam", num_data="n", prior_variance="eta", damping="gamma_ex",
    )  # fmt: skip
    return {names.get(k, k): v for k, v in kw.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_update_rule_matches_reference(case):
    steps = 7
    means, stds = run_code(steps, **CASES[case])
    ref_means, ref_stds = reference(steps, **reference_kwargs(CASES[case]))
    assert_close(means, ref_means)
    assert_close(stds, ref_stds)
    # μ moved and σ changed (the statistics were used), or the comparison proves nothing.
    assert not np.allclose(means[-1][0], means[0][0])
    assert not np.allclose(stds[-1][1], stds[0][1], rtol=1e-4)


def test_sampled_noise_has_the_kronecker_covariance():
    """Cov(vec_row(W̃_θ − M̃)) over 40 000 draws matches (p₀ I + S ⊗ A)⁻¹ (VO, exact)."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(2, 3).double()  # W̃ is 3 × 3: weight and bias column
    p0 = 0.5
    opt = pe.NoisyKFAC(layer, initial_precision=p0, stats_interval=1, inverse_interval=1, beta=1.0)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(16, 2, generator=gen, dtype=torch.float64) * torch.tensor([1.0, 3.0])
    with opt.training_params():
        out = layer(x)
        (out * torch.tensor([1.0, -2.0, 0.5])).pow(2).sum().backward()
    # Independent factors from the same inputs and output gradients.
    a = torch.cat([x, torch.ones(16, 1, dtype=torch.float64)], 1).numpy()
    ds = (2 * out.detach() * torch.tensor([1.0, -2.0, 0.5]) ** 2).numpy()
    opt.step()
    # VO: Ā = A_1, S = β·T_stats·S_1 with β = T_stats = 1; S_1 = mean of (M ds)(M ds)ᵀ.
    A, S = a.T @ a / 16, 16 * ds.T @ ds
    expected = np.linalg.inv(np.kron(S, A) + p0 * np.eye(9))
    mean = torch.cat([layer.weight, layer.bias[:, None]], 1).detach().clone()
    draws = []
    for _ in range(40_000):
        opt.resample_noise(gen)
        w, b = opt.sample()
        draws.append((torch.cat([w, b[:, None]], 1) - mean).flatten())
    empirical = np.cov(torch.stack(draws).detach().numpy(), rowvar=False)
    scale = np.sqrt(np.outer(np.diag(expected), np.diag(expected)))
    np.testing.assert_allclose(empirical / scale, expected / scale, atol=0.03)
    # The noise is correlated: some correlations are far from 0, as the Kronecker form says.
    assert np.abs(expected / scale - np.eye(9)).max() > 0.3
    # sampling_std() reports the marginal σ of the same distribution.
    sigma = opt.sampling_std()
    reported = torch.cat([sigma[0], sigma[1][:, None]], 1).flatten().numpy()
    np.testing.assert_allclose(reported, np.sqrt(np.diag(expected)), rtol=1e-10)


def test_a_mean_loss_scaled_back_gives_the_summed_losses_statistics_and_step():
    """scale_gradients_(M) after a mean loss (what the SB3 policy does) is the summed loss:
    same factors, same step — the recorded output gradients are scaled with p.grad."""
    x, t = (torch.tensor(v) for v in data())
    results = []
    for reduce, factor in ((torch.sum, None), (torch.mean, float(ROWS))):
        net = make_net()
        opt = pe.make_optimizer("noisy-kfac", net, stats_interval=1, inverse_interval=1)
        opt.resample_noise(torch.Generator().manual_seed(SEED))
        with opt.training_params():
            reduce(0.5 * (net(x) - t).pow(2).sum(1)).backward()
        if factor is not None:
            opt.scale_gradients_(factor)
        opt.step()
        results.append((opt.state[net[2].weight], [p.detach().clone() for p in net.parameters()]))
    (state_sum, params_sum), (state_mean, params_mean) = results
    for key in ("A", "S"):
        torch.testing.assert_close(state_mean[key], state_sum[key])
    assert state_sum["S"].abs().max() > 0
    for a, b in zip(params_sum, params_mean):
        torch.testing.assert_close(a, b)


def test_statistics_come_only_from_passes_with_gradients():
    """Rollouts and evaluations (no_grad) leave the factors alone; the next step uses the
    training pass."""
    net = make_net()
    opt = pe.make_optimizer("noisy-kfac", net, stats_interval=1, inverse_interval=1)
    x = torch.randn(5, IN, dtype=torch.float64)
    with torch.no_grad():
        net(x)
    opt.step()  # no gradient at all: nothing to do
    assert float(opt.state[net[0].weight]["stats_updates"]) == 0
    with opt.training_params():
        net(x).sum().backward()
    with torch.no_grad():
        net(torch.randn(3, IN, dtype=torch.float64))  # an evaluation in between
    opt.step()
    a = torch.cat([x, torch.ones(5, 1, dtype=torch.float64)], 1)
    torch.testing.assert_close(opt.state[net[0].weight]["A"], a.T @ a / 5)


def test_needs_the_network_and_linear_layers_only():
    with pytest.raises(ValueError, match="needs the network itself"):
        pe.make_optimizer("noisy-kfac", list(make_net().parameters()))
    conv = torch.nn.Sequential(torch.nn.Conv1d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(4, 1))
    with pytest.raises(ValueError, match=r"parameter '0\.weight' belongs to another kind of layer"):
        pe.make_optimizer("noisy-kfac", conv)
    with pytest.raises(ValueError, match="stats_interval must be an integer >= 1"):
        pe.make_optimizer("noisy-kfac", make_net(), stats_interval=0)

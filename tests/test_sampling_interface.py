"""The interface every strategy shares: sampling, restoring μ, step(), state round trips."""

from __future__ import annotations

import copy

import pytest
import torch

import param_explore as pe

pytestmark = pytest.mark.trains  # .ci/run runs these again under another kernel set

ALL = pe.available_optimizers()
EXPLORING = [n for n in ALL if pe.optimizer_class(n).explores]


def make_net(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))


def train_steps(net, opt, gen, steps):
    data = torch.randn(32, 5, generator=torch.Generator().manual_seed(7))
    for _ in range(steps):
        opt.zero_grad()
        opt.resample_noise(gen)
        with opt.training_params():
            net(data).pow(2).sum().backward()
        opt.step()


def warmed_up(name: str, steps: int = 5):
    net = make_net()
    opt = pe.make_optimizer(name, net, lr=1e-2)
    train_steps(net, opt, torch.Generator().manual_seed(3), steps)
    return net, opt


@pytest.mark.parametrize("name", EXPLORING)
def test_sampled_noise_has_the_claimed_std(name):
    """(θ − μ)/σ over 120 000 weights with heterogeneous σ is standard normal within 2 %."""
    layer = torch.nn.Linear(400, 300)
    # Small initial precisions so that the gradients below make σ heterogeneous.
    overrides = {
        "vadam": {"sample_constant": 1.0},
        "vadagrad": {"initial_precision": 1.0},
        "noisy-adam": {"initial_precision": 1.0},
    }
    opt = pe.make_optimizer(name, layer, lr=1e-2, **overrides.get(name, {}))
    gen = torch.Generator().manual_seed(0)
    # A few steps with gradients of very different scale make σ differ between weights.
    for _ in range(3):
        layer.weight.grad = torch.randn(300, 400, generator=gen) * torch.logspace(-2, 2, 400)
        layer.bias.grad = torch.randn(300, generator=gen)
        opt.step()
    sigma = opt.sampling_std()[0]
    if name in overrides:
        assert sigma.max() / sigma.min() > 10
    opt.resample_noise(gen)
    mean = layer.weight.detach().clone()
    with opt.sampled_params():
        theta = layer.weight.detach().clone()
    deviation = theta - mean
    standardized = deviation / sigma
    assert standardized.numel() >= 100_000
    assert abs(standardized.std().item() - 1.0) < 0.02
    assert abs(standardized.mean().item()) < 0.02
    # The functional path draws nothing new: the very same θ.
    assert torch.equal(opt.sample()[0].detach(), theta)


@pytest.mark.parametrize("name", ["sgd-plain", "adam-plain"])
def test_plain_strategies_never_perturb(name):
    net = make_net()
    opt = pe.make_optimizer(name, net)
    before = [p.detach().clone() for p in net.parameters()]
    state = torch.get_rng_state()
    opt.resample_noise()
    assert torch.equal(torch.get_rng_state(), state)  # no random numbers consumed
    with opt.sampled_params():
        assert all(torch.equal(p, b) for p, b in zip(net.parameters(), before))
    assert all(p is q for p, q in zip(opt.sample(), net.parameters()))
    assert all(torch.count_nonzero(s) == 0 for s in opt.sampling_std())


@pytest.mark.parametrize("name", EXPLORING)
def test_mean_restored_exactly_even_on_exception(name):
    net, opt = warmed_up(name)
    before = [p.detach().clone() for p in net.parameters()]
    opt.resample_noise()
    with pytest.raises(RuntimeError, match="boom"), opt.sampled_params():
        assert not all(torch.equal(p, b) for p, b in zip(net.parameters(), before))
        raise RuntimeError("boom")
    assert all(torch.equal(p, b) for p, b in zip(net.parameters(), before))


@pytest.mark.parametrize("name", ["vadam", "noisy-kfac"])
def test_nested_sampled_params_restore_each_level(name):
    net, opt = warmed_up(name)
    before = [p.detach().clone() for p in net.parameters()]
    opt.resample_noise()
    with opt.sampled_params():
        theta = [p.detach().clone() for p in net.parameters()]
        for _ in range(2):  # the second inner call must not take the outer's buffers
            with opt.sampled_params():  # θ + σε inside; θ again after
                assert not torch.equal(next(net.parameters()), theta[0])
            assert all(torch.equal(p, t) for p, t in zip(net.parameters(), theta))
    assert all(torch.equal(p, b) for p, b in zip(net.parameters(), before))
    with opt.sampled_params():  # the kept buffers are free again
        pass
    assert all(torch.equal(p, b) for p, b in zip(net.parameters(), before))


@pytest.mark.parametrize("name", EXPLORING)
def test_same_theta_until_resampled(name):
    """docs/decisions.md#sample-per-step: acting and the gradient step share one θ_t."""
    net, opt = warmed_up(name)
    opt.resample_noise()
    first = [t.detach().clone() for t in opt.sample()]
    with opt.sampled_params():
        inside = [p.detach().clone() for p in net.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(first, inside))
    opt.resample_noise()
    assert not torch.equal(opt.sample()[0], first[0])


@pytest.mark.parametrize("name", [n for n in EXPLORING if pe.optimizer_class(n).gradient_at_sample])
def test_gradient_lands_on_mean_as_gradient_at_sample(name):
    """p.grad equals ∇θF evaluated at θ, computed independently on a detached copy.
    (Parameter noise acts with a copy fixed per episode and is trained at μ.)"""
    net, opt = warmed_up(name)
    x = torch.randn(8, 5)
    opt.resample_noise()
    opt.zero_grad()
    thetas = opt.sample()
    torch.func.functional_call(
        net, dict(zip([n for n, _ in net.named_parameters()], thetas)), (x,)
    ).pow(2).sum().backward()
    clone = copy.deepcopy(net)
    with torch.no_grad():
        for q, th in zip(clone.parameters(), thetas):
            q.copy_(th)
    clone(x).pow(2).sum().backward()
    for p, q in zip(net.parameters(), clone.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


@pytest.mark.parametrize("name", ALL)
def test_step_without_closure_and_with_closure(name):
    net = make_net()
    opt = pe.make_optimizer(name, net, lr=1e-2)
    x = torch.randn(4, 5)
    before = [p.detach().clone() for p in net.parameters()]
    net(x).sum().backward()
    assert opt.step() is None
    assert not torch.equal(before[0], net[0].weight)

    def closure():
        opt.zero_grad()
        loss = net(x).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert isinstance(loss, torch.Tensor)


@pytest.mark.parametrize("name", ALL)
def test_state_dict_round_trip_continues_bit_identically(name):
    net, opt = warmed_up(name, steps=3)
    gen = torch.Generator().manual_seed(11)
    saved_net = copy.deepcopy(net.state_dict())
    saved_opt = copy.deepcopy(opt.state_dict())
    saved_gen = gen.get_state()

    train_steps(net, opt, gen, 4)
    expected_params = [p.detach().clone() for p in net.parameters()]
    expected_std = opt.sampling_std()

    fresh = make_net(seed=99)
    fresh.load_state_dict(saved_net)
    fresh_opt = pe.make_optimizer(name, fresh, lr=1e-2)
    fresh_opt.load_state_dict(saved_opt)
    gen.set_state(saved_gen)
    train_steps(fresh, fresh_opt, gen, 4)

    assert all(torch.equal(a, b) for a, b in zip(fresh.parameters(), expected_params))
    assert all(torch.equal(a, b) for a, b in zip(fresh_opt.sampling_std(), expected_std))
    if name != "sgd-plain":  # torch's SGD without momentum keeps no state at all
        states = fresh_opt.state_dict()["state"].values()
        steps = {float(s["step"]) for s in states if "step" in s}  # K-FAC: one per layer
        assert steps == {7.0}


@pytest.mark.parametrize("name", EXPLORING)
def test_reloaded_optimizer_reuses_the_saved_noise(name):
    net, opt = warmed_up(name)
    opt.resample_noise()
    theta = [t.detach().clone() for t in opt.sample()]
    fresh = make_net()
    fresh.load_state_dict(net.state_dict())
    fresh_opt = pe.make_optimizer(name, fresh, lr=1e-2)
    fresh_opt.load_state_dict(opt.state_dict())
    assert all(torch.equal(a, b.detach()) for a, b in zip(theta, fresh_opt.sample()))


def test_explore_precision_is_clamped_positive():
    p = torch.nn.Parameter(torch.zeros(4))
    opt = pe.SGDExplore([p], precision_lr=1e6, initial_precision=4.0, min_precision=2.0)
    opt.resample_noise()
    # A gradient of the opposite sign to ε pushes the precision down (∇p = −g ε / 2p^{3/2}).
    noise = opt.state[p]["noise"]
    p.grad = -torch.sign(noise) * 100.0
    opt.step()
    torch.testing.assert_close(opt.sampling_std()[0], torch.full((4,), 2.0**-0.5))

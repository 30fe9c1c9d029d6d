"""The compiled update (``compile=True``) against the eager one, on a real environment.

Every strategy with a traced form is compiled by TorchInductor for real (a few seconds
each) and must give the eager agent's weights, targets, optimizer state and losses up to
float rounding after a run of updates. The traced update rules themselves are checked
against NumPy references in ``test_update_rules.py``.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch._inductor.config as inductor_config

from agents import DDPG
from agents.common.strategies import available_strategies, resolve_strategy
from agents.ddpg.compile_cache import KERNEL_ENV, kernel_cache_dir, kernel_key, kernel_set
from agents.ddpg.compiled_update import CompiledUpdate

SMALL = dict(hidden_sizes=[32, 24], learning_starts=64, batch_size=16)
STEPS = 100  # 36 updates after learning_starts


def strategy_optimizer(name: str) -> str:
    return resolve_strategy(name).optimizer


TRACED = [s for s in available_strategies() if strategy_optimizer(s) != "noisy-kfac"]
#: The strategies TorchInductor builds in the default suite: other tests here compile the
#: same graphs, so after the first build each is a cache hit. Every strategy's trace is
#: checked op by op by default (``test_traced_update_equals_eager``, ~5 s each), and built
#: by Inductor under ``-m slow`` (a cold build takes ~20 s per strategy).
INDUCTOR = ("vadam", "adam-plain", "adam-explore")
#: One strategy per other actor optimizer (gaussian-action and ou-action train adam-plain's
#: graph; their noise acts outside it).
TRACED_ONLY = list({strategy_optimizer(s): s for s in reversed(TRACED)
                    if strategy_optimizer(s) not in INDUCTOR}.values())  # fmt: skip

pytestmark = pytest.mark.trains  # .ci/run runs these again under another kernel set


#: Settings a strategy's preset holds beyond its optimizer's (the Python API takes the
#: optimizer's defaults only): IVON's step is sized for the minibatch's mean loss.
PRESET = {"ivon": dict(actor_grad_reduction="mean")}


def pair(optimizer: str, seed: int = 0, **overrides) -> tuple[DDPG, DDPG]:
    """An eager and a compiled agent, identical otherwise."""
    overrides = {**PRESET.get(optimizer, {}), **overrides}
    return tuple(
        DDPG(
            "Pendulum-v1",
            seed=seed,
            device="cpu",
            strategy=optimizer,
            compile=c,
            **SMALL,
            **overrides,
        )
        for c in (False, True)
    )


def tensors(agent: DDPG) -> dict[str, torch.Tensor]:
    """Everything an update changes, by name."""
    named = {}
    for module in ("actor", "critic", "target_actor", "target_critic"):
        for name, p in getattr(agent, module).named_parameters():
            named[f"{module}.{name}"] = p.detach()
    for opt in ("actor_optimizer", "critic_optimizer"):
        for i, state in getattr(agent, opt).state_dict()["state"].items():
            for key, value in state.items():
                named[f"{opt}.{i}.{key}"] = value
    return named


def assert_agents_close(a: DDPG, b: DDPG) -> None:
    ta, tb = tensors(a), tensors(b)
    assert ta.keys() == tb.keys()
    for name in ta:
        scale = ta[name].abs().max().clamp_min(1e-6)
        torch.testing.assert_close(ta[name] / scale, tb[name] / scale, rtol=0, atol=2e-5, msg=name)


def run_traced_graph(graph: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> object:
    """The traced update itself, op by op: a backend without Inductor's code generation."""
    return graph


@pytest.fixture
def traced_only(monkeypatch):
    monkeypatch.setattr(CompiledUpdate, "backend", run_traced_graph)


@pytest.mark.parametrize(
    "strategy",
    [s if s in INDUCTOR else pytest.param(s, marks=pytest.mark.slow) for s in TRACED],
)
def test_compiled_update_equals_eager(strategy):
    check_equals_eager(strategy)


@pytest.mark.parametrize("strategy", TRACED_ONLY)
def test_traced_update_equals_eager(strategy, traced_only):
    """What the project writes — the trace of ``ddpg_update``, its functionalisation, the
    state written back in place, the per-step numbers as inputs — for every strategy."""
    check_equals_eager(strategy)


def check_equals_eager(strategy: str) -> None:
    eager, compiled = pair(strategy)
    eager.learn(STEPS)
    compiled.learn(STEPS)
    assert compiled.compiled and not eager.compiled
    assert compiled.num_updates == eager.num_updates == STEPS - SMALL["learning_starts"]
    assert_agents_close(eager, compiled)
    losses_eager, losses_compiled = eager.pop_losses(), compiled.pop_losses()
    for key in ("critic", "actor"):
        assert losses_compiled[key] == pytest.approx(losses_eager[key], rel=1e-4)
    # The run must have moved the weights, or the comparison proves nothing.
    fresh = DDPG("Pendulum-v1", seed=0, device="cpu", strategy=strategy, **SMALL)
    assert not torch.allclose(fresh.actor.net[0].weight, compiled.actor.net[0].weight)


@pytest.mark.parametrize(
    "strategy, backend",
    [("vadam", "inductor"), ("param-noise", "traced"),
     pytest.param("param-noise", "inductor", marks=pytest.mark.slow)],
)  # fmt: skip
def test_layer_normalised_actor_compiles_with_its_norms_unperturbed(strategy, backend, monkeypatch):
    """Two parameter groups (the norms never perturbed) still make one traced step."""
    if backend == "traced":
        monkeypatch.setattr(CompiledUpdate, "backend", run_traced_graph)
    eager, compiled = pair(strategy, layer_norm=True)
    eager.learn(STEPS)
    compiled.learn(STEPS)
    assert compiled.compiled
    assert_agents_close(eager, compiled)
    norm = compiled.actor.norms[0].weight
    assert not torch.equal(norm, torch.ones_like(norm))  # the norms were trained


def test_mean_actor_gradient_and_explicit_settings_are_compiled_too(traced_only):
    """``actor_grad_reduction``, γ, τ and optimizer overrides reach the graph (its trace)."""
    settings = dict(actor_grad_reduction="mean", gamma=0.9, tau=0.05, optimizer_kwargs={"lr": 3e-3})
    eager, compiled = pair("vadam", **settings)
    eager.learn(STEPS)
    compiled.learn(STEPS)
    assert compiled.compiled
    assert_agents_close(eager, compiled)


#: Plappert et al.'s DDPG (``configs/sparse-study.yaml``), at a test's scale: 5 updates
#: every 10 steps.
PLAPPERT = dict(normalize_observations=True, critic_layer_norm=True, critic_l2_reg=1e-2,
                train_every=10, gradient_steps=5)  # fmt: skip


@pytest.mark.parametrize(
    "strategy, backend",
    [("adam-plain", "inductor"), ("param-noise", "traced"), ("vadam", "traced")],
)
def test_plappert_protocol_settings_are_compiled_too(strategy, backend, monkeypatch):
    """The observation statistics (inputs of the graph, updated between its calls), the
    critic's LayerNorm and L2 penalty, and the schedule: eager and compiled agree."""
    if backend == "traced":
        monkeypatch.setattr(CompiledUpdate, "backend", run_traced_graph)
    eager, compiled = pair(strategy, **PLAPPERT)
    eager.learn(STEPS)
    compiled.learn(STEPS)
    assert compiled.compiled and compiled.num_updates == eager.num_updates == 4 * 5
    assert_agents_close(eager, compiled)
    losses_eager, losses_compiled = eager.pop_losses(), compiled.pop_losses()
    for key in ("critic", "actor"):
        assert losses_compiled[key] == pytest.approx(losses_eager[key], rel=1e-4)
    # The statistics follow the observations, which follow the actions: equal to float
    # rounding (the two graphs' actor outputs may differ in the last bit on some kernels).
    torch.testing.assert_close(compiled.obs_statistics.std, eager.obs_statistics.std)
    assert not torch.equal(compiled.obs_statistics.std, torch.ones(3))
    norm = compiled.critic.norms[1].weight
    assert not torch.equal(norm, torch.ones_like(norm))  # the critic's norms were trained


def test_learning_rate_changed_during_training_takes_effect():
    """Per-step numbers are inputs of the graph, not constants baked into it."""
    eager, compiled = pair("adam-plain")
    for agent in (eager, compiled):
        agent.learn(80)
        for group in agent.actor_optimizer.param_groups:
            group["lr"] = 1e-2
        agent.learn(20)
    assert compiled.compiled
    assert_agents_close(eager, compiled)


def test_checkpoint_continues_compiled_training_exactly(tmp_path):
    """A compiled agent reloaded from a checkpoint rebinds its graph to the new state."""
    reference = DDPG("Pendulum-v1", seed=0, device="cpu", strategy="vadam", compile=True, **SMALL)
    reference.learn(80)
    reference.save(tmp_path / "a.pt", include_buffer=True)
    resumed = DDPG("Pendulum-v1", seed=0, device="cpu", strategy="vadam", compile=True, **SMALL)
    resumed.learn(70)  # compiles, then loading replaces the optimizers' state tensors
    resumed.load_checkpoint(tmp_path / "a.pt")
    # Step 80 is mid-episode, where a loaded agent starts a new episode: compare the
    # updates alone, on the same noise and minibatches.
    for agent in (reference, resumed):
        agent.actor_optimizer.resample_noise(agent.generator)
        for _ in range(10):
            agent.train_step()
    for name, value in tensors(reference).items():
        assert torch.equal(value, tensors(resumed)[name]), name


def test_noisy_kfac_trains_eagerly_with_a_warning():
    agent = DDPG("Pendulum-v1", seed=0, device="cpu", strategy="noisy-kfac", compile=True, **SMALL)
    with pytest.warns(UserWarning, match="NoisyKFAC has no traced form; training eagerly"):
        agent.learn(STEPS)
    assert not agent.compiled and agent.num_updates == STEPS - SMALL["learning_starts"]


def test_failed_compilation_falls_back_to_eager_without_losing_a_step():
    """No C++ compiler: the run warns and continues eagerly, exactly as an eager run."""
    eager, compiled = pair("vadam")
    eager.learn(STEPS)
    no_compiler = {"cpp.cxx": ("no-such-compiler-here",), "fx_graph_cache": False}
    warns = pytest.warns(UserWarning, match="compile failed, training eagerly")
    with inductor_config.patch(no_compiler), warns:
        compiled.learn(STEPS)
    assert not compiled.compiled
    for name, value in tensors(eager).items():
        assert torch.equal(value, tensors(compiled)[name]), name


@pytest.mark.parametrize("strategy", ["vadam", "adam-explore"])
def test_compiled_update_continues_an_eager_run(strategy):
    """Eager state (late in a run: bias corrections near 1) loaded into a compiled agent:
    the next updates equal the eager agent's — the modes share one state layout."""
    eager, compiled = pair(strategy)
    eager.learn(400)
    compiled.learn(70)  # compiles
    # A copy: torch's Optimizer.load_state_dict keeps the given state tensors themselves.
    compiled.load_state_dict(copy.deepcopy(eager.state_dict(include_buffer=True)))
    for agent in (eager, compiled):
        for _ in range(5):
            agent.train_step()
    assert compiled.compiled
    assert_agents_close(eager, compiled)


def graph_cache_counts() -> tuple[int, int]:
    """Inductor's FX graph cache hits and misses so far, read afresh each time: measured,
    the counter dictionary held from before a first compile in a fresh
    ``TORCHINDUCTOR_CACHE_DIR`` stayed at (0, 0) while that compile and the next counted."""
    counters = torch._dynamo.utils.counters["inductor"]
    return counters["fxgraph_cache_hit"], counters["fxgraph_cache_miss"]


def test_the_same_update_compiled_again_comes_from_inductors_cache():
    """Another agent with the same networks and strategy (a resumed run, the next seed of a
    grid) loads its compiled update from TorchInductor's FX graph cache, not building it
    again, and trains as the eager agent does."""
    DDPG("Pendulum-v1", seed=0, device="cpu", strategy="vadam", compile=True, **SMALL).learn(70)
    hits, misses = graph_cache_counts()
    eager, compiled = pair("vadam", seed=1)
    eager.learn(STEPS)
    compiled.learn(STEPS)
    assert compiled.compiled
    assert graph_cache_counts() == (hits + 1, misses)
    assert_agents_close(eager, compiled)


#: A fresh process: a compiled (and, with ``eager``, an eager) vadam agent on networks no
#: other test compiles; prints what the compiled update did and how far it is from eager.
FRESH_PROCESS = """
import json, sys, torch
from agents import DDPG
small = dict(hidden_sizes=[8, 8], learning_starts=16, batch_size=8)
modes = (False, True) if sys.argv[1] == "eager" else (True,)
agents = [DDPG("Pendulum-v1", seed=0, device="cpu", strategy="vadam", compile=c, **small)
          for c in modes]
for agent in agents:
    agent.learn(40)
compiled = agents[-1]
counters = torch._dynamo.utils.counters["inductor"]
error = 0.0
for p, q in zip(agents[0].state_dict()["actor"].values(), compiled.state_dict()["actor"].values()):
    error = max(error, float(((p - q).abs().max() / p.abs().max().clamp_min(1e-6))))
print(json.dumps(dict(
    capability=torch.backends.cpu.get_cpu_capability(), compiled=compiled.compiled,
    hits=counters["fxgraph_cache_hit"], misses=counters["fxgraph_cache_miss"],
    skipped=compiled.skipped_updates, error=error)))
"""


def in_fresh_process(mode: str, **env: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, mode], capture_output=True, text=True,
        timeout=600, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), **env},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.slow  # two cold builds in fresh processes, ~70 s: .ci/run's kernels pass runs it
@pytest.mark.kernels
def test_an_update_cached_under_other_kernels_is_compiled_again_not_loaded(tmp_path):
    """One cache directory, two fresh processes: this process's kernels, then another ATen
    capability. The second must not load the first one's graph (its C++ was generated for
    other instructions: under ``default`` it no longer builds, under a narrower ISA than
    it was written for it computes garbage) but compile its own, equal to eager."""
    own = torch.backends.cpu.get_cpu_capability()
    other = "avx2" if own == "DEFAULT" else "default"
    cache = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    first = in_fresh_process("compiled", **cache)
    second = in_fresh_process("eager", **cache, ATEN_CPU_CAPABILITY=other)
    if second["capability"] == first["capability"]:
        pytest.skip(f"this CPU has no capability besides {own}")
    for run in (first, second):
        assert run["compiled"] and (run["hits"], run["misses"]) == (0, 1), run
        assert run["skipped"] == 0, run
    assert second["error"] < 2e-5, second
    keyed = sorted((tmp_path / "cache").glob("kernels-*/kernels.json"))
    capabilities = {json.loads(path.read_text())["aten_capability"] for path in keyed}
    assert capabilities == {first["capability"], second["capability"]}


def test_the_cache_key_covers_every_kernel_variable(monkeypatch, tmp_path):
    """Each variable that changes the kernels' instructions changes the key; the directory
    is the user's cache directory's ``kernels-<key>``, only while compiling."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    for name in KERNEL_ENV:
        monkeypatch.delenv(name, raising=False)
    keys = {kernel_key()}
    for name in KERNEL_ENV:
        monkeypatch.setenv(name, "default" if name == "ATEN_CPU_CAPABILITY" else "SSE4_2")
        keys.add(kernel_key())
        monkeypatch.delenv(name)
    assert len(keys) == 1 + len(KERNEL_ENV)
    with kernel_cache_dir() as directory:
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(directory)
        assert directory == tmp_path / f"kernels-{kernel_key()}"
        assert json.loads((directory / "kernels.json").read_text()) == kernel_set()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path)


def test_numbers_computed_once_are_the_numbers_to_the_bit():
    """The reduction that keeps the update's numbers in a buffer of their own
    (``_computed_once``: Inductor would recompute them in every parameter's loop) gives back
    every float32 number to the bit — signed zeros, subnormals, the largest, infinities —
    alone, per member under ``vmap``, and for a population's (members, numbers) rows."""
    from torch.func import vmap

    from agents.ddpg.compiled_update import _computed_once

    info = torch.finfo(torch.float32)
    numbers = torch.tensor(
        [0.0, -0.0, info.tiny / 8, -info.tiny, info.max, -info.max, float("inf"), 1 - 0.9**7],
        dtype=torch.float32,
    )
    rows = torch.stack(
        [numbers, numbers.flip(0), torch.randn(8, generator=torch.Generator().manual_seed(0))]
    )
    bits = lambda x: x.view(torch.int32)  # noqa: E731
    assert torch.equal(bits(_computed_once(numbers)), bits(numbers))
    assert torch.equal(bits(vmap(_computed_once)(rows)), bits(rows))
    assert torch.equal(bits(_computed_once(rows)), bits(rows))

"""``Sampler``: categorical (discrete / multi-discrete) and Ornstein-Uhlenbeck sampling.

Every behavioural test runs on each executor (``backend_name``). Statistical
tests use fixed seeds, so they are deterministic; their bounds (5 standard
deviations, chi-square p > 1e-6) would make a correct sampler fail them with a
negligible probability for any seed.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from warp_drive.runtime.backends import get_backend
from warp_drive.runtime.data_feed import DataFeed
from warp_drive.runtime.data_manager import DataManager
from warp_drive.runtime.function_manager import FunctionManager
from warp_drive.services.reset import EnvironmentReset
from warp_drive.services.sampler import OU_STATE_SUFFIX, Sampler

P_MIN = 1e-6  # chi-square p-value threshold


# --------------------------------------------------------------------------- helpers


def chi2_sf(statistic: float, dof: int) -> float:
    """Survival function of the chi-square distribution (regularized upper gamma)."""
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                         torch.tensor(statistic / 2, dtype=torch.float64)))


def setup(backend_name, num_envs, num_agents, arrays: dict, seed=0, episode_length=10):
    """A DataManager holding ``arrays`` (numpy), a FunctionManager and a Sampler."""
    dm = DataManager(num_envs, num_agents, episode_length, backend=backend_name)
    feed = DataFeed()
    for name, value in arrays.items():
        feed.add_data(name, value)
    dm.push_data_to_device(feed)
    fm = FunctionManager(num_envs, num_agents, backend=backend_name)
    return dm, fm, Sampler(fm, seed=seed)


def to_device(dm, array) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(dm.device)


def draw(dm, sampler, probs, name, steps, **kwargs) -> np.ndarray:
    """``steps`` calls of ``sampler.sample``: the action array after each, stacked."""
    actions = dm.data_on_device_via_torch(name)
    out = torch.empty((steps, *actions.shape), dtype=actions.dtype, device=actions.device)
    for t in range(steps):
        sampler.sample(dm, probs, name, **kwargs)
        out[t].copy_(actions)
    return out.cpu().numpy()


def random_distributions(rng, rows: int, num_actions: int, zeros_per_row: int = 1) -> np.ndarray:
    """One distinct distribution per row, each with ``zeros_per_row`` zero-probability actions."""
    probs = rng.dirichlet(np.ones(num_actions), size=rows)
    for r in range(rows):
        probs[r, [(r + k) % num_actions for k in range(zeros_per_row)]] = 0.0
    probs /= probs.sum(axis=1, keepdims=True)
    return probs.astype(np.float32)


def check_frequencies(samples: np.ndarray, probs: np.ndarray, what: str) -> None:
    """samples (T, rows) of actions, probs (rows, A): zero cells never drawn,
    every cell within 5 binomial sd, joint chi-square p > P_MIN."""
    n, rows = samples.shape
    num_actions = probs.shape[1]
    p = probs.astype(np.float64) / probs.astype(np.float64).sum(axis=1, keepdims=True)
    statistic, dof = 0.0, 0
    for r in range(rows):
        counts = np.bincount(samples[:, r], minlength=num_actions)
        assert counts.size == num_actions, f"{what} row {r}: action out of range {samples[:, r].max()}"
        zero = p[r] == 0
        assert not counts[zero].any(), f"{what} row {r}: zero-probability actions drawn: {counts} for {p[r]}"
        expected = n * p[r]
        sd = np.sqrt(n * p[r] * (1 - p[r]))
        assert np.all(np.abs(counts - expected) <= 5 * sd + 1e-9), (
            f"{what} row {r}: counts {counts}, expected {np.round(expected, 1)}"
        )
        statistic += float(np.sum((counts[~zero] - expected[~zero]) ** 2 / expected[~zero]))
        dof += int((~zero).sum()) - 1
    p_value = chi2_sf(statistic, dof)
    assert p_value > P_MIN, f"{what}: chi-square {statistic:.1f} on {dof} dof, p = {p_value:.2e}"


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float64) - a.mean()
    b = b.astype(np.float64) - b.mean()
    return float((a * b).sum() / math.sqrt((a * a).sum() * (b * b).sum()))


@pytest.fixture
def cpu_workers(request):
    """The shared cpu backend; its pool size is restored afterwards."""
    backend = get_backend("cpu")
    previous = backend.num_workers
    request.addfinalizer(lambda: backend.set_num_workers(previous))
    return backend


# --------------------------------------------------------------------------- categorical


def test_categorical_frequencies_match_probabilities(backend_name):
    E, N, A, T = 4, 3, 5, 10_000
    rng = np.random.default_rng(1)
    probs = random_distributions(rng, E * N, A, zeros_per_row=1)
    probs[5] = np.float32([0.0, 0.0, 0.001, 0.499, 0.5])  # two zeros and a rare action
    dm, _, sampler = setup(backend_name, E, N, {"actions": np.zeros((E, N), np.int32)}, seed=11)
    sampler.register_actions(dm, "actions", A)
    samples = draw(dm, sampler, to_device(dm, probs.reshape(E, N, A)), "actions", T)
    assert samples.dtype == np.int32 and samples.min() >= 0 and samples.max() < A
    check_frequencies(samples.reshape(T, E * N), probs, "categorical")
    # The rare action does show up (expected 10 times): small probabilities are not lost.
    assert np.count_nonzero(samples.reshape(T, -1)[:, 5] == 2) > 0


def test_categorical_unnormalised_weights_and_zero_rows(backend_name):
    """Weights need not sum to one; a row of zeros takes the argmax rule (action 0)."""
    E, N, A, T = 2, 2, 3, 6000
    weights = np.float32([[[2.0, 0.0, 6.0], [1.0, 1.0, 2.0]], [[0.0, 0.0, 0.0], [0.0, 5.0, 0.0]]])
    dm, _, sampler = setup(backend_name, E, N, {"a": np.zeros((E, N), np.int32)}, seed=3)
    sampler.register_actions(dm, "a", A)
    samples = draw(dm, sampler, to_device(dm, weights), "a", T).reshape(T, E * N)
    check_frequencies(samples[:, :2], weights.reshape(E * N, A)[:2], "unnormalised")
    assert np.all(samples[:, 2] == 0) and np.all(samples[:, 3] == 1)


def test_categorical_draws_are_the_inverse_cdf_of_philox_uniforms(backend_name):
    """The draw of row r at call c is the inverse CDF at the Philox uniform of
    (seed, counter=c, stream=r, domain of the head): check it against
    ``wd_rng_probe`` and a float32 running sum on the host."""
    E, N, A, T = 8, 5, 6, 4
    rng = np.random.default_rng(2)
    probs = random_distributions(rng, E * N, A, zeros_per_row=2)
    seed = 987654321
    dm, fm, sampler = setup(backend_name, E, N, {"a": np.zeros((E, N), np.int32)}, seed=seed)
    sampler.register_actions(dm, "a", A)
    domain = sampler._discrete["a"][0].domain  # the head's Philox domain
    samples = draw(dm, sampler, to_device(dm, probs.reshape(E, N, A)), "a", T).reshape(T, E * N)
    for t in range(T):
        out = torch.zeros((E * N, 3), dtype=torch.float32, device=dm.device)
        fm.launch_flat("wd_rng_probe", [out, E * N, seed, t, domain], E * N)
        u = out[:, 0].cpu().numpy()
        for r in range(E * N):
            total = np.float32(0)
            for p in probs[r]:
                if p > 0:
                    total = np.float32(total + p)
            target = np.float32(u[r] * total)
            running, chosen = np.float32(0), None
            for i, p in enumerate(probs[r]):
                if p > 0:
                    running = np.float32(running + p)
                    if running >= target:
                        chosen = i
                        break
            assert samples[t, r] == chosen, (t, r)


def test_categorical_streams_are_independent(backend_name):
    """Uniform probabilities: agents, envs, steps and action names are uncorrelated."""
    E, N, A, T = 4, 3, 4, 10_000
    arrays = {"a": np.zeros((E, N), np.int32), "b": np.zeros((E, N), np.int32)}
    dm, _, sampler = setup(backend_name, E, N, arrays, seed=5)
    sampler.register_actions(dm, "a", A)
    sampler.register_actions(dm, "b", A)
    uniform = to_device(dm, np.full((E, N, A), 1.0 / A))
    a_steps, b_steps = [], []
    a, b = dm.data_on_device_via_torch("a"), dm.data_on_device_via_torch("b")
    for _ in range(T):
        sampler.sample(dm, uniform, "a")
        a_steps.append(a.clone())
        sampler.sample(dm, uniform, "b")
        b_steps.append(b.clone())
    sa = torch.stack(a_steps).cpu().numpy().reshape(T, E * N)
    sb = torch.stack(b_steps).cpu().numpy().reshape(T, E * N)
    bound = 5 / math.sqrt(T)
    check_frequencies(sa, np.full((E * N, A), 1.0 / A), "uniform a")
    check_frequencies(sb, np.full((E * N, A), 1.0 / A), "uniform b")
    rows = E * N
    for i in range(rows):
        for j in range(i + 1, rows):  # two agents of one env, or two envs
            assert abs(correlation(sa[:, i], sa[:, j])) < bound, (i, j)
        assert abs(correlation(sa[:, i], sb[:, i])) < bound, f"row {i}: actions 'a' and 'b' correlated"
        assert not np.array_equal(sa[:, i], sb[:, i])
        for lag in (1, 2, 3):  # consecutive steps of one agent
            assert abs(correlation(sa[lag:, i], sa[:-lag, i])) < 5 / math.sqrt(T - lag), (i, lag)
    # Joint distribution of (agent 0, agent 1 of env 0), (env 0, env 1 for agent 0),
    # and (step t, step t+1 of one agent) is the product of the marginals.
    for x, y, what in ((sa[:, 0], sa[:, 1], "agents"), (sa[:, 0], sa[:, N], "envs"),
                       (sa[1:, 0], sa[:-1, 0], "steps"), (sa[:, 0], sb[:, 0], "names")):
        joint = np.bincount(x * A + y, minlength=A * A)
        expected = x.size / (A * A)
        statistic = float(np.sum((joint - expected) ** 2 / expected))
        assert chi2_sf(statistic, A * A - 1) > P_MIN, what


def _reproducible_run(backend_name, seed, steps=4):
    E, N, A = 64, 16, 6  # 1024 rows: several blocks of the flat launch
    probs = random_distributions(np.random.default_rng(8), E * N, A, zeros_per_row=1)
    dm, _, sampler = setup(backend_name, E, N, {"a": np.zeros((E, N), np.int32)}, seed=seed)
    sampler.register_actions(dm, "a", A)
    return draw(dm, sampler, to_device(dm, probs.reshape(E, N, A)), "a", steps), probs


def test_same_seed_same_actions_different_seed_different(backend_name):
    first, probs = _reproducible_run(backend_name, seed=123)
    second, _ = _reproducible_run(backend_name, seed=123)
    np.testing.assert_array_equal(first, second)
    other, _ = _reproducible_run(backend_name, seed=124)
    agree = np.mean(first == other)
    expected_agreement = float(np.mean(np.sum(probs.astype(np.float64) ** 2, axis=1)))
    assert abs(agree - expected_agreement) < 0.05, (agree, expected_agreement)
    # And the steps of one run differ from each other.
    assert np.mean(first[0] == first[1]) < expected_agreement + 0.05


def test_same_actions_with_one_or_two_worker_threads(cpu_workers):
    cpu_workers.set_num_workers(1)
    one, _ = _reproducible_run("cpu", seed=77)
    cpu_workers.set_num_workers(2)
    two, _ = _reproducible_run("cpu", seed=77)
    np.testing.assert_array_equal(one, two)


def test_argmax_takes_the_first_maximum(backend_name):
    probs = np.float32([
        [[0.1, 0.4, 0.4, 0.1], [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.5, 0.5]],
        [[0.3, 0.2, 0.1, 0.4], [0.7, 0.1, 0.1, 0.1], [0.0, 0.0, 0.0, 1.0]],
    ])
    dm, _, sampler = setup(backend_name, 2, 3, {"a": np.full((2, 3), -1, np.int32)}, seed=0)
    sampler.register_actions(dm, "a", 4)
    got = draw(dm, sampler, to_device(dm, probs), "a", 3, argmax=True)
    for t in range(3):
        np.testing.assert_array_equal(got[t], np.argmax(probs, axis=2))
        np.testing.assert_array_equal(got[t], [[1, 0, 2], [3, 0, 3]])


def test_multi_discrete_heads_use_their_own_distributions(backend_name):
    E, N, T = 3, 2, 6000
    sizes = (3, 5)
    rng = np.random.default_rng(4)
    p0 = random_distributions(rng, E * N, sizes[0], zeros_per_row=1)
    p1 = random_distributions(rng, E * N, sizes[1], zeros_per_row=2)
    dm, _, sampler = setup(backend_name, E, N, {"md": np.zeros((E, N, 2), np.int32)}, seed=21)
    sampler.register_actions(dm, "md", list(sizes))
    heads = [to_device(dm, p0.reshape(E, N, 3)), to_device(dm, p1.reshape(E, N, 5))]
    samples = draw(dm, sampler, heads, "md", T)
    assert samples.shape == (T, E, N, 2)
    h0 = samples[..., 0].reshape(T, E * N)
    h1 = samples[..., 1].reshape(T, E * N)
    check_frequencies(h0, p0, "head 0")
    check_frequencies(h1, p1, "head 1")
    for r in range(E * N):
        assert abs(correlation(h0[:, r], h1[:, r])) < 5 / math.sqrt(T), f"heads of row {r} correlated"
    # Deterministic heads: each head writes only its own slot.
    onehot0 = np.eye(3, dtype=np.float32)[np.arange(E * N) % 3].reshape(E, N, 3)
    onehot1 = np.eye(5, dtype=np.float32)[(np.arange(E * N) + 1) % 5].reshape(E, N, 5)
    got = draw(dm, sampler, [to_device(dm, onehot0), to_device(dm, onehot1)], "md", 2)
    for t in range(2):
        np.testing.assert_array_equal(got[t, ..., 0], (np.arange(E * N) % 3).reshape(E, N))
        np.testing.assert_array_equal(got[t, ..., 1], ((np.arange(E * N) + 1) % 5).reshape(E, N))


def test_state_dict_continues_the_same_stream(backend_name):
    E, N, A = 5, 4, 7
    probs = random_distributions(np.random.default_rng(6), E * N, A)
    arrays = {"a": np.zeros((E, N), np.int32), "md": np.zeros((E, N, 2), np.int32),
              "c": np.zeros((E, N, 3), np.float32)}

    def build(seed):
        dm, fm, sampler = setup(backend_name, E, N, arrays, seed=seed)
        sampler.register_actions(dm, "a", A)
        sampler.register_actions(dm, "md", [A, A])
        sampler.register_continuous_actions(dm, "c", -10.0, 10.0, damping=1.0, stddev=1.0)
        return dm, sampler

    def steps(dm, sampler, k):
        p = to_device(dm, probs.reshape(E, N, A))
        zero_mean = torch.zeros((E, N, 3), device=dm.device)
        return [np.concatenate([draw(dm, sampler, p, "a", 1).ravel(),
                                draw(dm, sampler, [p, p], "md", 1).ravel(),
                                draw(dm, sampler, zero_mean, "c", 1).ravel().view(np.int32)])
                for _ in range(k)]

    dm, sampler = build(seed=31)
    steps(dm, sampler, 3)
    state = sampler.state_dict()
    continued = steps(dm, sampler, 4)
    sampler.load_state_dict(state)
    np.testing.assert_array_equal(np.array(steps(dm, sampler, 4)), np.array(continued))
    # A fresh sampler with another seed continues identically from the checkpoint.
    dm2, sampler2 = build(seed=999)
    sampler2.load_state_dict(state)
    assert sampler2.state_dict() == state
    np.testing.assert_array_equal(np.array(steps(dm2, sampler2, 4)), np.array(continued))
    # ...and differs from what it would have drawn without it.
    dm3, sampler3 = build(seed=999)
    assert not np.array_equal(np.array(steps(dm3, sampler3, 4)), np.array(continued))


def test_init_random_restarts_every_stream(backend_name):
    E, N, A = 4, 3, 5
    probs = random_distributions(np.random.default_rng(12), E * N, A)
    arrays = {"a": np.zeros((E, N), np.int32), "c": np.zeros((E, N), np.float32)}
    dm, _, sampler = setup(backend_name, E, N, arrays, seed=40)
    sampler.register_actions(dm, "a", A)
    sampler.register_continuous_actions(dm, "c", -10.0, 10.0, damping=1.0, stddev=1.0)
    p, mean = to_device(dm, probs.reshape(E, N, A)), torch.zeros((E, N), device=dm.device)
    first_a, first_c = draw(dm, sampler, p, "a", 5), draw(dm, sampler, mean, "c", 5)
    sampler.init_random(41)
    other_a = draw(dm, sampler, p, "a", 5)
    assert sampler.seed == 41 and not np.array_equal(other_a, first_a)
    sampler.init_random(40)
    np.testing.assert_array_equal(draw(dm, sampler, p, "a", 5), first_a)
    np.testing.assert_array_equal(draw(dm, sampler, mean, "c", 5), first_c)


def test_per_policy_action_arrays_hold_a_subset_of_agents(backend_name):
    """An action array (E, N_policy) with N_policy != n_agents samples its own rows."""
    E, N, N_policy, A, T = 3, 5, 2, 3, 3000
    probs = random_distributions(np.random.default_rng(13), E * N_policy, A)
    dm, _, sampler = setup(backend_name, E, N, {"policy_actions": np.zeros((E, N_policy), np.int32)}, seed=6)
    sampler.register_actions(dm, "policy_actions", A)
    samples = draw(dm, sampler, to_device(dm, probs.reshape(E, N_policy, A)), "policy_actions", T)
    check_frequencies(samples.reshape(T, E * N_policy), probs, "per-policy")


# --------------------------------------------------------------------------- continuous (OU)


def _continuous(backend_name, E, N, D, seed, **register):
    shape = (E, N) if D is None else (E, N, D)
    dm, fm, sampler = setup(backend_name, E, N, {"c": np.zeros(shape, np.float32)}, seed=seed)
    sampler.register_continuous_actions(dm, "c", **register)
    return dm, fm, sampler


def _autocorrelation(x: np.ndarray, lag: int) -> float:
    """Pooled lag autocorrelation of x (T, elements) around zero mean."""
    x = x.astype(np.float64)
    return float((x[lag:] * x[:-lag]).mean() / (x * x).mean())


def test_ou_stationary_variance_and_autocorrelation(backend_name):
    E, N, D, T, burn = 16, 8, 2, 3000, 100
    damping, stddev = 0.3, 0.5
    phi = 1 - damping
    dm, _, sampler = _continuous(backend_name, E, N, D, seed=17, low=-1e6, high=1e6,
                                 damping=damping, stddev=stddev)
    mean = torch.zeros((E, N, D), device=dm.device)
    x = draw(dm, sampler, mean, "c", T + burn)[burn:].reshape(T, -1).astype(np.float64)
    np.testing.assert_array_equal(  # actions are the OU state when mean is 0 and bounds are wide
        x[-1], dm.pull_data_from_device("c" + OU_STATE_SUFFIX).ravel())
    stationary = stddev ** 2 / (1 - phi ** 2)
    n_eff = x.size * (1 - phi) / (1 + phi)
    assert abs(x.mean()) < 5 * math.sqrt(stationary / n_eff)
    assert abs(x.var() / stationary - 1) < 0.03, (x.var(), stationary)
    per_element = x.var(axis=0) / stationary
    assert np.all(np.abs(per_element - 1) < 0.25), (per_element.min(), per_element.max())
    for lag in (1, 2, 5):
        assert abs(_autocorrelation(x, lag) - phi ** lag) < 0.02, (lag, _autocorrelation(x, lag), phi ** lag)


def test_ou_recursion_is_exact_without_noise(backend_name):
    """stddev=0 for one call: the state decays by exactly (1 - damping) in float32."""
    E, N, D = 3, 4, 2
    dm, _, sampler = _continuous(backend_name, E, N, D, seed=2, low=-100.0, high=100.0, damping=0.25, stddev=1.0)
    mean = torch.zeros((E, N, D), device=dm.device)
    draw(dm, sampler, mean, "c", 3)
    state = dm.data_on_device_via_torch("c" + OU_STATE_SUFFIX)
    before = state.clone()
    assert torch.count_nonzero(before) == before.numel()
    sampler.sample(dm, mean, "c", stddev=0.0)
    one_minus_d = torch.tensor(1.0, dtype=torch.float32) - torch.tensor(0.25, dtype=torch.float32)
    assert torch.equal(state.cpu(), one_minus_d * before.cpu())
    assert torch.equal(dm.data_on_device_via_torch("c").cpu(), state.cpu())


def test_ou_damping_one_is_iid_gaussian(backend_name):
    E, N, D, T = 16, 8, 2, 500
    stddev = 0.7
    dm, _, sampler = _continuous(backend_name, E, N, D, seed=23, low=-1e6, high=1e6, damping=1.0, stddev=stddev)
    x = draw(dm, sampler, torch.zeros((E, N, D), device=dm.device), "c", T).reshape(T, -1).astype(np.float64)
    n = x.size
    assert abs(x.mean()) < 5 * stddev / math.sqrt(n)
    assert abs(x.var() / stddev ** 2 - 1) < 5 * math.sqrt(2 / n)
    for lag in (1, 2):
        assert abs(_autocorrelation(x, lag)) < 5 / math.sqrt(n)
    z = np.sort(x.ravel() / stddev)
    cdf = torch.special.ndtr(torch.from_numpy(z)).numpy()
    d = max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n))
    assert math.sqrt(n) * d < 2.7, f"Kolmogorov-Smirnov statistic {math.sqrt(n) * d:.2f}"
    # Elements are independent of each other too.
    cols = x.shape[1]
    for i, j in ((0, 1), (0, 2), (0, cols - 1), (5, 5 + D * N)):
        assert abs(correlation(x[:, i], x[:, j])) < 5 / math.sqrt(T)


def test_ou_clips_to_bounds_per_dimension(backend_name):
    E, N, D, T = 6, 5, 2, 40
    low, high = np.float32([-0.1, -2.0]), np.float32([0.2, 0.5])
    dm, _, sampler = _continuous(backend_name, E, N, D, seed=4, low=low, high=high, damping=0.5, stddev=1.0)
    mean = to_device(dm, np.random.default_rng(0).uniform(-1, 1, (E, N, D)))
    state = dm.data_on_device_via_torch("c" + OU_STATE_SUFFIX)
    actions = dm.data_on_device_via_torch("c")
    low_t, high_t = torch.from_numpy(low), torch.from_numpy(high)
    hit_low = hit_high = np.zeros(D, bool)
    for _ in range(T):
        sampler.sample(dm, mean, "c")
        a, s = actions.cpu(), state.cpu()
        assert torch.equal(a, torch.clamp(mean.cpu() + s, min=low_t, max=high_t))
        hit_low |= (a == low_t).reshape(-1, D).any(0).numpy()
        hit_high |= (a == high_t).reshape(-1, D).any(0).numpy()
        inside = (a > low_t) & (a < high_t)
        assert inside.any()
    assert hit_low.all() and hit_high.all()
    # Scalar bounds broadcast over every dimension; 2-D (E, N) actions work too.
    dm2, _, sampler2 = _continuous(backend_name, E, N, None, seed=4, low=-0.05, high=0.05, stddev=1.0)
    out = draw(dm2, sampler2, torch.zeros((E, N), device=dm2.device), "c", 10)
    assert out.min() == np.float32(-0.05) and out.max() == np.float32(0.05)


def test_ou_argmax_returns_clipped_mean_and_keeps_state(backend_name):
    E, N, D = 4, 3, 2
    low, high = np.float32([-0.5, 0.0]), np.float32([0.5, 1.0])
    dm, _, sampler = _continuous(backend_name, E, N, D, seed=8, low=low, high=high, damping=0.2, stddev=0.3)
    mean = to_device(dm, np.random.default_rng(1).uniform(-1.5, 1.5, (E, N, D)))
    draw(dm, sampler, mean, "c", 5)
    state = dm.data_on_device_via_torch("c" + OU_STATE_SUFFIX)
    before = state.clone()
    assert torch.count_nonzero(before) > 0
    for kwargs in (dict(argmax=True), dict(scale=0.0)):
        sampler.sample(dm, mean, "c", **kwargs)
        expected = torch.clamp(mean.cpu(), min=torch.from_numpy(low), max=torch.from_numpy(high))
        assert torch.equal(dm.data_on_device_via_torch("c").cpu(), expected)
        assert torch.equal(state, before)
    sampler.sample(dm, mean, "c")
    assert not torch.equal(state, before)


def test_ou_state_is_zeroed_for_done_envs_by_reset(backend_name):
    E, N, D = 5, 3, 2
    dm, fm, sampler = _continuous(backend_name, E, N, D, seed=9, low=-5.0, high=5.0, damping=0.1, stddev=1.0)
    name = "c" + OU_STATE_SUFFIX
    assert name in dm.reset_data_list
    draw(dm, sampler, torch.zeros((E, N, D), device=dm.device), "c", 4)
    state = dm.data_on_device_via_torch(name)
    before = state.cpu().clone()
    assert torch.count_nonzero(before) == before.numel()
    done_envs = [1, 3]
    dm.data_on_device_via_torch("_done_")[done_envs] = 1
    EnvironmentReset(fm, seed=0).reset_when_done(dm)
    after = state.cpu()
    for e in range(E):
        if e in done_envs:
            assert torch.count_nonzero(after[e]) == 0
        else:
            assert torch.equal(after[e], before[e])
    # The process restarts from zero: the next draw of a reset env is stddev * N(0, 1),
    # i.e. it does not carry the old state.
    sampler.sample(dm, torch.zeros((E, N, D), device=dm.device), "c", stddev=0.0)
    assert torch.count_nonzero(state.cpu()[done_envs]) == 0


# --------------------------------------------------------------------------- input errors


@pytest.fixture
def error_setup(backend_name):
    E, N = 3, 2
    arrays = {"moves": np.zeros((E, N), np.int32), "multi": np.zeros((E, N, 2), np.int32),
              "force": np.zeros((E, N, 2), np.float32)}
    dm, _, sampler = setup(backend_name, E, N, arrays)
    sampler.register_actions(dm, "moves", 4)
    sampler.register_actions(dm, "multi", [3, 2])
    sampler.register_continuous_actions(dm, "force", -1.0, 1.0)
    return dm, sampler


def _raises(exc, name):
    return pytest.raises(exc, match=re.escape(repr(name)))


def test_sample_rejects_bad_probabilities(error_setup):
    dm, sampler = error_setup
    dev = dm.device
    good = torch.full((3, 2, 4), 0.25, device=dev)
    sampler.sample(dm, good, "moves")
    with _raises(ValueError, "moves"):
        sampler.sample(dm, torch.full((3, 2, 5), 0.2, device=dev), "moves")  # wrong number of actions
    with _raises(ValueError, "moves"):
        sampler.sample(dm, torch.full((2, 2, 4), 0.25, device=dev), "moves")  # wrong number of envs
    with _raises(ValueError, "moves"):
        sampler.sample(dm, torch.full((3, 2, 4), 0.25, dtype=torch.float64, device=dev), "moves")
    with _raises(ValueError, "moves"):
        sampler.sample(dm, torch.full((4, 2, 3), 0.25, device=dev).permute(2, 1, 0), "moves")  # non-contiguous
    with _raises(TypeError, "moves"):
        sampler.sample(dm, np.full((3, 2, 4), 0.25, np.float32), "moves")
    with _raises(KeyError, "jump"):
        sampler.sample(dm, good, "jump")
    with _raises(ValueError, "multi"):
        sampler.sample(dm, [torch.full((3, 2, 3), 1 / 3, device=dev)], "multi")  # one head of two
    with _raises(ValueError, "multi"):
        sampler.sample(dm, [torch.full((3, 2, 3), 1 / 3, device=dev)] * 3, "multi")
    with _raises(ValueError, "multi"):  # heads swapped: head 0 has 3 actions
        sampler.sample(dm, [torch.full((3, 2, 2), 0.5, device=dev), torch.full((3, 2, 3), 1 / 3, device=dev)],
                       "multi")
    with _raises(TypeError, "moves"):
        sampler.sample(dm, good, "moves", stddev=0.1)  # noise parameters on a discrete action
    with _raises(ValueError, "force"):
        sampler.sample(dm, torch.zeros((3, 2), device=dev), "force")  # mean of the wrong shape
    with _raises(ValueError, "force"):
        sampler.sample(dm, torch.zeros((3, 2, 2), dtype=torch.float64, device=dev), "force")


def test_register_rejects_bad_action_arrays(backend_name):
    E, N = 3, 2
    arrays = {"f": np.zeros((E, N), np.float32), "i": np.zeros((E, N), np.int32),
              "h": np.zeros((E, N, 2), np.int32), "flat": np.zeros((E,), np.int32),
              "wrong_envs": np.zeros((E + 1, N), np.int32)}
    dm, _, sampler = setup(backend_name, E, N, arrays)
    with _raises(TypeError, "f"):
        sampler.register_actions(dm, "f", 3)
    with _raises(TypeError, "i"):
        sampler.register_continuous_actions(dm, "i", -1, 1)
    with _raises(ValueError, "h"):
        sampler.register_actions(dm, "h", 3)  # two heads declared by the array, one given
    with _raises(ValueError, "h"):
        sampler.register_actions(dm, "h", [3, 3, 3])
    with _raises(ValueError, "flat"):
        sampler.register_actions(dm, "flat", 3)
    with _raises(ValueError, "wrong_envs"):
        sampler.register_actions(dm, "wrong_envs", 3)
    with _raises(ValueError, "i"):
        sampler.register_actions(dm, "i", 0)
    with _raises(ValueError, "f"):
        sampler.register_continuous_actions(dm, "f", 1.0, -1.0)
    sampler.register_actions(dm, "i", 3)
    with _raises(ValueError, "i"):
        sampler.register_actions(dm, "i", 3)
    assert sampler.registered_actions == ["i"]

"""WarpDrive 2.7 env classes through this project: EnvWrapper's WarpDrive keywords, a WarpDrive-style
gym env with its own kernel (tests/warpdrive_style/line_chase*.py|.cu), its consistency checker, reset
pools, custom reset kernels, compile-time defines, and training it with our Trainer. All on the cpu executor."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from warpdrive_style.line_chase import CUDA_SOURCE, LineChase

from warp_drive.env_cpu_gpu_consistency_checker import EnvironmentCPUvsGPU, generate_random_actions
from warp_drive.env_wrapper import EnvWrapper
from warp_drive.utils.env_registrar import EnvironmentRegistrar

CONFIG = dict(num_agents=4, episode_length=12, grid_length=10.0, goal=5.0, tolerance=0.75,
              speeds=[0.5, 1.0, 0.75, 0.25], starting_locations=[1.0, 9.0, 4.0, 6.0])
# Starts close to the goal with a wide tolerance: episodes also end early (terminal condition).
NEAR = dict(CONFIG, tolerance=2.5, starting_locations=[4.0, 6.0, 5.5, 4.5], episode_length=15)


@pytest.fixture
def registrar(clean_registrar):
    registrar = EnvironmentRegistrar()
    registrar.add_cuda_env_src_path(LineChase.name, CUDA_SOURCE, env_backend="pycuda")
    return registrar


def wrap(registrar, num_envs=3, **config):
    return EnvWrapper(env_obj=LineChase(**dict(CONFIG, **config)), num_envs=num_envs, env_backend="cpu",
                      env_registrar=registrar)


def python_step(env: LineChase, actions: np.ndarray):
    return env.step({a: np.int32(actions[a]) for a in range(env.num_agents)})


def test_warpdrive_env_steps_and_resets_like_its_python_step(registrar):
    wrapper = wrap(registrar)
    assert (wrapper.n_agents, wrapper.n_envs, wrapper.episode_length, wrapper.name) == (4, 3, 12, "LineChase")
    assert wrapper.env_backend == "cpu" and wrapper.blocks_per_env == 1
    assert wrapper.cuda_data_manager is wrapper.data_manager
    assert wrapper.cuda_function_manager is wrapper.function_manager
    dm = wrapper.cuda_data_manager
    # WarpDrive's convention: the env dimension on reset-copied arrays only; placeholders from reset() and spaces.
    assert dm.get_shape("loc") == (3, 4) and dm.get_shape("goal") == (3,) and dm.get_shape("speeds") == (4,)
    assert dm.get_shape("observations") == (3, 4, 3) and dm.get_shape("rewards") == (3, 4)
    assert dm.get_shape("sampled_actions") == (3, 4, 1) and dm.get_dtype("sampled_actions") == "int32"
    assert "loc_at_reset" in dm.array_names and "speeds_at_reset" not in dm.array_names

    reference = LineChase(**CONFIG)
    first = wrapper.reset()
    expected_first = reference.reset()
    assert sorted(first) == [0, 1, 2, 3]
    for agent in range(4):
        np.testing.assert_array_equal(first[agent], expected_first[agent])
    assert wrapper.reset_all_envs() == {}  # later resets update the arrays in place

    rng = np.random.default_rng(0)
    for step in range(1, 2 * CONFIG["episode_length"] + 1):
        actions = rng.integers(0, 3, size=(3, 4, 1)).astype(np.int32)
        actions[:, :, 0] = actions[0, :, 0]  # the same actions in every env: one Python env is the reference
        wrapper.actions.copy_(torch.from_numpy(actions))
        obs, rew, done, _ = python_step(reference, actions[0, :, 0])
        wrapper.step_all_envs()
        for env in range(3):
            np.testing.assert_allclose(wrapper.obs[env].numpy(), np.stack([obs[a] for a in range(4)]), atol=1e-6)
            np.testing.assert_allclose(wrapper.rewards[env].numpy(), [rew[a] for a in range(4)], atol=1e-6)
        assert (wrapper.done.numpy() > 0).tolist() == [done["__all__"]] * 3, step
        if done["__all__"]:
            wrapper.reset_only_done_envs()
            reference.reset()
            np.testing.assert_array_equal(dm.pull_data_from_device("loc"), np.tile(CONFIG["starting_locations"], (3, 1)))
            assert not wrapper.done.any() and not dm.pull_data_from_device("_timestep_").any()
    assert step == 24


def test_step_with_actions_says_that_cpu_runs_the_kernel(registrar):
    wrapper = wrap(registrar, num_envs=1)
    with pytest.raises(TypeError, match="Python step"):
        wrapper.step_all_envs({0: 1, 1: 1, 2: 1, 3: 1})


def test_source_from_the_env_attribute_and_env_name_from_the_registrar(clean_registrar):
    class Attributed(LineChase):
        cuda_source = CUDA_SOURCE

    wrapper = EnvWrapper(env_obj=Attributed(**CONFIG), num_envs=2, env_backend="cpu")
    wrapper.step_all_envs()
    assert wrapper.cuda_data_manager.pull_data_from_device("_timestep_").tolist() == [1, 1]

    registrar = EnvironmentRegistrar()
    registrar.add(env_backend="pycuda", cuda_env_src_path=CUDA_SOURCE)(Attributed)
    by_name = EnvWrapper(env_name="LineChase", env_config=CONFIG, num_envs=2, env_backend="cpu",
                         env_registrar=registrar)
    assert isinstance(by_name.env.warpdrive_env, Attributed) and by_name.n_envs == 2


def test_missing_source_names_the_fixes():
    with pytest.raises(ValueError, match="add_cuda_env_src_path.*cuda_source"):
        EnvWrapper(env_obj=LineChase(**CONFIG), num_envs=2, env_backend="cpu")


def test_backend_keywords():
    with pytest.raises(ValueError, match="Numba"):
        EnvWrapper(env_obj=LineChase(**CONFIG), num_envs=2, env_backend="numba")
    with pytest.raises(TypeError, match="env_name= by keyword"):
        EnvWrapper(LineChase(**CONFIG), "LineChase")
    with pytest.raises(ValueError, match="disagree"):
        EnvWrapper(env_obj=LineChase(**CONFIG), backend="cpu", env_backend="pycuda")


def test_deprecated_use_cuda_false_is_the_cpu_executor(registrar):
    with pytest.warns(DeprecationWarning, match="use_cuda"):
        wrapper = EnvWrapper(env_obj=LineChase(**CONFIG), num_envs=2, use_cuda=False, env_registrar=registrar)
    assert wrapper.env_backend == "cpu"


def test_consistency_checker_passes(registrar):
    EnvironmentCPUvsGPU(
        dual_mode_env_class=LineChase,
        env_configs={"far": CONFIG, "near": NEAR},
        num_envs=3,
        num_episodes=2,
        gpu_env_backend="cpu",
        env_registrar=registrar,
    ).test_env_reset_and_step(seed=0)
    # WarpDrive's other form: a CPU class and a CUDA class.
    EnvironmentCPUvsGPU(cpu_env_class=LineChase, cuda_env_class=LineChase, env_configs={"near": NEAR}, num_envs=2,
                        num_episodes=1, gpu_env_backend="cpu", env_registrar=registrar).test_env_reset_and_step()


def test_near_config_terminates_early(registrar):
    """The "near" config exercises resets in mid-episode (the terminal condition), not only at the time limit."""
    wrapper = wrap(registrar, num_envs=3, **{k: v for k, v in NEAR.items() if k != "num_agents"})
    rng = np.random.default_rng(0)
    early = 0
    for _ in range(NEAR["episode_length"] * 2):
        wrapper.actions.copy_(torch.from_numpy(rng.integers(0, 3, (3, 4, 1)).astype(np.int32)))
        wrapper.step_all_envs()
        t = wrapper.cuda_data_manager.pull_data_from_device("_timestep_")
        early += int(((wrapper.done.numpy() > 0) & (t < NEAR["episode_length"])).sum())
        wrapper.reset_only_done_envs()
    assert early > 0


def test_consistency_checker_names_the_array_when_the_kernel_is_wrong(registrar):
    class FlippedReward(LineChase):
        cuda_defines = {"REWARD_SIGN": "-1.0f"}  # the kernel's reward has the wrong sign

    # The registrar's class registry is process-wide, as WarpDrive's was: a class
    # registered under the same name elsewhere must not replace the class checked.
    registrar.add(env_backend="pycuda", cuda_env_src_path=CUDA_SOURCE)(LineChase)
    checker = EnvironmentCPUvsGPU(dual_mode_env_class=FlippedReward, env_configs={"flipped": CONFIG}, num_envs=3,
                                  num_episodes=1, gpu_env_backend="cpu", env_registrar=registrar)
    with pytest.raises(AssertionError, match=r"flipped: step 1: array 'rewards', env 0, agent 0: Python step"):
        checker.test_env_reset_and_step(seed=0)


def test_defines_reach_the_kernel(registrar):
    plain = wrap(registrar, num_envs=2)
    flipped = EnvWrapper(env_obj=LineChase(**CONFIG), num_envs=2, env_backend="cpu", env_registrar=registrar,
                         defines={"REWARD_SIGN": "-1.0f"})
    plain.step_all_envs()
    flipped.step_all_envs()
    assert plain.rewards.abs().min() > 0
    torch.testing.assert_close(flipped.rewards, -plain.rewards)


def test_random_actions_change_every_step_with_one_generator():
    env = LineChase(**CONFIG)
    rng = np.random.default_rng(3)
    draws = [generate_random_actions(env, 5, rng) for _ in range(3)]
    flat = [[int(a[agent]) for a in d for agent in range(4)] for d in draws]
    assert flat[0] != flat[1] or flat[1] != flat[2]
    assert generate_random_actions(env, 5, seed=7) == generate_random_actions(env, 5, seed=7)


def test_reset_pool_draws_rows_on_the_device(registrar):
    pool = np.array([1.0, 2.0, 3.0, 7.0, 8.0, 9.0], np.float32)
    wrapper = wrap(registrar, num_envs=8, goal_pool=pool)
    dm = wrapper.cuda_data_manager
    assert dm.get_shape("goal") == (8,) and "goal_at_reset" not in dm.array_names
    np.testing.assert_array_equal(dm.pull_data_from_device("goal_reset_pool"), pool)
    # As in WarpDrive, the first episode starts from the env's own reset() (which the first obs describe) ...
    assert wrapper.reset()[0][1] == pytest.approx((5.0 - 1.0) / 10) and (dm.pull_data_from_device("goal") == 5.0).all()
    goals = []  # ... and every later reset draws a pool row per env
    for _ in range(4):
        wrapper.reset_all_envs()
        goals.append(dm.pull_data_from_device("goal").copy())
    assert np.isin(np.concatenate(goals), pool).all()
    assert len(np.unique(np.concatenate(goals))) > 2  # not one fixed snapshot

    wrapper.init_reset_pool(seed=5)
    wrapper.reset_all_envs()
    first = dm.pull_data_from_device("goal").copy()
    wrapper.init_reset_pool(seed=5)
    wrapper.reset_all_envs()
    np.testing.assert_array_equal(dm.pull_data_from_device("goal"), first)

    # The step sees the drawn goal: obs[..., 1] = (goal - x) / L.
    wrapper.step_all_envs()
    loc, obs = dm.pull_data_from_device("loc"), dm.pull_data_from_device("observations")
    np.testing.assert_allclose(obs[:, :, 1], (first[:, None] - loc) / 10.0, atol=1e-6)


def test_custom_reset_kernel_resets_the_done_envs(registrar):
    wrapper = wrap(registrar, num_envs=3)
    assert wrapper.env_resetter.custom_reset_function is not None
    dm = wrapper.cuda_data_manager
    before = dm.pull_data_from_device("loc").copy()
    wrapper.done[1] = 1
    assert wrapper.custom_reset_all_envs(args=["loc", "goal", "_done_", ("n_agents", "meta")]) == {}
    after = dm.pull_data_from_device("loc")
    np.testing.assert_array_equal(after[1], np.full(4, 5.0, np.float32))
    np.testing.assert_array_equal(after[[0, 2]], before[[0, 2]])


def test_native_env_has_no_custom_reset():
    from example_envs.tag_continuous.tag_continuous import TagContinuous

    wrapper = EnvWrapper(env_obj=TagContinuous(num_taggers=1, num_runners=3, episode_length=10), num_envs=2,
                         env_backend="cpu", seed=0)
    with pytest.raises(RuntimeError, match="Cuda<Name>Reset"):
        wrapper.custom_reset_all_envs()


@pytest.mark.slow
def test_trains_with_our_trainer(registrar):
    """The WarpDrive-style class learns with PPO: greedy episodes go from far off to everyone at the goal
    (a random-initialised policy scores about -5 to -7.5 over 20 steps; reaching the goal ends the
    episode with +1)."""
    from warp_drive.training.config import RunConfig
    from warp_drive.training.trainer import Trainer

    wrapper = wrap(registrar, num_envs=32, episode_length=20)
    config = RunConfig.from_dict({
        "name": "line_chase",
        "env": {"name": "LineChase", "config": {}},
        "trainer": {"num_envs": 32, "rollout_length": 20, "total_steps": 32 * 20 * 60, "seed": 0, "backend": "cpu"},
        "policy": {"shared": {"algorithm": "PPO", "lr": 3e-3,
                              "model": {"type": "fully_connected", "fc_dims": [32, 32]}}},
    })
    trainer = Trainer(wrapper, config, verbose=False)
    before = trainer.run_episodes(greedy=True)["mean_return"]["shared"]
    for _ in range(60):
        metrics = trainer.iterate()
        losses = {k: v for k, v in metrics.items() if k.startswith("losses/")}
        assert losses and all(math.isfinite(v) for v in losses.values()), losses
    after = trainer.run_episodes(greedy=True)["mean_return"]["shared"]
    assert before < -3.0 and after > 0.0, (before, after)


def test_our_tag_continuous_through_warpdrive_keywords():
    from example_envs.tag_continuous.tag_continuous import TagContinuous

    cfg = dict(num_taggers=1, num_runners=4, episode_length=10, seed=0)
    wrapper = EnvWrapper(env_obj=TagContinuous(**cfg), num_envs=2, env_backend="cpu", seed=0)
    native = EnvWrapper(TagContinuous(**cfg), 2, backend="cpu", seed=0)
    assert (wrapper.n_agents, wrapper.n_envs, wrapper.env_backend) == (5, 2, "cpu")
    first = wrapper.reset()
    assert sorted(first) == list(range(5))
    np.testing.assert_array_equal(np.stack([first[a] for a in range(5)]), wrapper.obs[0].numpy())
    assert wrapper.reset() == {}
    native.reset()
    native.reset()  # as many pool draws as the two resets above
    for _ in range(3):
        wrapper.step_all_envs()
        native.step_all_envs()
    torch.testing.assert_close(wrapper.obs, native.obs)
    torch.testing.assert_close(wrapper.rewards, native.rewards)


def test_the_guides_native_port_steps_as_the_warpdrive_original(registrar):
    """docs/migrating_from_warpdrive.md's worked port: the same env in the native contract
    matches the WarpDrive-style class step for step, and passes the native consistency checker."""
    from warpdrive_style.line_chase_native import LineChaseNative

    from warp_drive.env.consistency import check

    original = wrap(registrar, num_envs=3)
    original.reset()
    port = EnvWrapper(LineChaseNative, 3, backend="cpu", env_config=CONFIG, seed=0)
    port.reset_all_envs()
    rng = np.random.default_rng(1)
    terminated = truncated = 0
    for _ in range(3 * CONFIG["episode_length"]):
        actions = rng.integers(0, 3, size=(3, 4)).astype(np.int32)
        original.actions.copy_(torch.from_numpy(actions[:, :, None]))
        port.actions.copy_(torch.from_numpy(actions))
        original.step_all_envs()
        port.step_all_envs()
        np.testing.assert_allclose(port.obs.numpy(), original.obs.numpy(), atol=1e-6)
        np.testing.assert_allclose(port.rewards.numpy(), original.rewards.numpy(), atol=1e-6)
        done = port.done.numpy()
        # WarpDrive's done is one flag; the port says why (1 terminated, 2 truncated by the time limit).
        assert ((done > 0) == (original.done.numpy() > 0)).all()
        terminated, truncated = terminated + int((done == 1).sum()), truncated + int((done == 2).sum())
        original.reset_only_done_envs()
        port.reset_only_done_envs()
    assert truncated > 0
    check(LineChaseNative, [CONFIG, NEAR, dict(CONFIG, goal_pool=[2.0, 5.0, 8.0])], num_envs=3, num_episodes=2)

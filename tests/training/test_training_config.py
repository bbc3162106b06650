"""Run config: schema, validation messages, YAML loading, --set overrides, shipped configs.

No torch and no kernels: everything here runs in well under a second.
"""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from warp_drive.env.registry import get_env_class
from warp_drive.training.config import (
    CONFIG_DIR,
    ConfigError,
    DDPGPolicyConfig,
    OnPolicyConfig,
    PolicyConfig,
    RunConfig,
    apply_overrides,
    available_configs,
    check_env,
    load_config,
    parse_yaml,
    policy_agents,
)

SHIPPED = available_configs()


def minimal(**policy) -> dict:
    """The smallest valid config dict: one PPO policy on CartPole."""
    return {
        "name": "unit",
        "env": {"name": "CartPole", "config": {"episode_length": 200}},
        "trainer": {"num_envs": 8, "rollout_length": 16, "total_steps": 1024},
        "policy": {"shared": dict(policy)},
    }


def errors_of(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        RunConfig.from_dict(data)
    return str(info.value)


def with_keys(data: dict, **paths) -> dict:
    """A copy of ``data`` with dotted paths (``policy__shared__lr``) set to values."""
    out = copy.deepcopy(data)
    for dotted, value in paths.items():
        *parents, last = dotted.split("__")
        node = out
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return out


# --------------------------------------------------------------------------- schema and round trip
def test_defaults_follow_the_design():
    config = RunConfig.from_dict(minimal())
    policy = config.policy["shared"]
    assert policy == OnPolicyConfig()
    assert (policy.algorithm, policy.gamma, policy.gae_lambda, policy.lr) == ("PPO", 0.99, 0.95, 3e-4)
    assert (policy.num_epochs, policy.num_minibatches, policy.max_grad_norm, policy.target_kl) == (4, 4, 0.5, None)
    assert policy.model.fc_dims == [64, 64] and policy.model.activation == "tanh" and policy.model.extra == {}
    assert config.trainer.backend == "auto" and config.trainer.seed == 0
    assert config.saving.name == "unit"  # defaults to the top-level name
    assert (config.saving.basedir, config.saving.tag) == ("runs", "experiment")


def test_batch_size_and_iterations():
    trainer = RunConfig.from_dict(with_keys(minimal(), trainer__total_steps=1000)).trainer
    assert trainer.train_batch_size == 8 * 16
    assert trainer.num_iterations == 1000 // 128


def test_round_trip_to_dict_from_dict():
    data = minimal(
        algorithm="ppo",
        lr={"type": "LINEAR", "start": 1, "end": 0},
        entropy_coef=[[0, 0.1], [500, 0.01]],
        max_grad_norm=None,
        target_kl=0.02,
        model={"fc_dims": [32], "activation": "ReLU", "extra": {"dropout": 0.1, "nested": {"a": [1, 2]}}},
    )
    data["env"]["config"]["nested"] = {"list": [1, 2.5, None]}
    config = RunConfig.from_dict(data)
    plain = config.to_dict()
    assert RunConfig.from_dict(plain) == config
    assert RunConfig.from_dict(parse_yaml(config.to_yaml())) == config
    policy = plain["policy"]["shared"]
    assert policy["algorithm"] == "PPO" and policy["model"]["activation"] == "relu"
    assert policy["lr"] == {"type": "linear", "start": 1.0, "end": 0.0}
    assert policy["entropy_coef"] == [[0, 0.1], [500, 0.01]]
    # to_dict copies: editing it does not reach back into the config
    plain["env"]["config"]["nested"]["list"].append(7)
    assert config.env.config["nested"]["list"] == [1, 2.5, None]


def test_from_dict_does_not_alias_its_input():
    data = minimal()
    config = RunConfig.from_dict(data)
    data["env"]["config"]["episode_length"] = 5
    assert config.env.config["episode_length"] == 200


def test_empty_sections_mean_defaults():
    data = minimal()
    data["saving"] = None
    data["policy"]["shared"] = None
    config = RunConfig.from_dict(data)
    assert config.saving.name == "unit" and config.policy["shared"] == OnPolicyConfig()


def test_ints_for_floats_and_integral_floats_for_ints():
    config = RunConfig.from_dict(with_keys(minimal(lr=1, gamma=1, vf_coef=0), trainer__total_steps=2048.0))
    policy = config.policy["shared"]
    assert isinstance(policy.lr, float) and isinstance(policy.gamma, float) and isinstance(policy.vf_coef, float)
    assert config.trainer.total_steps == 2048 and isinstance(config.trainer.total_steps, int)


def test_a2c_forces_one_epoch_and_one_minibatch():
    policy = RunConfig.from_dict(minimal(algorithm="a2c")).policy["shared"]
    assert (policy.algorithm, policy.num_epochs, policy.num_minibatches) == ("A2C", 1, 1)
    explicit = RunConfig.from_dict(minimal(algorithm="A2C", num_epochs=1, num_minibatches=1)).policy["shared"]
    assert explicit == policy


# --------------------------------------------------------------------------- errors
def test_unknown_keys_name_the_path_and_suggest():
    message = errors_of(with_keys(minimal(), trainer__rollout_lenght=8))
    assert "trainer.rollout_lenght: unknown key" in message and "did you mean 'rollout_length'" in message
    message = errors_of(minimal(model={"fc_dim": [8]}))
    assert "policy.shared.model.fc_dim: unknown key" in message and "'fc_dims'" in message
    message = errors_of(with_keys(minimal(), savng={}))
    assert "savng: unknown key" in message and "'saving'" in message


def test_free_form_sections_accept_any_key():
    data = minimal(model={"extra": {"anything": 1}})
    data["env"]["config"]["made_up"] = True  # the env constructor judges these, not the schema
    config = RunConfig.from_dict(data)
    assert config.env.config["made_up"] is True and config.policy["shared"].model.extra == {"anything": 1}


@pytest.mark.parametrize(
    "paths, expected",
    [
        ({"trainer__num_envs": "8"}, "trainer.num_envs: expected an integer >= 1, got '8' (str)"),
        ({"trainer__num_envs": 2.5}, "trainer.num_envs: expected an integer >= 1, got 2.5 (float)"),
        ({"trainer__num_envs": True}, "trainer.num_envs: expected an integer >= 1, got True (bool)"),
        ({"trainer__num_envs": 0}, "trainer.num_envs: expected an integer >= 1, got 0 (int)"),
        ({"trainer__rollout_length": -1}, "trainer.rollout_length: expected an integer >= 1"),
        ({"trainer__total_steps": 0}, "trainer.total_steps: expected an integer >= 1"),
        ({"trainer__seed": -3}, "trainer.seed: expected an integer >= 0"),
        ({"policy__shared__num_epochs": 0}, "policy.shared.num_epochs: expected an integer >= 1"),
        ({"policy__shared__num_minibatches": False}, "policy.shared.num_minibatches: expected an integer >= 1, got False (bool)"),
        ({"policy__shared__normalize_advantage": 1}, "policy.shared.normalize_advantage: expected a boolean (true/false), got 1 (int)"),
        ({"policy__shared__to_train": "yes please"}, "policy.shared.to_train: expected a boolean"),
        ({"policy__shared__gamma": True}, "policy.shared.gamma: expected a number in [0.0, 1.0], got True (bool)"),
        ({"policy__shared__gamma": 1.5}, "policy.shared.gamma: expected a number in [0.0, 1.0], got 1.5"),
        ({"policy__shared__clip_param": 0}, "policy.shared.clip_param: expected a number > 0"),
        ({"policy__shared__max_grad_norm": -1}, "policy.shared.max_grad_norm: expected a number > 0, got -1 (int) (or null"),
        ({"policy__shared__vf_coef": "half"}, "policy.shared.vf_coef: expected a number >= 0.0, got 'half' (str)"),
        ({"policy__shared__algorithm": "SAC"}, "policy.shared.algorithm: expected one of A2C, PPO, DDPG"),
        ({"policy__shared__algorithm": 3}, "policy.shared.algorithm: expected one of A2C, PPO, DDPG"),
        ({"trainer__backend": "cuda"}, "trainer.backend: expected one of auto, cpu, cpu-gpu, pycuda"),
        ({"trainer__on_nonfinite": "ignore"}, "trainer.on_nonfinite: expected one of raise, skip"),
        ({"policy__shared__model__activation": "gelu"}, "policy.shared.model.activation: expected one of tanh, relu"),
        ({"policy__shared__model__fc_dims": 64}, "policy.shared.model.fc_dims: expected a list of positive integers"),
        ({"policy__shared__model__fc_dims": [64, True]}, "policy.shared.model.fc_dims[1]: expected an integer >= 1, got True"),
        ({"policy__shared__model__shared_trunk": "false"}, "policy.shared.model.shared_trunk: expected a boolean"),
        ({"policy__shared__model__extra": [1]}, "policy.shared.model.extra: expected a mapping"),
        ({"env__config": "num_agents=3"}, "env.config: expected a mapping"),
        ({"env__name": ""}, "env.name: expected a non-empty string"),
        ({"saving__model_params_save_freq": 0}, "saving.model_params_save_freq: expected an integer >= 1"),
        ({"saving__basedir": None}, "saving.basedir: expected a non-empty string, got None"),
        ({"trainer": [1, 2]}, "trainer: expected a mapping of keys to values, got [1, 2] (list)"),
    ],
)
def test_wrong_values_name_path_expected_type_and_value(paths, expected):
    assert expected in errors_of(with_keys(minimal(), **paths))


def test_normalised_choices():
    config = RunConfig.from_dict(with_keys(minimal(algorithm="Ppo"), trainer__backend="CPU"))
    assert config.policy["shared"].algorithm == "PPO" and config.trainer.backend == "cpu"


def test_total_steps_must_cover_one_iteration():
    message = errors_of(with_keys(minimal(), trainer__total_steps=100))
    assert "trainer.total_steps" in message
    assert "8 * 16 = 128 env steps" in message and "at least 128" in message


def test_a2c_rejects_several_epochs_or_minibatches():
    message = errors_of(minimal(algorithm="A2C", num_epochs=4))
    assert "policy.shared.num_epochs" in message and "A2C" in message
    message = errors_of(minimal(algorithm="A2C", num_minibatches=2))
    assert "policy.shared.num_minibatches" in message


def test_minibatches_must_fit_in_the_batch():
    message = errors_of(minimal(num_minibatches=1000))
    assert "policy.shared.num_minibatches" in message and "128 env steps" in message


@pytest.mark.parametrize(
    "schedule, expected",
    [
        ("fast", "policy.shared.lr: expected a number, {type: linear"),
        (True, "policy.shared.lr: expected a number, {type: linear"),
        ({"type": "cosine", "start": 1, "end": 0}, "policy.shared.lr.type: expected 'linear' or 'constant'"),
        ({"start": 1, "end": 0}, "policy.shared.lr.type: expected 'linear' or 'constant'"),
        ({"type": "linear", "start": 1}, "policy.shared.lr.end: required for a linear schedule"),
        ({"type": "linear", "start": 1, "end": "zero"}, "policy.shared.lr.end: expected a number, got 'zero'"),
        ({"type": "linear", "start": 1, "end": 0, "stop": 5}, "policy.shared.lr.stop: unknown key"),
        ({"type": "constant"}, "policy.shared.lr.value: required for a constant schedule"),
        ([], "policy.shared.lr: a piecewise schedule needs at least one [step, value] pair"),
        ([[0, 1e-3], [100]], "policy.shared.lr[1]: expected a [step, value] pair"),
        ([0, 1e-3], "policy.shared.lr[0]: expected a [step, value] pair"),
        ([[100, 1e-3], [50, 1e-4]], "policy.shared.lr[1]: steps must be strictly increasing"),
        ([[0, 1e-3], [0, 1e-4]], "policy.shared.lr[1]: steps must be strictly increasing"),
        ([[-5, 1e-3]], "policy.shared.lr[0][0] (step): expected a number >= 0"),
        ([[0, "x"]], "policy.shared.lr[0][1] (value): expected a number"),
    ],
)
def test_bad_schedule_shapes(schedule, expected):
    assert expected in errors_of(minimal(lr=schedule))


@pytest.mark.parametrize(
    "schedule, normalised",
    [
        (0.01, 0.01),
        (1, 1.0),
        ({"type": "linear", "start": 0.02, "end": 0}, {"type": "linear", "start": 0.02, "end": 0.0}),
        ({"type": "Constant", "value": 0.1}, {"type": "constant", "value": 0.1}),
        ([[0, 0.02], [1e5, 0.0]], [[0, 0.02], [100000, 0.0]]),
        (((0, 0.02),), [[0, 0.02]]),
    ],
)
def test_good_schedule_shapes(schedule, normalised):
    assert RunConfig.from_dict(minimal(entropy_coef=schedule)).policy["shared"].entropy_coef == normalised


def test_required_sections_and_policy_tags():
    for key in ("name", "env", "policy"):
        data = minimal()
        del data[key]
        assert f"{key}: required" in errors_of(data)
    data = minimal()
    del data["env"]["name"]
    assert "env.name: required" in errors_of(data)
    assert "policy: needs at least one policy" in errors_of(with_keys(minimal(), policy={}))
    data = minimal()
    data["policy"] = {"bad tag": {}}
    assert "policy tag 'bad tag' must be an identifier" in errors_of(data)
    assert "config: expected a mapping" in errors_of([1, 2])


def test_every_problem_is_reported_at_once():
    data = with_keys(minimal(gamma=2, algorithm="SAC"), trainer__num_envs=0, trainer__bakend="cpu")
    with pytest.raises(ConfigError) as info:
        RunConfig.from_dict(data, source="my.yaml")
    assert len(info.value.errors) == 4
    message = str(info.value)
    assert message.startswith("invalid config my.yaml:")
    for path in ("trainer.bakend", "trainer.num_envs", "policy.shared.gamma", "policy.shared.algorithm"):
        assert path in message
    assert isinstance(info.value, ValueError)


# --------------------------------------------------------------------------- one section type per algorithm
ON_POLICY_ONLY = {"gae_lambda", "entropy_coef", "vf_coef", "normalize_advantage", "clip_param", "clip_value_loss",
                  "num_epochs", "num_minibatches", "target_kl"}
DDPG_ONLY = {"tau", "critic_lr", "replay_buffer_size", "batch_size", "updates_per_iteration", "warmup_steps",
             "noise_stddev", "noise_damping", "n_step"}

# The policy section of a config.yaml written before the policy sections were split (RunConfig.to_dict of
# minimal()): every key of every algorithm, at its default.
OLD_POLICY_SECTION = """\
policy:
  shared:
    algorithm: PPO
    gamma: 0.99
    gae_lambda: 0.95
    lr: 0.0003
    entropy_coef: 0.01
    vf_coef: 0.5
    max_grad_norm: 0.5
    normalize_advantage: true
    clip_param: 0.2
    clip_value_loss: false
    num_epochs: 4
    num_minibatches: 4
    target_kl: null
    to_train: true
    tau: 0.005
    critic_lr: null
    replay_buffer_size: 1000000
    batch_size: 256
    updates_per_iteration: null
    warmup_steps: 10000
    noise_stddev: 0.1
    noise_damping: null
    n_step: 1
    model:
      type: fully_connected
      fc_dims:
      - 64
      - 64
      activation: tanh
      shared_trunk: false
      obs_normalization: false
      log_std_init: 0.0
      extra: {}
      critic_fc_dims: null
"""


def old_config_yaml(algorithm: str = "PPO") -> str:
    """A whole config.yaml as a run saved it before the split."""
    head = {k: v for k, v in minimal().items() if k != "policy"}
    return yaml.safe_dump(head, sort_keys=False) + OLD_POLICY_SECTION.replace("algorithm: PPO",
                                                                              f"algorithm: {algorithm}")


def test_resolved_configs_list_only_their_algorithms_keys():
    """config.yaml (write_run_config dumps to_dict) of a PPO run shows no DDPG key, and a DDPG one no A2C/PPO key."""
    ppo = parse_yaml(load_config("cartpole").to_yaml())["policy"]["shared"]
    assert ON_POLICY_ONLY <= set(ppo) and not DDPG_ONLY & set(ppo)
    assert "critic_fc_dims" not in ppo["model"] and "shared_trunk" in ppo["model"]
    ddpg = parse_yaml(load_config("pendulum_ddpg").to_yaml())["policy"]["shared"]
    assert DDPG_ONLY <= set(ddpg) and not ON_POLICY_ONLY & set(ddpg)
    assert not {"shared_trunk", "log_std_init", "extra"} & set(ddpg["model"]) and "critic_fc_dims" in ddpg["model"]
    a2c = RunConfig.from_dict(minimal(algorithm="A2C")).to_dict()["policy"]["shared"]
    assert ON_POLICY_ONLY <= set(a2c) and not DDPG_ONLY & set(a2c)
    assert type(load_config("pendulum_ddpg").policy["shared"]) is DDPGPolicyConfig
    assert type(load_config("tag_gridworld").policy["tagger"]) is OnPolicyConfig  # A2C: PPO's type


def test_each_key_has_one_default():
    """The keys every algorithm reads are PolicyConfig's fields, inherited (not re-declared) by each type."""
    common = PolicyConfig.model_fields
    assert set(common) == {"algorithm", "gamma", "lr", "max_grad_norm", "to_train"}
    for cls in (OnPolicyConfig, DDPGPolicyConfig):
        declared_here = set(vars(cls)["__annotations__"])
        assert declared_here & set(common) == {"algorithm"} or declared_here & set(common) == set(), cls
        assert all(cls.model_fields[k].default == common[k].default for k in common if k != "algorithm"), cls
    assert (OnPolicyConfig().algorithm, DDPGPolicyConfig().algorithm) == ("PPO", "DDPG")
    assert not DDPG_ONLY & set(OnPolicyConfig.model_fields)
    with pytest.raises(TypeError, match="OnPolicyConfig"):
        PolicyConfig()


@pytest.mark.parametrize("policy, key, owner, algorithm", [
    ({"tau": 0.01}, "tau", "DDPG", "PPO"),
    ({"algorithm": "A2C", "replay_buffer_size": 10}, "replay_buffer_size", "DDPG", "A2C"),
    ({"model": {"critic_fc_dims": [8]}}, "model.critic_fc_dims", "DDPG", "PPO"),
    ({"algorithm": "DDPG", "clip_param": 0.3}, "clip_param", "A2C/PPO/VTRACE", "DDPG"),
    ({"algorithm": "ddpg", "num_epochs": 2}, "num_epochs", "A2C/PPO/VTRACE", "DDPG"),
    ({"algorithm": "DDPG", "model": {"shared_trunk": True}}, "model.shared_trunk", "A2C/PPO/VTRACE", "DDPG"),
])
def test_a_key_of_another_algorithm_is_refused_naming_it(policy, key, owner, algorithm):
    with pytest.raises(ConfigError) as info:
        RunConfig.from_dict(minimal(**policy))
    fix = " or ".join(owner.split("/"))
    assert info.value.errors == [  # that error alone, not also an "unknown key"
        f"policy.shared.{key}: a key of {owner}, but policy 'shared' uses {algorithm}, which has no {key}; "
        f"remove it, or set policy.shared.algorithm to {fix}"]


def test_another_algorithms_key_through_set_is_refused_even_at_its_default():
    for item in ("policy.shared.tau=0.01", "policy.shared.tau=0.005", "policy.*.model.critic_fc_dims=[8]"):
        with pytest.raises(ConfigError, match=rf"--set {re.escape(item)}: policy.shared.\S+: a key of DDPG, but "
                                              rf"policy 'shared' uses PPO"):
            apply_overrides(minimal(), [item])
    with pytest.raises(ConfigError, match="policy.shared.clip_value_loss: a key of A2C/PPO/VTRACE, but policy 'shared' "
                                          "uses DDPG"):
        load_config("pendulum_ddpg", ["policy.shared.clip_value_loss=true"])
    # the policy's algorithm is the one after every override, whichever order they come in
    out = apply_overrides(minimal(), ["policy.shared.tau=0.01", "policy.shared.algorithm=DDPG"])
    assert RunConfig.from_dict(out).policy["shared"].tau == 0.01


def test_a_config_yaml_saved_before_the_split_still_loads():
    """A PPO (or DDPG) policy listing the other algorithm's keys at their defaults: those are dropped."""
    config = RunConfig.from_dict(parse_yaml(old_config_yaml()), source="config.yaml")
    assert config == RunConfig.from_dict(minimal())
    assert not DDPG_ONLY & set(config.to_dict()["policy"]["shared"])
    ddpg = RunConfig.from_dict(parse_yaml(old_config_yaml("DDPG"))).policy["shared"]
    assert ddpg == DDPGPolicyConfig()
    # only exactly the default is dropped: another value is a setting the run's algorithm would not read
    changed = old_config_yaml().replace("noise_stddev: 0.1", "noise_stddev: 0.3")
    assert "policy.shared.noise_stddev: a key of DDPG" in errors_of(parse_yaml(changed))
    assert "normalize_advantage: a key of A2C/PPO/VTRACE" in errors_of(parse_yaml(old_config_yaml("DDPG").replace(
        "normalize_advantage: true", "normalize_advantage: false")))


def test_a_run_saved_before_the_split_resumes(tmp_path):
    """runs.config_file.resumed_config (what `train --resume` reads) on an old run directory's config.yaml."""
    from warp_drive.training.runs.config_file import resumed_config, saved_config

    (tmp_path / "config.yaml").write_text(old_config_yaml())
    saved = saved_config(tmp_path)
    resumed = resumed_config(tmp_path, RunConfig.from_dict(apply_overrides(saved, ["trainer.total_steps=2048"])))
    assert resumed.trainer.total_steps == 2048
    assert resumed.policy == RunConfig.from_dict(minimal()).policy


# --------------------------------------------------------------------------- overrides
def test_override_values_are_parsed_as_yaml():
    data = minimal()
    out = apply_overrides(data, [
        "trainer.num_envs=200",
        "policy.shared.lr=3e-4",
        "policy.shared.gamma=0.9",
        "policy.shared.normalize_advantage=false",
        "policy.shared.max_grad_norm=null",
        "policy.shared.target_kl=",
        "policy.shared.model.fc_dims=[128, 128]",
        "policy.shared.entropy_coef={type: linear, start: 1e-2, end: 0}",
        "saving.tag=baseline run",
        "name=a=b",
    ])
    trainer, policy = out["trainer"], out["policy"]["shared"]
    assert trainer["num_envs"] == 200 and isinstance(trainer["num_envs"], int)
    assert policy["lr"] == 3e-4 and isinstance(policy["lr"], float)
    assert policy["gamma"] == 0.9 and policy["normalize_advantage"] is False
    assert policy["max_grad_norm"] is None and policy["target_kl"] is None
    assert policy["model"]["fc_dims"] == [128, 128]
    assert policy["entropy_coef"] == {"type": "linear", "start": 0.01, "end": 0}
    assert out["saving"]["tag"] == "baseline run" and out["name"] == "a=b"
    assert data == minimal()  # the input is not modified
    RunConfig.from_dict(with_keys(out, trainer__total_steps=10**6))


def test_override_of_a_missing_key_is_an_error():
    with pytest.raises(ConfigError, match=r"trainer\.num_envz: unknown key; did you mean 'num_envs'"):
        apply_overrides(minimal(), ["trainer.num_envz=3"])
    with pytest.raises(ConfigError, match=r"policy\.shared\.model\.fc_dim: unknown key"):
        apply_overrides(minimal(), ["policy.shared.model.fc_dim=[8]"])
    with pytest.raises(ConfigError, match="no policy 'sharde'.*did you mean 'shared'"):
        apply_overrides(minimal(), ["policy.sharde.lr=1"])
    with pytest.raises(ConfigError, match="traner: unknown key"):
        apply_overrides(minimal(), ["traner.num_envs=1"])
    with pytest.raises(ConfigError, match="trainer.num_envs is a value, not a section"):
        apply_overrides(minimal(), ["trainer.num_envs.x=1"])


def test_override_keys_absent_from_the_file_but_in_the_schema():
    data = minimal()
    del data["trainer"]
    out = apply_overrides(data, ["trainer.seed=7", "saving.basedir=/tmp/x", "policy.shared.model.log_std_init=-1"])
    assert out["trainer"] == {"seed": 7} and out["saving"] == {"basedir": "/tmp/x"}
    assert out["policy"]["shared"]["model"] == {"log_std_init": -1}


def test_override_inside_free_form_sections_and_schedules():
    out = apply_overrides(minimal(lr={"type": "linear", "start": 1, "end": 0}), [
        "env.config.new_param.deep=1",
        "policy.shared.model.extra.width=3",
        "policy.shared.lr.end=0.5",
    ])
    assert out["env"]["config"]["new_param"] == {"deep": 1}
    assert out["policy"]["shared"]["model"]["extra"] == {"width": 3}
    assert out["policy"]["shared"]["lr"]["end"] == 0.5


def test_override_wildcard_sets_every_policy_and_later_wins():
    data = minimal()
    data["policy"] = {"tagger": {}, "runner": {"lr": 1}}
    out = apply_overrides(data, ["policy.*.lr=0.1", "policy.runner.lr=0.2"])
    assert out["policy"]["tagger"]["lr"] == 0.1 and out["policy"]["runner"]["lr"] == 0.2


@pytest.mark.parametrize("item", ["trainer.num_envs", "=3", "trainer..num_envs=3", "trainer.num_envs=[1,"])
def test_malformed_overrides(item):
    with pytest.raises(ConfigError, match="--set"):
        apply_overrides(minimal(), [item])


# --------------------------------------------------------------------------- loading files
def test_yaml_reads_scientific_notation_as_floats():
    assert parse_yaml("a: 3e-4\nb: 1e6\nc: 1.0e4\nd: 2_000\ne: 1.5\nf: -2E-3\ng: .5e1") == {
        "a": 3e-4, "b": 1e6, "c": 1e4, "d": 2000, "e": 1.5, "f": -2e-3, "g": 5.0,
    }
    assert parse_yaml("v: 1e-4x") == {"v": "1e-4x"}


def test_load_by_path_with_overrides_and_defaulted_name(tmp_path):
    path = tmp_path / "my_run.yaml"
    path.write_text(
        "env: {name: DummyEnv}\n"
        "trainer: {num_envs: 4, rollout_length: 5, total_steps: 1e3}\n"
        "policy: {shared: {lr: 3e-4}}\n"
    )
    config = load_config(path, ["trainer.num_envs=2"])
    assert config.name == "my_run" and config.saving.name == "my_run"
    assert config.trainer.total_steps == 1000 and config.trainer.num_envs == 2
    assert config.policy["shared"].lr == 3e-4
    assert load_config(str(path)) == load_config(path)


def test_load_errors(tmp_path):
    with pytest.raises(ConfigError, match="no config named 'cartpol'.*did you mean 'cartpole'"):
        load_config("cartpol")
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\ntrainer: {num_envs: 3\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(broken)
    listy = tmp_path / "listy.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(listy)
    bad = tmp_path / "bad.yaml"
    bad.write_text("env: {name: DummyEnv}\npolicy: {shared: {gamma: 3}}\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert str(bad) in str(info.value) and "policy.shared.gamma" in str(info.value)


# --------------------------------------------------------------------------- shipped configs
EXPECTED_SHIPPED = {
    "tag_continuous", "tag_continuous_small", "tag_gridworld", "cartpole", "acrobot", "mountain_car",
    "continuous_mountain_car", "pendulum", "dummy_env",
}


def test_every_example_env_has_a_shipped_config():
    assert EXPECTED_SHIPPED <= set(SHIPPED)
    assert {load_config(name).env.name for name in SHIPPED} >= {
        "TagContinuous", "TagGridWorld", "DummyEnv", "CartPole", "Acrobot", "MountainCar",
        "ContinuousMountainCar", "Pendulum",
    }


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_config_validates_and_matches_its_env(name):
    config = load_config(name)
    assert config.name == name == config.saving.name
    assert config.trainer.num_iterations >= 1
    assert RunConfig.from_dict(config.to_dict()) == config
    # the file is the config: no key is silently defaulted by a typo (strict schema) and tags fit the env
    env = get_env_class(config.env.name)(**config.env.config)
    groups = env.agent_groups()
    tags = list(config.policy)
    assert len(tags) == 1 or set(tags) == set(groups), (tags, sorted(groups))
    agents = check_env(config)
    assert sorted(a for ids in agents.values() for a in ids) == list(range(env.num_agents))
    assert (CONFIG_DIR / f"{name}.yaml").read_text().startswith("# ")  # a one-line summary for `configs`


def test_make_train_config_is_small_ppo_tag():
    config = load_config("tag_continuous_small")
    assert set(config.policy) == {"tagger", "runner"}
    assert all(p.algorithm == "PPO" for p in config.policy.values())
    assert config.policy["tagger"].to_train  # the runner may stay frozen so the taggers' progress shows
    assert config.trainer.total_steps <= 1_000_000  # a few minutes on two CPU cores
    assert config.env.config["use_full_observation"] is False


def test_cartpole_config_is_the_one_its_comments_describe():
    """The shipped CartPole config stops once solved and uses the tuned values its comments give
    (benchmarks/learning.py measures what it reaches)."""
    config = load_config("cartpole")
    policy = config.policy["shared"]
    assert config.trainer.stop_at_return == 475 and config.trainer.stop_eval_episodes == 100
    assert config.trainer.total_steps == 150_000
    assert policy.lr == {"type": "linear", "start": 4e-3, "end": 0.0}
    assert (policy.num_epochs, policy.num_minibatches, policy.clip_param, policy.entropy_coef) == (4, 4, 0.2, 0.0)
    assert config.trainer.num_envs * config.trainer.rollout_length // policy.num_minibatches == 256
    assert policy.model.fc_dims == [64, 64] and policy.model.activation == "tanh"


def test_an_unset_opt_in_key_is_left_out_of_a_saved_config():
    for key in ("stop_at_return", "stop_eval_episodes"):
        assert key not in load_config("tag_continuous_small").to_dict()["trainer"]
    assert load_config("cartpole").to_dict()["trainer"]["stop_at_return"] == 475
    assert load_config("cartpole").to_dict()["trainer"]["stop_eval_episodes"] == 100


# --------------------------------------------------------------------------- env checks
def test_policy_agents():
    groups = {"tagger": [3, 1], "runner": [0, 2, 4]}
    assert policy_agents(["shared"], groups) == {"shared": [0, 1, 2, 3, 4]}
    assert policy_agents(["runner", "tagger"], groups) == {"runner": [0, 2, 4], "tagger": [1, 3]}
    with pytest.raises(ConfigError, match=r"missing \['runner'\].*not a group \['chaser'\]"):
        policy_agents(["tagger", "chaser"], groups)


def test_check_env_reports_bad_names_and_constructor_arguments():
    config = RunConfig.from_dict(with_keys(minimal(), env__name="CartPol"))
    with pytest.raises(ConfigError, match="env.name: no environment named 'CartPol'; did you mean 'CartPole'"):
        check_env(config)
    config = RunConfig.from_dict(with_keys(minimal(), env__config={"episode_lenght": 5}))
    with pytest.raises(ConfigError, match="env.config: CartPole.*episode_lenght"):
        check_env(config)
    data = minimal()
    data["policy"] = {"a": {}, "b": {}}
    with pytest.raises(ConfigError, match="agent groups"):
        check_env(RunConfig.from_dict(data))

"""The sections of a run config, one dataclass each, and how a mapping is validated into one.

A policy section's type is its ``algorithm``'s (:data:`POLICY_SECTIONS`, default PPO):
:class:`OnPolicyConfig` (A2C, PPO: ``ppo_trainer.py``) or :class:`DDPGPolicyConfig`
(``ddpg.py``), the keys every trainer reads plus the family's, with its own model
section. A resolved ``config.yaml`` lists only its algorithm's keys, each key has one
default, and another family's key (in a file or through ``--set``) is an error naming
the key, the policy and the algorithm it belongs to -- except that a mapping read by
``RunConfig.from_dict`` (a run saved before the split listed both families' keys at
their defaults) drops such a key when it holds exactly its default: it changes nothing.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping

from warp_drive.backend_names import BACKEND_NAMES
from warp_drive.data_values import DEFAULT_RESET_POOL_SIZE
from warp_drive.training.config_values import (
    ConfigError,
    _any_str,
    _bool,
    _float,
    _got,
    _int,
    _join,
    _learning_rate,
    _mapping,
    _optional,
    _schedule,
    _str,
    _unknown_key_message,
)
from warp_drive.training.config_models import DDPGModelConfig, ModelConfig, _f, _section

ALGORITHMS = ("A2C", "PPO", "DDPG")
DEFAULT_ALGORITHM = "PPO"
_algorithm = _str(ALGORITHMS, str.upper)  # every policy type's check: its type is chosen before it is built
BACKENDS = BACKEND_NAMES  # "cpu-gpu" included: the cpu executor in the GPU's shape
# Policy tags name metrics, checkpoint entries and per-policy arrays.
_TAG_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def default_of(cls: type, key: str) -> Any:
    """The default of section ``cls``'s field ``key`` (the one place it is written)."""
    f = _fields(cls)[key]
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


# --------------------------------------------------------------------------- policies
@dataclass
class PolicyConfig:
    """The keys every algorithm reads; a policy is an :class:`OnPolicyConfig` or a :class:`DDPGPolicyConfig`."""

    algorithm: str = _f(DEFAULT_ALGORITHM, _algorithm)
    gamma: float = _f(0.99, _float(0.0, 1.0))
    lr: float | dict | list = _f(3e-4, _learning_rate)  # DDPG: the actor's
    max_grad_norm: float | None = _f(0.5, _optional(_float(positive=True), "no clipping"))
    to_train: bool = _f(True, _bool)

    def __post_init__(self) -> None:
        if type(self) is PolicyConfig:
            raise TypeError("PolicyConfig holds the keys common to every algorithm; build OnPolicyConfig (A2C, "
                            "PPO) or DDPGPolicyConfig, or policy_config_type(algorithm)")


CRITIC_INPUTS = ("local", "state", "concat_obs")
SHARING = ("group", "agent")  # one set of weights for the policy's agents, or one per agent (batched)


@dataclass
class OnPolicyConfig(PolicyConfig):
    """An A2C or PPO policy (``trainer.py``). PPO-only keys are ignored by A2C, except epochs/minibatches (_check)."""

    gae_lambda: float = _f(0.95, _float(0.0, 1.0))
    entropy_coef: float | dict | list = _f(0.01, _schedule)
    vf_coef: float = _f(0.5, _float(minimum=0.0))
    normalize_advantage: bool = _f(True, _bool)
    clip_param: float = _f(0.2, _float(positive=True))
    clip_value_loss: bool = _f(False, _bool)
    num_epochs: int = _f(4, _int(minimum=1))
    num_minibatches: int = _f(4, _int(minimum=1))
    target_kl: float | None = _f(None, _optional(_float(positive=True), "no early stop"))
    # The critic learns returns scaled by their running mean and std (MAPPO's value normalisation).
    value_normalization: bool = _f(False, _bool)
    critic_input: str = _f("local", _str(CRITIC_INPUTS, str.lower))  # local: IPPO; state, concat_obs: MAPPO
    agent_id_input: bool = _f(False, _bool)  # the agent's one-hot index after its observation (shared weights)
    max_concat_obs_width: int = _f(1024, _int(minimum=1))  # concat_obs wider than this is refused
    share: str = _f("group", _str(SHARING, str.lower))
    # A recurrent model (model.type: gru): PPO replays sequences of this many steps (None: the whole rollout).
    sequence_length: int | None = _f(None, _optional(_int(minimum=1), "rollout_length"))
    model: ModelConfig = _section(ModelConfig)

    @staticmethod
    def _check(built: dict, raw: Mapping, path: str, errors: list[str]) -> None:
        # A2C is one gradient step per batch: force 1/1 when left out, refuse anything else.
        if built.get("algorithm") != "A2C":
            return
        for key in ("num_epochs", "num_minibatches"):
            if key in raw and key in built and built[key] != 1:
                errors.append(f"{path}.{key}: A2C does one epoch on one minibatch, so {key} must be 1 "
                              f"(or left out), got {raw[key]!r}; use algorithm: PPO for several")
            built[key] = 1


@dataclass
class DDPGPolicyConfig(PolicyConfig):
    """A DDPG policy (``training/ddpg.py`` documents each key)."""

    algorithm: str = _f("DDPG", _algorithm)
    tau: float = _f(0.005, _float(0.0, 1.0))  # soft target update: target <- (1 - tau) target + tau online
    critic_lr: float | dict | list | None = _f(None, _optional(_learning_rate, "lr"))
    replay_buffer_size: int = _f(1_000_000, _int(minimum=1))  # transitions (one per agent per env step)
    batch_size: int = _f(256, _int(minimum=1))  # transitions per gradient step
    updates_per_iteration: int | None = _f(None, _optional(_int(minimum=1), "rollout_length"))
    warmup_steps: int = _f(10_000, _int(minimum=0))  # env steps of uniform random actions before learning
    noise_stddev: float = _f(0.1, _float(minimum=0.0))  # in units of half the action range
    noise_damping: float | None = _f(None, _optional(_float(0.0, 1.0), "Gaussian noise"))
    n_step: int = _f(1, _int(minimum=1))
    model: DDPGModelConfig = _section(DDPGModelConfig)

    @classmethod
    def _check(cls, built: dict, raw: Mapping, path: str, errors: list[str]) -> None:
        size = built.get("replay_buffer_size", default_of(cls, "replay_buffer_size"))
        batch = built.get("batch_size", default_of(cls, "batch_size"))
        if size < batch:
            errors.append(f"{path}.replay_buffer_size: {size:,} transitions cannot fill a batch_size of "
                          f"{batch:,}; raise replay_buffer_size or lower batch_size")
        if built.get("tau") == 0.0:
            errors.append(f"{path}.tau: 0 would never move the target networks; use a rate in (0, 1]")
        model_type = getattr(built.get("model"), "type", "fully_connected")
        if model_type != "fully_connected":
            errors.append(f"{path}.model.type: DDPG builds its own fully connected actor and critic, so "
                          f"{model_type!r} would be ignored; remove model.type, or use algorithm: PPO")
        if built.get("noise_damping") == 0.0:
            errors.append(f"{path}.noise_damping: 0 makes the Ornstein-Uhlenbeck noise a random walk that "
                          f"never decays; use a damping in (0, 1], or null for Gaussian noise")


# The section type of each algorithm; POLICY_TYPES: each once (``--set`` walks all, then checks the policy's).
POLICY_SECTIONS: dict[str, type] = {"A2C": OnPolicyConfig, "PPO": OnPolicyConfig, "DDPG": DDPGPolicyConfig}
POLICY_TYPES: tuple[type, ...] = tuple(dict.fromkeys(POLICY_SECTIONS.values()))


def policy_config_type(algorithm: str) -> type:
    """The policy section type of ``algorithm`` (case-insensitive): OnPolicyConfig or DDPGPolicyConfig."""
    return POLICY_SECTIONS[algorithm.upper()]


def _model_of(policy_type: type) -> type:  # its model section's type
    return _fields(policy_type)["model"].metadata["section"]


def _foreign(algorithm: str, keys: list[str]) -> tuple[str, tuple[str, ...], Any] | None:
    """(path, algorithms, default there) of a key path below a policy of ``algorithm`` (``["tau"]``,
    ``["model", "critic_fc_dims"]``) that only other algorithms' sections have; else None."""
    own = POLICY_SECTIONS[algorithm]
    levels = [(own, keys[0], keys[0])]
    if keys[0] == "model" and len(keys) > 1:
        levels.append((_model_of(own), keys[1], f"model.{keys[1]}"))
    for level, (cls, key, shown) in enumerate(levels):
        if key in _fields(cls):
            continue
        for other in POLICY_TYPES:
            section = (other, _model_of(other))[level]
            if key in _fields(section):
                return shown, tuple(a for a, t in POLICY_SECTIONS.items() if t is other), default_of(section, key)
    return None


def _foreign_message(tag: str, algorithm: str, found: tuple[str, tuple[str, ...], Any]) -> str:
    key, owners, _ = found
    return (f"policy.{tag}.{key}: a key of {'/'.join(owners)}, but policy {tag!r} uses {algorithm}, which has "
            f"no {key}; remove it, or set policy.{tag}.algorithm to {' or '.join(owners)}")


def _algorithm_of(section: Any) -> str | None:
    """The valid algorithm of a raw policy section (its default when absent); None when it has none valid."""
    value = section.get("algorithm", DEFAULT_ALGORITHM) if isinstance(section, Mapping) else None
    return value.upper() if isinstance(value, str) and value.upper() in POLICY_SECTIONS else None


def foreign_override(section: Any, tag: str, keys: list[str]) -> str | None:
    """Why ``--set policy.<tag>.<keys>`` is refused: a key of another algorithm than the policy's; else None."""
    algorithm = _algorithm_of(section)
    found = _foreign(algorithm, keys) if algorithm else None
    return None if found is None else _foreign_message(tag, algorithm, found)


def _same(value: Any, default: Any) -> bool:
    """``value == default``, a bool not being a number (``true`` is not ``1``)."""
    return isinstance(value, bool) == isinstance(default, bool) and value == default


def _policy_section(tag: str, raw: Any, errors: list[str]) -> tuple[type, Any]:
    """The type of policy section ``raw`` (by its algorithm), and ``raw`` without other algorithms' keys:
    each is an error unless it holds exactly its default (see the module docstring); with an invalid
    algorithm (which the build reports) none is."""
    algorithm = _algorithm_of(raw)
    cls = POLICY_SECTIONS[algorithm or DEFAULT_ALGORITHM]
    if not isinstance(raw, Mapping):
        return cls, raw
    out = dict(raw)
    paths = [[key] for key in out]
    if isinstance(out.get("model"), Mapping):
        out["model"] = dict(out["model"])
        paths += [["model", key] for key in out["model"]]
    for keys in paths:
        found = _foreign(algorithm or DEFAULT_ALGORITHM, keys)
        if found is None:
            continue
        value = (out["model"] if len(keys) == 2 else out).pop(keys[-1])
        if algorithm is not None and not _same(value, found[2]):
            errors.append(_foreign_message(tag, algorithm, found))
    return cls, out


# --------------------------------------------------------------------------- the other sections
@dataclass
class TrainerConfig:
    """Sizes of the run. One iteration = ``rollout_length`` steps of each of ``num_envs`` replicas."""

    num_envs: int = _f(100, _int(minimum=1))
    rollout_length: int = _f(32, _int(minimum=1))
    total_steps: int = _f(1_000_000, _int(minimum=1))
    seed: int = _f(0, _int(minimum=0))
    backend: str = _f("auto", _str(BACKENDS, str.lower))
    # A NaN or inf in a rollout, loss or gradient: "raise" stops the run before
    # the update (nothing is saved); "skip" drops that update with a warning.
    on_nonfinite: str = _f("raise", _str(("raise", "skip"), str.lower))
    # A model parameter larger than this in magnitude has exploded (A2C at lr 3e37 saved +-3e37 weights that
    # evaluated to a plausible 9.5): such a checkpoint is not saved (the run stops, the previous checkpoint
    # stays latest) and evaluate and --resume refuse one. None: no bound.
    max_weight_magnitude: float | None = _f(1e6, _optional(_float(positive=True), "no bound on the weights"))
    # Stop early once every trained policy's mean return per agent over (at least) its 20 most recent training
    # episodes reaches this (e.g. CartPole's "solved", 475); None: train for total_steps.
    stop_at_return: float | None = _f(None, _optional(_float(), "train for total_steps"))
    # With stop_at_return: stop only once a greedy evaluation of this many episodes (envs of their own, seeded
    # apart) also averages the target; None: the training episodes decide alone (training/stop_at_return.py).
    stop_eval_episodes: int | None = _f(None, _optional(_int(minimum=1), "no evaluation before stopping"))

    @property
    def train_batch_size(self) -> int:
        """Env steps per iteration (each env step carries all agents of the replica)."""
        return self.num_envs * self.rollout_length

    @property
    def num_iterations(self) -> int:
        return self.total_steps // self.train_batch_size

    @staticmethod
    def _check(built: dict, raw: Mapping, path: str, errors: list[str]) -> None:
        if built.get("stop_eval_episodes") is not None and built.get("stop_at_return", None) is None:
            errors.append(f"{path}.stop_eval_episodes: an evaluation before stopping needs a target; set "
                          f"{path}.stop_at_return too, or turn both off ({path}.stop_eval_episodes=null)")
        if not all(k in built for k in ("num_envs", "rollout_length", "total_steps")):
            return  # a bad size was reported already
        batch = built["num_envs"] * built["rollout_length"]
        if built["total_steps"] < batch:
            errors.append(
                f"{path}.total_steps: {built['total_steps']:,} env steps is less than one iteration, which takes "
                f"num_envs * rollout_length = {built['num_envs']} * {built['rollout_length']} = {batch:,} env steps; "
                f"raise total_steps to at least {batch:,} or shrink num_envs / rollout_length"
            )


@dataclass
class EnvConfig:
    """A registered env name, its constructor keyword arguments (checked by the env itself) and how many
    host-drawn start states each of its reset pools holds (``reset_pool_size``, for envs with
    ``get_reset_pools``; 0: no pools, envs that honour it start from their twins; envs with a reset kernel
    draw every start on the device and need none)."""

    name: str = _f("", _str())
    config: dict = _f({}, _mapping)
    reset_pool_size: int = _f(DEFAULT_RESET_POOL_SIZE, _int(minimum=0))

    @staticmethod
    def _check(built: dict, raw: Mapping, path: str, errors: list[str]) -> None:
        if "name" not in raw:
            errors.append(f"{path}.name: required (a registered environment, see `warp-drive envs`, or your own as package.module:Class)")


@dataclass
class SavingConfig:
    """Where the run writes and how often. Run dir: ``<basedir>/<name>/<tag>/<timestamp>``."""

    metrics_log_freq: int = _f(1, _int(minimum=1))
    model_params_save_freq: int = _f(10, _int(minimum=1))
    basedir: str = _f("runs", _str())
    name: str = _f("", _any_str)  # "" -> the top-level name; relative, inside basedir
    tag: str = _f("experiment", _str())  # relative, inside basedir/name
    keep_checkpoints: int = _f(5, _int(minimum=0))  # the newest K checkpoints are kept; 0 keeps every one
    # Weights & Biases (also `warp-drive train --track`): enabled, project, entity, mode, group, tags, name
    wandb: dict = _f({}, _mapping)

    @staticmethod
    def _check(built: dict, raw: Mapping, path: str, errors: list[str]) -> None:
        for key in ("name", "tag"):
            if key in built:
                problem = _escapes_basedir(built[key])
                if problem:
                    errors.append(f"{_join(path, key)}: {problem}, got {built[key]!r}; the run directory is "
                                  f"<basedir>/<name>/<tag>/<timestamp> and must stay inside saving.basedir")


def _escapes_basedir(part: str) -> str | None:
    """Why ``part`` (saving.name or saving.tag) would put the run directory outside ``basedir``; None if it does not."""
    if part.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", part):
        return "must be a relative path"
    if any(p == ".." for p in re.split(r"[/\\]", part)):
        return "must not contain '..'"
    return None


# --------------------------------------------------------------------------- building
def _build(cls: type, raw: Any, path: str, errors: list[str]) -> Any:
    """Validate mapping ``raw`` into dataclass ``cls``, appending messages to ``errors``.

    Returns the instance, or None when this section had errors (the caller
    raises once everything has been looked at, so the user sees every problem).
    """
    where = path or "config"
    if raw is None:
        raw = {}  # an empty section (`saving:`) means all defaults
    if not isinstance(raw, Mapping):
        errors.append(f"{where}: expected a mapping of keys to values, {_got(raw)}")
        return None
    fields = _fields(cls)
    n_errors = len(errors)
    for key in raw:
        if key not in fields:
            errors.append(_unknown_key_message(path, key, fields))
    built: dict[str, Any] = {}
    for name, f in fields.items():
        if name not in raw:
            continue
        value, key_path = raw[name], _join(path, name)
        if "section" in f.metadata:
            section = _build(f.metadata["section"], value, key_path, errors)
            if section is not None:
                built[name] = section
        elif "policies" in f.metadata:
            policies = _build_policies(value, key_path, errors)
            if policies is not None:
                built[name] = policies
        else:
            try:
                built[name] = f.metadata["check"](value, key_path)
            except ConfigError as exc:
                errors.extend(exc.errors)
    check = getattr(cls, "_check", None)
    if check is not None:
        check(built, raw, path, errors)
    if len(errors) > n_errors:
        return None
    return cls(**built)


def _build_policies(raw: Any, path: str, errors: list[str]) -> dict | None:
    if not isinstance(raw, Mapping):
        errors.append(f"{path}: expected a mapping of policy tags to policy sections, {_got(raw)}")
        return None
    out, ok = {}, True
    for tag, section in raw.items():
        if not (isinstance(tag, str) and _TAG_PATTERN.match(tag)):
            errors.append(f"{path}: policy tag {tag!r} must be an identifier (letters, digits, _)")
            ok = False
            continue
        n_errors = len(errors)
        cls, section = _policy_section(tag, section, errors)
        policy = _build(cls, section, f"{path}.{tag}", errors)
        ok = ok and policy is not None and len(errors) == n_errors
        out[tag] = policy
    return out if ok else None

"""The policy sections of a run config (``policy.<tag>``) and their models, one type per algorithm family.

A policy section's type is its ``algorithm``'s (:data:`POLICY_SECTIONS`, default PPO):
:class:`OnPolicyConfig` (A2C, PPO) or :class:`DDPGPolicyConfig`, each the keys every algorithm reads
(:class:`PolicyConfig`, inherited, so each has one default) plus the family's, with its own model
section. A resolved ``config.yaml`` lists only its algorithm's keys, and another family's key (in a
file or through ``--set``) is an error naming the key, the policy and the algorithm it belongs to --
except that a section read from a mapping (a run saved before the split listed both families' keys at
their defaults) drops such a key when it holds exactly its default: it changes nothing.
"""

import re
from typing import Annotated, Any, ClassVar, Mapping

from pydantic import Field, PlainValidator, SerializeAsAny, ValidationError, model_validator

from warp_drive.training.algorithm import ALGORITHMS as ALGORITHM_TABLE  # imports no torch
from warp_drive.training.config.errors import found_in, got, problem, problems
from warp_drive.training.config.schedule_spec import LearningRate, Schedule
from warp_drive.training.config.section import Section, field_default
from warp_drive.training.config.values import (FreeMapping, Flag, LayerSizes, ModelType, choice, integer, number,
                                               or_null)

ALGORITHMS = tuple(ALGORITHM_TABLE)  # training/algorithm.py: each algorithm and the section it reads
DEFAULT_ALGORITHM = "PPO"
ACTIVATIONS = ("tanh", "relu")
CRITIC_INPUTS = ("local", "state", "concat_obs")
SHARING = ("group", "agent")
TAG_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # tags name metrics, checkpoint entries, per-policy arrays
Algorithm = choice(ALGORITHMS, case="upper")


# --------------------------------------------------------------------------- models
class NetworkConfig(Section):
    """The model keys of every algorithm."""

    type: ModelType = "fully_connected"
    """A key of the model registry: ``fully_connected``, ``gru`` (a GRU after the encoder, for the actor and
    the critic) or one registered with ``warp_drive.training.models.register_model``."""
    fc_dims: LayerSizes = [64, 64]
    """Hidden layer sizes (DDPG: the actor's)."""
    activation: choice(ACTIVATIONS) = "tanh"
    """The hidden layers' activation."""
    obs_normalization: Flag = False
    """Observations scaled by their running mean and std before the network."""


class ModelConfig(NetworkConfig):
    """An A2C/PPO policy's actor-critic network."""

    shared_trunk: Flag = False
    """One trunk for the actor and the critic (false: each its own, so value gradients never disturb the
    policy's features)."""
    log_std_init: number() = 0.0
    """The initial log standard deviation of a Box action's Gaussian."""
    gru_hidden: integer(1) = 64
    """``type: gru``: the GRU's state size per agent (actor and critic each)."""
    extra: FreeMapping = {}
    """Free-form keys for a user-registered model (not checked here)."""


class DDPGModelConfig(NetworkConfig):
    """A DDPG policy's actor (``fc_dims``) and critic networks."""

    critic_fc_dims: or_null(LayerSizes, "fc_dims") = None
    """The critic's (and its target's) hidden layer sizes."""
    shared_trunk: ClassVar[bool] = False  # not a key: the actor reads s, the critic (s, a) (DDPGModel reads it)


# --------------------------------------------------------------------------- policies
class PolicyConfig(Section):
    """The keys every algorithm reads; a policy is an :class:`OnPolicyConfig` or a :class:`DDPGPolicyConfig`."""

    algorithm: Algorithm = DEFAULT_ALGORITHM
    """A2C, PPO or DDPG (case-insensitive); it decides which other keys the section has."""
    gamma: number(0.0, 1.0) = 0.99
    """The discount factor."""
    lr: LearningRate = 3e-4
    """The learning rate, a schedule over env steps (DDPG: the actor's)."""
    max_grad_norm: or_null(number(positive=True), "no clipping") = 0.5
    """Gradients are clipped to this global norm (DDPG: each network's)."""
    to_train: Flag = True
    """false: the policy acts but is not updated."""

    def model_post_init(self, context: Any) -> None:
        if type(self) is PolicyConfig:
            raise TypeError("PolicyConfig holds the keys common to every algorithm; build OnPolicyConfig (A2C, "
                            "PPO) or DDPGPolicyConfig, or policy_config_type(algorithm)")


class OnPolicyConfig(PolicyConfig):
    """An A2C or PPO policy. A2C does one epoch on one minibatch; the other PPO-only keys it ignores."""

    gae_lambda: number(0.0, 1.0) = 0.95
    """GAE's lambda (1: discounted returns minus the value)."""
    entropy_coef: Schedule = 0.01
    """The entropy bonus's weight, a schedule over env steps."""
    vf_coef: number(minimum=0.0) = 0.5
    """The value loss's weight."""
    normalize_advantage: Flag = True
    """Advantages scaled to zero mean and unit std per minibatch."""
    clip_param: number(positive=True) = 0.2
    """PPO's ratio clip."""
    clip_value_loss: Flag = False
    """The value loss clipped around the rollout's values, as PPO's ratio."""
    num_epochs: integer(1) = 4
    """PPO: passes over each rollout (A2C: 1)."""
    num_minibatches: integer(1) = 4
    """PPO: minibatches per epoch (A2C: 1); each holds at least one env step."""
    target_kl: or_null(number(positive=True), "no early stop") = None
    """PPO stops an update's epochs once the approximate KL divergence passes this."""
    value_normalization: Flag = False
    """The critic learns returns scaled by their running mean and std (MAPPO's value normalisation)."""
    critic_input: choice(CRITIC_INPUTS) = "local"
    """local (the agent's observation: IPPO), state (the env's state arrays) or concat_obs (the policy's
    agents' observations side by side): MAPPO's centralised critic."""
    agent_id_input: Flag = False
    """The agent's one-hot index after its observation (agents sharing weights can act differently)."""
    max_concat_obs_width: integer(1) = 1024
    """``critic_input: concat_obs`` wider than this is refused."""
    share: choice(SHARING) = "group"
    """group: one network for the policy's agents; agent: a network per agent (batched layers)."""
    sequence_length: or_null(integer(1), "rollout_length") = None
    """A recurrent model (``model.type: gru``): PPO replays sequences of this many steps."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The actor-critic network."""

    @model_validator(mode="wrap")
    @classmethod
    def _a2c_is_one_gradient_step(cls, data: Any, validate: Any) -> "OnPolicyConfig":
        """A2C is one gradient step per batch: 1/1 when left out, anything else refused (showing it as written)."""
        policy = validate(data)
        if policy.algorithm != "A2C":
            return policy
        refused = [((key,), f"A2C does one epoch on one minibatch, so {key} must be 1 (or left out), got "
                            f"{data[key]!r}; use algorithm: PPO for several", data[key])
                   for key in ("num_epochs", "num_minibatches")
                   if key in policy.model_fields_set and getattr(policy, key) != 1]
        if refused:
            raise problems(refused)
        policy.num_epochs = policy.num_minibatches = 1
        return policy


class DDPGPolicyConfig(PolicyConfig):
    """A DDPG policy (``warp_drive.training.ddpg`` documents each key)."""

    algorithm: Algorithm = "DDPG"
    """DDPG."""
    tau: number(0.0, 1.0) = 0.005
    """Soft target update: target <- (1 - tau) target + tau online, after every gradient step."""
    critic_lr: or_null(LearningRate, "lr") = None
    """The critic's learning rate, a schedule over env steps."""
    replay_buffer_size: integer(1) = 1_000_000
    """Transitions the replay buffer holds (one per agent per env step)."""
    batch_size: integer(1) = 256
    """Transitions per gradient step."""
    updates_per_iteration: or_null(integer(1), "rollout_length") = None
    """Gradient steps per iteration."""
    warmup_steps: integer(0) = 10_000
    """Env steps of uniform random actions before learning."""
    noise_stddev: number(minimum=0.0) = 0.1
    """Exploration noise, in units of half the action range."""
    noise_damping: or_null(number(0.0, 1.0), "Gaussian noise") = None
    """Ornstein-Uhlenbeck noise with this damping."""
    n_step: integer(1) = 1
    """Steps of an n-step return."""
    model: DDPGModelConfig = Field(default_factory=DDPGModelConfig)
    """The actor and critic networks."""

    @model_validator(mode="after")
    def _can_learn(self) -> "DDPGPolicyConfig":
        refused = []
        if self.replay_buffer_size < self.batch_size:
            refused.append(("replay_buffer_size", f"{self.replay_buffer_size:,} transitions cannot fill a batch_size "
                                                  f"of {self.batch_size:,}; raise replay_buffer_size or lower "
                                                  f"batch_size"))
        if self.tau == 0.0:
            refused.append(("tau", "0 would never move the target networks; use a rate in (0, 1]"))
        if self.model.type != "fully_connected":
            refused.append(("model.type", f"DDPG builds its own fully connected actor and critic, so "
                                          f"{self.model.type!r} would be ignored; remove model.type, or use "
                                          f"algorithm: PPO"))
        if self.noise_damping == 0.0:
            refused.append(("noise_damping", "0 makes the Ornstein-Uhlenbeck noise a random walk that never "
                                             "decays; use a damping in (0, 1], or null for Gaussian noise"))
        if refused:
            raise problems((tuple(key.split(".")), message, None) for key, message in refused)
        return self


# --------------------------------------------------------------------------- one type per algorithm
# The section type of each algorithm; POLICY_TYPES: each once (``--set`` walks all, then checks the policy's).
POLICY_SECTIONS: dict[str, type[PolicyConfig]] = {
    name: {"on_policy": OnPolicyConfig, "ddpg": DDPGPolicyConfig}[section] for name, (_, section) in ALGORITHM_TABLE.items()}
POLICY_TYPES: tuple[type[PolicyConfig], ...] = tuple(dict.fromkeys(POLICY_SECTIONS.values()))


def policy_config_type(algorithm: str) -> type[PolicyConfig]:
    """The policy section type of ``algorithm`` (case-insensitive): OnPolicyConfig or DDPGPolicyConfig."""
    return POLICY_SECTIONS[algorithm.upper()]


def algorithm_of(section: Any) -> str | None:
    """The valid algorithm of a raw policy section (its default when absent); None when it has none valid."""
    value = section.get("algorithm", DEFAULT_ALGORITHM) if isinstance(section, Mapping) else DEFAULT_ALGORITHM
    return value.upper() if isinstance(value, str) and value.upper() in POLICY_SECTIONS else None


def _as_its_algorithms_section(section: Any) -> PolicyConfig:
    if isinstance(section, PolicyConfig):
        return section
    return POLICY_SECTIONS[algorithm_of(section) or DEFAULT_ALGORITHM].model_validate(section)


# A policy section validated as its algorithm's type, and written out (to_dict) with that type's keys.
Policy = Annotated[SerializeAsAny[PolicyConfig], PlainValidator(_as_its_algorithms_section)]


def _model_of(policy_type: type[PolicyConfig]) -> type[Section]:
    return policy_type.model_fields["model"].annotation


def foreign_key(algorithm: str, keys: list[str]) -> tuple[str, tuple[str, ...], Any] | None:
    """(path, algorithms, default there) of a key path below a policy of ``algorithm`` (``["tau"]``,
    ``["model", "critic_fc_dims"]``) that only other algorithms' sections have; else None."""
    own = POLICY_SECTIONS[algorithm]
    levels = [(own, keys[0], keys[0])]
    if keys[0] == "model" and len(keys) > 1:
        levels.append((_model_of(own), keys[1], f"model.{keys[1]}"))
    for level, (section, key, shown) in enumerate(levels):
        if key in section.model_fields:
            continue
        for other in POLICY_TYPES:
            holder = (other, _model_of(other))[level]
            if key in holder.model_fields:
                owners = tuple(a for a, t in POLICY_SECTIONS.items() if t is other)
                return shown, owners, field_default(holder, key)
    return None


def foreign_message(tag: str, algorithm: str, found: tuple[str, tuple[str, ...], Any]) -> str:
    """What is wrong with the key ``found`` (:func:`foreign_key`) in policy ``tag``, after ``its.path: ``."""
    key, owners, _ = found
    return (f"a key of {'/'.join(owners)}, but policy {tag!r} uses {algorithm}, which has no {key}; remove it, "
            f"or set policy.{tag}.algorithm to {' or '.join(owners)}")


def foreign_override(section: Any, tag: str, keys: list[str]) -> str | None:
    """Why ``--set policy.<tag>.<keys>`` is refused: a key of another algorithm than the policy's; else None."""
    algorithm = algorithm_of(section)
    found = foreign_key(algorithm, keys) if algorithm else None
    return None if found is None else f"policy.{tag}.{found[0]}: {foreign_message(tag, algorithm, found)}"


def _same(value: Any, default: Any) -> bool:
    """``value == default``, a bool not being a number (``true`` is not ``1``)."""
    return isinstance(value, bool) == isinstance(default, bool) and value == default


def _without_foreign_keys(tag: str, raw: Any) -> tuple[Any, list]:
    """``raw`` without other algorithms' keys, and the errors of those that do not hold exactly their default
    (see the module docstring); with an invalid algorithm (which its section reports) none is an error."""
    if not isinstance(raw, Mapping):
        return raw, []
    algorithm = algorithm_of(raw)
    out = dict(raw)
    paths = [[key] for key in out]
    if isinstance(out.get("model"), Mapping):
        out["model"] = dict(out["model"])
        paths += [["model", key] for key in out["model"]]
    refused = []
    for keys in paths:
        found = foreign_key(algorithm or DEFAULT_ALGORITHM, keys)
        if found is None:
            continue
        value = (out["model"] if len(keys) == 2 else out).pop(keys[-1])
        if algorithm is not None and not _same(value, found[2]):
            refused.append(((tag, *keys), foreign_message(tag, algorithm, found), value))
    return out, refused


def validate_policies(value: Any, validate: Any) -> dict[str, PolicyConfig]:
    """``policy``: one section per tag, each of its algorithm's type (``validate``: pydantic's, of the map)."""
    if not isinstance(value, Mapping):
        raise problem(f"expected a mapping of policy tags to policy sections, {got(value)}")
    if not value:
        raise problem("needs at least one policy section, e.g. {shared: {algorithm: PPO}}")
    refused, sections = [], {}
    for tag, section in value.items():
        if not (isinstance(tag, str) and TAG_PATTERN.match(tag)):
            refused.append(((), f"policy tag {tag!r} must be an identifier (letters, digits, _)", tag))
            continue
        sections[tag], foreign = _without_foreign_keys(tag, section)
        refused += foreign
    try:
        policies = validate(sections)
    except ValidationError as exc:
        refused += found_in(exc)
    if refused:
        raise problems(refused)
    return policies

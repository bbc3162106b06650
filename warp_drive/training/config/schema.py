"""A whole run config: :class:`RunConfig` and its sections ``env``, ``trainer``, ``saving`` (the policy
sections are ``policies.py``'s).

Rules kept deliberately strict, because each one hides a real mistake: unknown keys are errors (with a
"did you mean"), except inside the free-form ``env.config`` (the env constructor checks those) and
``model.extra``; ``total_steps`` must cover at least one iteration (``num_envs * rollout_length`` env
steps; the original raised a bare ZeroDivisionError); a minibatch holds at least one env step.
"""

import re
from typing import Any, ClassVar, Mapping

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from warp_drive.runtime.backend_names import BACKEND_NAMES
from warp_drive.runtime.data_values import DEFAULT_RESET_POOL_SIZE
from warp_drive.training.config.errors import ConfigError, messages, problems
from warp_drive.training.config.policies import OnPolicyConfig, Policy, PolicyConfig, validate_policies
from warp_drive.training.config.section import Section, field_default
from warp_drive.training.config.values import AnyText, FreeMapping, Text, choice, integer, number, or_null

BACKENDS = BACKEND_NAMES  # "cpu-gpu" included: the cpu executor in the GPU's shape

# Keys whose default (None) turns a feature off: left out of to_dict() while unset.
OPT_IN_KEYS = ("trainer.stop_at_return", "trainer.stop_eval_episodes")
# Keys added after runs were saved without them: left out of to_dict() while at their default.
DEFAULT_OMITTED_KEYS = ("trainer.max_weight_magnitude", "env.reset_pool_size")
# Keys ``--set`` may change when resuming a run (``train --resume``): how long it runs, how often it logs and
# saves, how many checkpoints it keeps, the bound on its weights, and where to look for it. Everything else is
# the run's own (its config.yaml): changing it mid-run would train something other than either config describes.
RESUMABLE_KEYS = (
    "trainer.total_steps",
    "trainer.stop_at_return",
    "trainer.stop_eval_episodes",
    "trainer.max_weight_magnitude",
    "saving.metrics_log_freq",
    "saving.model_params_save_freq",
    "saving.keep_checkpoints",
    "saving.basedir",
)


class TrainerConfig(Section):
    """Sizes of the run. One iteration = ``rollout_length`` steps of each of ``num_envs`` replicas."""

    num_envs: integer(1) = 100
    """Env replicas stepped in parallel."""
    rollout_length: integer(1) = 32
    """Steps of each env per iteration."""
    total_steps: integer(1) = 1_000_000
    """Env steps to train for (one env step carries all agents of the replica)."""
    seed: integer(0) = 0
    """Seeds the envs, the sampler and torch."""
    backend: choice(BACKENDS) = "auto"
    """The executor: auto (pycuda with a GPU, else cpu), cpu, cpu-gpu (the cpu executor in the GPU's shape)
    or pycuda."""
    on_nonfinite: choice(("raise", "skip")) = "raise"
    """A NaN or inf in a rollout, loss or gradient: raise stops the run before the update (nothing is saved);
    skip drops that update with a warning."""
    max_weight_magnitude: or_null(number(positive=True), "no bound on the weights") = 1e6
    """A model parameter larger than this in magnitude has exploded: such a checkpoint is not saved (the run
    stops) and evaluate and --resume refuse one."""
    stop_at_return: or_null(number(), "train for total_steps") = None
    """Stop once every trained policy's mean return per agent over its 20 most recent training episodes
    reaches this (e.g. CartPole's 475)."""
    stop_eval_episodes: or_null(integer(1), "no evaluation before stopping") = None
    """With stop_at_return: stop only once a greedy evaluation of this many episodes also averages the target."""

    @property
    def train_batch_size(self) -> int:
        """Env steps per iteration (each env step carries all agents of the replica)."""
        return self.num_envs * self.rollout_length

    @property
    def num_iterations(self) -> int:
        return self.total_steps // self.train_batch_size

    @model_validator(mode="after")
    def _sizes_fit(self) -> "TrainerConfig":
        refused = []
        if self.stop_eval_episodes is not None and self.stop_at_return is None:
            refused.append(("stop_eval_episodes", "an evaluation before stopping needs a target; set "
                                                  "trainer.stop_at_return too, or turn both off "
                                                  "(trainer.stop_eval_episodes=null)"))
        batch = self.train_batch_size
        if self.total_steps < batch:
            refused.append(("total_steps", f"{self.total_steps:,} env steps is less than one iteration, which takes "
                                           f"num_envs * rollout_length = {self.num_envs} * {self.rollout_length} = "
                                           f"{batch:,} env steps; raise total_steps to at least {batch:,} or shrink "
                                           f"num_envs / rollout_length"))
        if refused:
            raise problems(((key,), message, getattr(self, key)) for key, message in refused)
        return self


class EnvConfig(Section):
    """The environment: a registered name, its constructor's keyword arguments, its reset pools."""

    REQUIRED: ClassVar[dict[str, str]] = {
        "name": "a registered environment, see `warp-drive envs`, or your own as package.module:Class"}

    name: Text
    """A registered env (``warp-drive envs``), or your own as ``package.module:Class``."""
    config: FreeMapping = {}
    """The env constructor's keyword arguments, checked by the env itself (its parameter table)."""
    reset_pool_size: integer(0) = DEFAULT_RESET_POOL_SIZE
    """Host-drawn start states each reset pool holds, for envs with ``get_reset_pools`` (0: no pools; envs
    with a reset kernel draw every start on the device and need none)."""


def escapes_basedir(part: str) -> str | None:
    """Why ``part`` (saving.name or saving.tag) would put the run directory outside ``basedir``; None if it does not."""
    if part.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", part):
        return "must be a relative path"
    if any(p == ".." for p in re.split(r"[/\\]", part)):
        return "must not contain '..'"
    return None


class SavingConfig(Section):
    """Where the run writes and how often. Run dir: ``<basedir>/<name>/<tag>/<timestamp>``."""

    metrics_log_freq: integer(1) = 1
    """Iterations between metrics rows (metrics.csv, TensorBoard)."""
    model_params_save_freq: integer(1) = 10
    """Iterations between checkpoints."""
    basedir: Text = "runs"
    """The folder that holds every run."""
    name: AnyText = ""
    """The run's folder inside basedir, a relative path ("": the config's top-level name)."""
    tag: Text = "experiment"
    """A folder inside basedir/name, a relative path."""
    keep_checkpoints: integer(0) = 5
    """The newest K checkpoints are kept; 0 keeps every one."""
    wandb: FreeMapping = {}
    """Weights & Biases (also ``warp-drive train --track``): enabled, project, entity, mode, group, tags, name."""

    @model_validator(mode="after")
    def _inside_basedir(self) -> "SavingConfig":
        refused = [((key,), f"{problem}, got {getattr(self, key)!r}; the run directory is "
                            f"<basedir>/<name>/<tag>/<timestamp> and must stay inside saving.basedir", None)
                   for key in ("name", "tag") if (problem := escapes_basedir(getattr(self, key)))]
        if refused:
            raise problems(refused)
        return self


class RunConfig(Section):
    """A whole run; build it with :meth:`from_dict` or :func:`load_config` (they raise :class:`ConfigError`)."""

    REQUIRED: ClassVar[dict[str, str]] = {
        "name": "the run's name",
        "env": "{name: <registered env>, config: {...}}",
        "policy": "one section per policy tag, e.g. {shared: {algorithm: PPO}}",
    }

    name: Text
    """The run's name (a file's name without .yaml when the file has none)."""
    env: EnvConfig
    """The environment."""
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    """Sizes of the run."""
    policy: dict[str, Policy]
    """One section per policy tag: one tag for all agents, or one per agent group of the env."""
    saving: SavingConfig = Field(default_factory=SavingConfig)
    """Where the run writes and how often."""

    @field_validator("policy", mode="wrap")
    @classmethod
    def _one_section_per_policy(cls, value: Any, validate: Any) -> dict[str, PolicyConfig]:
        return validate_policies(value, validate)

    @model_validator(mode="after")
    def _sections_agree(self) -> "RunConfig":
        refused = []
        if not self.saving.name:  # the run's name names its directory under basedir
            problem = escapes_basedir(self.name)
            if problem:
                refused.append((("name",), f"{problem} when it names the run directory (saving.name is empty), "
                                           f"got {self.name!r}", self.name))
            self.saving.name = self.name
        for tag, policy in self.policy.items():  # a minibatch must hold at least one env step of the policy's agents
            if isinstance(policy, OnPolicyConfig) and policy.num_minibatches > self.trainer.train_batch_size:
                refused.append((("policy", tag, "num_minibatches"),
                                f"{policy.num_minibatches} minibatches do not fit in a batch of "
                                f"{self.trainer.train_batch_size} env steps (num_envs * rollout_length)", None))
        if refused:
            raise problems(refused)
        return self

    @classmethod
    def from_dict(cls, data: Mapping, source: str | None = None) -> "RunConfig":
        """Validate ``data`` (parsed YAML) into a RunConfig; every problem found is reported at once, one line
        each, in one :class:`ConfigError`. ``source`` (a file name) only labels the error message."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(messages(exc), source) from None

    def to_dict(self) -> dict:
        """Plain dicts, lists and scalars (YAML-safe); ``from_dict(to_dict())`` gives an equal config.
        Opt-in keys (``OPT_IN_KEYS``) appear only when set, and ``DEFAULT_OMITTED_KEYS`` only when not at their
        default, so a saved config.yaml of a run that does not use them reads as it did before they existed."""
        data = self.model_dump()
        for dotted in OPT_IN_KEYS:
            section, key = dotted.split(".")
            if data[section].get(key) is None:
                data[section].pop(key, None)
        for dotted in DEFAULT_OMITTED_KEYS:
            section, key = dotted.split(".")
            if key in data[section] and data[section][key] == field_default(type(getattr(self, section)), key):
                data[section].pop(key)
        return data

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def run_files(self) -> dict[str, str]:
        """Files a run writes beside its ``config.yaml``: none here; a config read from another format (a
        subclass of its dialect's) records how it was translated."""
        return {}


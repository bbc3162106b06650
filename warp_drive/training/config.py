"""Typed run configuration: YAML in, validated dataclasses out.

A run is described by one YAML file (``warp_drive/training/configs/<name>.yaml``
or any path) with five sections: ``name``, ``env``, ``trainer``, ``policy`` (one
section per policy tag) and ``saving``. :meth:`RunConfig.from_dict` turns the
parsed YAML into dataclasses and checks every value *before* anything is built,
so a typo fails in a second with a message naming the full key path, not after
a kernel compile with a ``KeyError`` deep inside the trainer (the original
WarpDrive merged dicts and read keys lazily, so misspelt keys were silently
ignored).

Rules kept deliberately strict, because each one hides a real mistake:

* unknown keys are errors (with a "did you mean" suggestion), except inside the
  free-form ``env.config`` (the env constructor checks those) and
  ``model.extra`` (keys for user-registered models);
* ``true`` is not an int and ``1`` is not a bool; ints are fine where a float
  is expected, and an integral float (``1e6``) is fine where an int is;
* ``total_steps`` must cover at least one iteration (``num_envs *
  rollout_length`` env steps): the original raised a bare ZeroDivisionError;
* A2C does one epoch on one minibatch; asking it for more is an error rather
  than a silently ignored setting.

Schedules (``lr``, ``entropy_coef``) are only checked for shape here;
``warp_drive.training.schedules`` turns them into functions of the env step.

YAML limits: a config file over ``MAX_YAML_BYTES``, or a document whose
aliases expand to more than ``MAX_YAML_NODES`` nodes (a "billion laughs"
alias bomb, which used to hang the first deep copy), is refused at parse time
with a :class:`ConfigError`.

YAML note: PyYAML follows YAML 1.1, where ``3e-4`` and ``1e6`` are *strings*.
Configs and ``--set`` values are read with a loader that also resolves those
to floats, so ``lr: 3e-4`` means what it says.

This module is the schema (the sections, their fields, overrides, loading);
the YAML reader, ``ConfigError`` and the value checks live in
:mod:`warp_drive.training.config_values`.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from warp_drive.backends import BACKEND_NAMES
from warp_drive.registry import get_env_class, registered_envs
from warp_drive.training.config_values import (  # noqa: F401  (ConfigError, parse_yaml, config_dialects: re-exported)
    BUILTIN_MODELS,
    CONFIG_DIALECT_GROUP,
    MAX_YAML_BYTES,
    MAX_YAML_NODES,
    ConfigError,
    _any_str,
    _bool,
    _float,
    _got,
    _int,
    _join,
    _layer_sizes,
    _learning_rate,
    _mapping,
    _model_type,
    _optional,
    _schedule,
    _str,
    _unknown_key_message,
    config_dialects,
    parse_yaml,
)

CONFIG_DIR = Path(__file__).resolve().parent / "configs"

ALGORITHMS = ("A2C", "PPO", "DDPG")
BACKENDS = BACKEND_NAMES  # "cpu-gpu" included: the cpu executor in the GPU's shape
ACTIVATIONS = ("tanh", "relu")
# Policy tags name metrics, checkpoint entries and per-policy arrays.
_TAG_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class RunError(RuntimeError):
    """A run directory or checkpoint problem (locked, unsafe, unreadable, disk full), told without a traceback.

    Defined here, torch-free, so the CLI can catch it without importing torch.
    """


# Keys ``--set`` may change when resuming a run (``train --resume``): how long it runs, how often it logs and
# saves, how many checkpoints it keeps, and where to look for it. Everything else is the run's own
# (its config.yaml): changing it mid-run would train something other than either config describes.
RESUMABLE_KEYS = (
    "trainer.total_steps",
    "saving.metrics_log_freq",
    "saving.model_params_save_freq",
    "saving.keep_checkpoints",
    "saving.basedir",
)


# --------------------------------------------------------------------------- dataclasses
def _f(default: Any, check: Callable[[Any, str], Any]) -> Any:
    """A validated leaf field (mutable defaults are copied per instance)."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata={"check": check})
    return field(default=default, metadata={"check": check})


def _section(cls: type) -> Any:
    """A nested section, itself a config dataclass."""
    return field(default_factory=cls, metadata={"section": cls})


@dataclass
class ModelConfig:
    """The network of one policy (``type`` is a key of the model registry in models.py)."""

    type: str = _f("fully_connected", _model_type)
    fc_dims: list[int] = _f([64, 64], _layer_sizes)
    activation: str = _f("tanh", _str(ACTIVATIONS, str.lower))
    shared_trunk: bool = _f(False, _bool)
    obs_normalization: bool = _f(False, _bool)
    log_std_init: float = _f(0.0, _float())
    extra: dict = _f({}, _mapping)  # free-form keys for user-registered models
    # DDPG's critic (and its target) hidden layers; None: fc_dims, as the actor's.
    critic_fc_dims: list[int] | None = _f(None, _optional(_layer_sizes, "fc_dims"))


@dataclass
class PolicyConfig:
    """How one policy learns. PPO-only keys are ignored by A2C (except epochs/minibatches, see _check)."""

    algorithm: str = _f("PPO", _str(ALGORITHMS, str.upper))
    gamma: float = _f(0.99, _float(0.0, 1.0))
    gae_lambda: float = _f(0.95, _float(0.0, 1.0))
    lr: float | dict | list = _f(3e-4, _learning_rate)
    entropy_coef: float | dict | list = _f(0.01, _schedule)
    vf_coef: float = _f(0.5, _float(minimum=0.0))
    max_grad_norm: float | None = _f(0.5, _optional(_float(positive=True), "no clipping"))
    normalize_advantage: bool = _f(True, _bool)
    clip_param: float = _f(0.2, _float(positive=True))
    clip_value_loss: bool = _f(False, _bool)
    num_epochs: int = _f(4, _int(minimum=1))
    num_minibatches: int = _f(4, _int(minimum=1))
    target_kl: float | None = _f(None, _optional(_float(positive=True), "no early stop"))
    to_train: bool = _f(True, _bool)
    # DDPG only (training/ddpg.py documents each; validated for every algorithm, used by DDPG alone).
    tau: float = _f(0.005, _float(0.0, 1.0))  # soft target update: target <- (1 - tau) target + tau online
    critic_lr: float | dict | list | None = _f(None, _optional(_learning_rate, "lr"))
    replay_buffer_size: int = _f(1_000_000, _int(minimum=1))  # transitions (one per agent per env step)
    batch_size: int = _f(256, _int(minimum=1))  # transitions per gradient step
    updates_per_iteration: int | None = _f(None, _optional(_int(minimum=1), "rollout_length"))
    warmup_steps: int = _f(10_000, _int(minimum=0))  # env steps of uniform random actions before learning
    noise_stddev: float = _f(0.1, _float(minimum=0.0))  # in units of half the action range
    noise_damping: float | None = _f(None, _optional(_float(0.0, 1.0), "Gaussian noise"))
    n_step: int = _f(1, _int(minimum=1))
    model: ModelConfig = _section(ModelConfig)

    @staticmethod
    def _check(built: dict, raw: Mapping, path: str, errors: list[str]) -> None:
        if built.get("algorithm") == "DDPG":
            size, batch = built.get("replay_buffer_size", 1_000_000), built.get("batch_size", 256)
            if size < batch:
                errors.append(f"{path}.replay_buffer_size: {size:,} transitions cannot fill a batch_size of "
                              f"{batch:,}; raise replay_buffer_size or lower batch_size")
            if built.get("tau") == 0.0:
                errors.append(f"{path}.tau: 0 would never move the target networks; use a rate in (0, 1]")
            if built.get("noise_damping") == 0.0:
                errors.append(f"{path}.noise_damping: 0 makes the Ornstein-Uhlenbeck noise a random walk that "
                              f"never decays; use a damping in (0, 1], or null for Gaussian noise")
        # A2C is one gradient step per batch: force 1/1 when left out, refuse anything else.
        if built.get("algorithm") != "A2C":
            return
        for key in ("num_epochs", "num_minibatches"):
            if key in raw and key in built and built[key] != 1:
                errors.append(f"{path}.{key}: A2C does one epoch on one minibatch, so {key} must be 1 "
                              f"(or left out), got {raw[key]!r}; use algorithm: PPO for several")
            built[key] = 1


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

    @property
    def train_batch_size(self) -> int:
        """Env steps per iteration (each env step carries all agents of the replica)."""
        return self.num_envs * self.rollout_length

    @property
    def num_iterations(self) -> int:
        return self.total_steps // self.train_batch_size

    @staticmethod
    def _check(built: dict, raw: Mapping, path: str, errors: list[str]) -> None:
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
    """A registered env name and its constructor keyword arguments (checked by the env itself)."""

    name: str = _f("", _str())
    config: dict = _f({}, _mapping)

    @staticmethod
    def _check(built: dict, raw: Mapping, path: str, errors: list[str]) -> None:
        if "name" not in raw:
            errors.append(f"{path}.name: required (a registered environment, see `warp-drive envs`)")


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


@dataclass
class RunConfig:
    """A whole run; build it with :meth:`from_dict` or :func:`load_config`, not field by field."""

    name: str = _f("", _str())
    env: EnvConfig = _section(EnvConfig)
    trainer: TrainerConfig = _section(TrainerConfig)
    policy: dict[str, PolicyConfig] = field(default_factory=dict, metadata={"policies": PolicyConfig})
    saving: SavingConfig = _section(SavingConfig)

    @classmethod
    def from_dict(cls, data: Mapping, source: str | None = None) -> "RunConfig":
        """Validate ``data`` (parsed YAML) into a RunConfig; every problem found is reported at once.

        ``source`` (a file name) only labels the error message.
        """
        errors: list[str] = []
        config = _build(cls, data, "", errors)
        if errors:
            raise ConfigError(errors, source)
        return config

    def to_dict(self) -> dict:
        """Plain dicts, lists and scalars (YAML-safe); ``from_dict(to_dict())`` gives an equal config."""
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def run_files(self) -> dict[str, str]:
        """Files a run writes beside its ``config.yaml``: none here; a config
        read from another format (a subclass of its dialect's) records how it
        was translated."""
        return {}

    @staticmethod
    def _check(built: dict, raw: Mapping, path: str, errors: list[str]) -> None:
        for key in ("name", "env", "policy"):
            if key not in raw:
                what = {"name": "the run's name", "env": "{name: <registered env>, config: {...}}",
                        "policy": "one section per policy tag, e.g. {shared: {algorithm: PPO}}"}[key]
                errors.append(f"{key}: required ({what})")
        if "policy" in raw and "policy" in built and not built["policy"] and isinstance(raw["policy"], Mapping):
            errors.append("policy: needs at least one policy section, e.g. {shared: {algorithm: PPO}}")
        # Absent sections are defaults; build them here so saving.name can default to the run's name.
        for key, section in (("trainer", TrainerConfig), ("saving", SavingConfig)):
            if key not in raw:
                built[key] = section()
        saving, trainer = built.get("saving"), built.get("trainer")
        if saving is not None and not saving.name and "name" in built:
            problem = _escapes_basedir(built["name"])
            if problem:  # the run's name becomes saving.name, a directory under basedir
                errors.append(f"name: {problem} when it names the run directory (saving.name is empty), "
                              f"got {built['name']!r}")
            saving.name = built["name"]
        # A minibatch must hold at least one env step of the policy's agents.
        if trainer is not None:
            for tag, policy in (built.get("policy") or {}).items():
                if policy.num_minibatches > trainer.train_batch_size:
                    errors.append(
                        f"policy.{tag}.num_minibatches: {policy.num_minibatches} minibatches do not fit in a batch "
                        f"of {trainer.train_batch_size} env steps (num_envs * rollout_length)"
                    )


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
    fields = {f.name: f for f in dataclasses.fields(cls)}
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
            policies = _build_policies(f.metadata["policies"], value, key_path, errors)
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


def _build_policies(cls: type, raw: Any, path: str, errors: list[str]) -> dict | None:
    if not isinstance(raw, Mapping):
        errors.append(f"{path}: expected a mapping of policy tags to policy sections, {_got(raw)}")
        return None
    out, ok = {}, True
    for tag, section in raw.items():
        if not (isinstance(tag, str) and _TAG_PATTERN.match(tag)):
            errors.append(f"{path}: policy tag {tag!r} must be an identifier (letters, digits, _)")
            ok = False
            continue
        policy = _build(cls, section, f"{path}.{tag}", errors)
        ok = ok and policy is not None
        out[tag] = policy
    return out if ok else None


# --------------------------------------------------------------------------- overrides
def parse_override(item: str) -> tuple[list[str], Any]:
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. trainer.num_envs=200")
    parts = key.split(".")
    if any(not p for p in parts):
        raise ConfigError(f"--set {item!r}: {key!r} is not a dotted key path")
    try:
        value = parse_yaml(text) if text.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {item!r}: the value is not valid YAML ({exc})") from None
    return parts, value


def _set_path(node: dict, parts: list[str], value: Any, schema: Any, done: list[str], item: str) -> None:
    """Set ``parts`` below ``node``, checking each segment against ``schema``.

    ``schema`` is a config dataclass, ``"policies"`` (the tag -> policy map),
    or None (free-form: env.config, model.extra, or inside a leaf's mapping).
    """
    head, rest = parts[0], parts[1:]
    here = ".".join([*done, head])
    child_schema: Any = None
    if schema == "policies":
        if head == "*":  # policy.*.lr=... sets every policy
            if not node:
                raise ConfigError(f"--set {item}: there are no policies for '*' to match")
            for tag in list(node):
                _set_path(node, [tag, *rest], value, schema, done, item)
            return
        if head not in node:
            close = difflib.get_close_matches(head, list(node), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"--set {item}: no policy {head!r} in this config (policies: "
                              f"{', '.join(node) or 'none'}){hint}")
        child_schema = PolicyConfig
    elif schema is not None:
        fields = {f.name: f for f in dataclasses.fields(schema)}
        if head not in fields:
            raise ConfigError(f"--set {item}: {_unknown_key_message('.'.join(done), head, fields)}")
        meta = fields[head].metadata
        child_schema = meta.get("section") or ("policies" if "policies" in meta else None)
        is_leaf = "check" in meta and meta["check"] is not _mapping
        if is_leaf and rest and not isinstance(node.get(head), Mapping):
            raise ConfigError(f"--set {item}: {here} is a value, not a section, so {'.'.join(rest)!r} cannot be "
                              f"set inside it")
    if not rest:
        node[head] = value
        return
    child = node.setdefault(head, {})
    if child is None:
        child = node[head] = {}
    if not isinstance(child, dict):
        raise ConfigError(f"--set {item}: {here} holds {child!r}, not a mapping, so {'.'.join(rest)!r} cannot "
                          f"be set inside it")
    _set_path(child, rest, value, child_schema, [*done, head], item)


def apply_overrides(data: Mapping, overrides: Iterable[str]) -> dict:
    """A copy of ``data`` with each ``"dotted.key=value"`` applied in order.

    Values are parsed as YAML (``200``, ``3e-4``, ``true``, ``null``, ``[64, 64]``,
    ``{type: linear, start: 1e-3, end: 0}``). A key must exist in the schema,
    except below ``env.config`` and ``model.extra``; policy tags must exist in
    ``data`` (``policy.*.key`` sets every policy). Values are validated
    afterwards, by :meth:`RunConfig.from_dict`.
    """
    out = copy.deepcopy(dict(data))
    for item in overrides:
        parts, value = parse_override(item)
        _set_path(out, parts, value, RunConfig, [], item)
    return out


# --------------------------------------------------------------------------- loading
def available_configs() -> list[str]:
    """Names of the configs shipped in warp_drive/training/configs/."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def config_path(name_or_path: str | Path) -> Path:
    """A shipped config's file for a bare name, else the path itself (which must exist)."""
    text = str(name_or_path)
    path = Path(text).expanduser()
    if path.is_file():
        return path
    looks_like_path = path.suffix in (".yaml", ".yml") or "/" in text or "\\" in text
    if not looks_like_path:
        shipped = CONFIG_DIR / f"{text}.yaml"
        if shipped.is_file():
            return shipped
        close = difflib.get_close_matches(text, available_configs(), n=3)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise ConfigError(f"no config named {text!r}{hint} (shipped: {', '.join(available_configs())}; "
                          f"or pass a path to a YAML file)")
    raise ConfigError(f"config file {text} does not exist")


def load_config(name_or_path: str | Path, overrides: Iterable[str] = ()) -> RunConfig:
    """Read a shipped config by name (``"cartpole"``) or a YAML file by path, apply ``--set`` overrides, validate.

    A file without a top-level ``name`` takes its file name's stem.
    """
    path = config_path(name_or_path)
    try:
        data = parse_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML:\n{exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: the top level must be a mapping (name, env, trainer, policy, saving), "
                          f"{_got(data)}")
    data = dict(data)
    for dialect in config_dialects():
        if dialect.claims(data):  # another format (WarpDrive 2.7's): its dialect translates it
            return dialect.read(data, overrides, default_name=path.stem, label=str(path))
    data.setdefault("name", path.stem)
    data = apply_overrides(data, overrides)
    return RunConfig.from_dict(data, source=str(path))


# --------------------------------------------------------------------------- env checks
def policy_agents(policy_tags: Iterable[str], agent_groups: Mapping[str, Iterable[int]]) -> dict[str, list[int]]:
    """Which agent ids each policy drives.

    One policy drives every agent; several policies must be exactly the env's
    ``agent_groups()`` (agents of one group share spaces, so they can share a
    network).
    """
    tags = list(policy_tags)
    groups = {k: sorted(int(a) for a in v) for k, v in agent_groups.items()}
    if len(tags) == 1:
        return {tags[0]: sorted(a for ids in groups.values() for a in ids)}
    if set(tags) != set(groups):
        missing, extra = sorted(set(groups) - set(tags)), sorted(set(tags) - set(groups))
        detail = "; ".join(s for s in (f"missing {missing}" if missing else "",
                                       f"not a group {extra}" if extra else "") if s)
        raise ConfigError(f"policy: the policy tags {tags} must be one tag for all agents or exactly the env's agent "
                          f"groups {sorted(groups)} ({detail})")
    return {tag: groups[tag] for tag in tags}


def check_env(config: RunConfig) -> dict[str, list[int]]:
    """Build the env's Python object (no kernels) to check ``env.name``, ``env.config`` and the policy tags.

    Returns :func:`policy_agents` for the config. Cheap: constructors only set
    up NumPy arrays; nothing is compiled or pushed to a device.
    """
    try:
        env_class = get_env_class(config.env.name)
    except KeyError:
        names = registered_envs()
        close = difflib.get_close_matches(config.env.name, names, n=3)
        hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        raise ConfigError(f"env.name: no environment named {config.env.name!r}; {hint}registered: "
                          f"{', '.join(names)}") from None
    try:
        env = env_class(**config.env.config)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"env.config: {env_class.__name__}({', '.join(config.env.config)}) failed: {exc}") from None
    return policy_agents(config.policy, env.agent_groups())

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
  free-form ``env.config`` (the env constructor checks those: an env with a
  parameter table refuses an unknown key or a bad value in one line) and
  ``model.extra`` (keys for user-registered models);
* ``true`` is not an int and ``1`` is not a bool; ints are fine where a float
  is expected, and an integral float (``1e6``) is fine where an int is;
* ``total_steps`` must cover at least one iteration (``num_envs *
  rollout_length`` env steps): the original raised a bare ZeroDivisionError;
* a policy section has the keys of its ``algorithm`` only (A2C/PPO's or
  DDPG's, see :mod:`warp_drive.training.config_sections`): a key of the other
  family is an error naming the key, the policy and the algorithm it belongs
  to -- except, when read from a mapping, one holding exactly its default (a
  ``config.yaml`` saved before the split lists them all), which is dropped;
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

This module is the whole run (``RunConfig``, overrides, loading, env checks;
it re-exports the public names of the two below); the sections, their fields
and their validation live in :mod:`warp_drive.training.config_sections`, the
YAML reader, ``ConfigError`` and the value checks in
:mod:`warp_drive.training.config_values`.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from warp_drive.env_parameters import ParameterError
from warp_drive.registry import get_env_class
from warp_drive.training.config_models import (  # noqa: F401  (the model sections: re-exported)
    ACTIVATIONS,
    DDPGModelConfig,
    ModelConfig,
    NetworkConfig,
    _f,
    _section,
)
from warp_drive.training.config_sections import (  # noqa: F401  (the sections: re-exported)
    ALGORITHMS,
    BACKENDS,
    DEFAULT_ALGORITHM,
    POLICY_SECTIONS,
    POLICY_TYPES,
    DDPGPolicyConfig,
    EnvConfig,
    OnPolicyConfig,
    PolicyConfig,
    SavingConfig,
    TrainerConfig,
    _build,
    _escapes_basedir,
    default_of,
    foreign_override,
    policy_config_type,
)
from warp_drive.training.config_values import (  # noqa: F401  (ConfigError, parse_yaml, read_yaml_file...: re-exported)
    BUILTIN_MODELS,
    CONFIG_DIALECT_GROUP,
    MAX_YAML_BYTES,
    MAX_YAML_NODES,
    RUN_CONFIG_FIX,
    ConfigError,
    _got,
    _mapping,
    _str,
    _unknown_key_message,
    config_dialects,
    parse_yaml,
    read_yaml_file,
)

CONFIG_DIR = Path(__file__).resolve().parent / "configs"


class RunError(RuntimeError):
    """A run directory or checkpoint problem (locked, unsafe, unreadable, disk full), told without a traceback.

    Defined here, torch-free, so the CLI can catch it without importing torch.
    """


# An exception that building a run's env and trainer raised because of the user's input (a bad env parameter,
# a space that disagrees with its array, a kernel that does not build or bind, a policy that does not fit the
# env) carries this attribute, set by ``run.build``: its type stays what it was (callers catch ValueError,
# KernelBuildError, ...), and the CLI prints it as one line instead of a traceback. Here, torch-free, like RunError.
SETUP_REFUSAL = "warp_drive_setup_refusal"


def refused_setup(exc: BaseException) -> bool:
    """Whether ``exc`` is a refusal of the user's env, kernel or policies at construction (``SETUP_REFUSAL``)."""
    return bool(getattr(exc, SETUP_REFUSAL, False))


# Keys ``--set`` may change when resuming a run (``train --resume``): how long it runs, how often it logs and
# saves, how many checkpoints it keeps, the bound on its weights, and where to look for it. Everything else is
# the run's own (its config.yaml): changing it mid-run would train something other than either config describes.
# Keys whose default (None) turns a feature off: left out of to_dict() while unset.
OPT_IN_KEYS = ("trainer.stop_at_return", "trainer.stop_eval_episodes")
# Keys added after runs were saved without them: left out of to_dict() while at their default (null is written).
DEFAULT_OMITTED_KEYS = ("trainer.max_weight_magnitude", "env.reset_pool_size")

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


@dataclass
class RunConfig:
    """A whole run; build it with :meth:`from_dict` or :func:`load_config`, not field by field."""

    name: str = _f("", _str())
    env: EnvConfig = _section(EnvConfig)
    trainer: TrainerConfig = _section(TrainerConfig)
    policy: dict[str, PolicyConfig] = field(default_factory=dict, metadata={"policies": POLICY_SECTIONS})
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
        """Plain dicts, lists and scalars (YAML-safe); ``from_dict(to_dict())`` gives an equal config.
        Opt-in keys (``OPT_IN_KEYS``) appear only when set, and ``DEFAULT_OMITTED_KEYS`` only when not at their
        default, so a saved config.yaml of a run that does not use them reads as it did before they existed."""
        data = dataclasses.asdict(self)
        for dotted in OPT_IN_KEYS:
            section, key = dotted.split(".")
            if data[section].get(key) is None:
                data[section].pop(key, None)
        for dotted in DEFAULT_OMITTED_KEYS:
            section, key = dotted.split(".")
            if key in data[section] and data[section][key] == getattr(type(getattr(self, section))(), key):
                data[section].pop(key)
        return data

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
                if isinstance(policy, OnPolicyConfig) and policy.num_minibatches > trainer.train_batch_size:
                    errors.append(
                        f"policy.{tag}.num_minibatches: {policy.num_minibatches} minibatches do not fit in a batch "
                        f"of {trainer.train_batch_size} env steps (num_envs * rollout_length)"
                    )


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

    ``schema`` is a tuple of config dataclasses (a policy's: every algorithm's
    section, as ``apply_overrides`` checks the policy's own once all are set),
    ``"policies"`` (the tag -> policy map), or None (free-form: env.config,
    model.extra, or inside a leaf's mapping).
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
        child_schema = POLICY_TYPES
    elif schema is not None:
        metas: dict[str, list] = {}
        for cls in schema:
            for f in dataclasses.fields(cls):
                metas.setdefault(f.name, []).append(f.metadata)
        if head not in metas:
            raise ConfigError(f"--set {item}: {_unknown_key_message('.'.join(done), head, metas)}")
        meta = metas[head][0]
        sections = tuple(dict.fromkeys(m["section"] for m in metas[head] if "section" in m))
        child_schema = sections or ("policies" if "policies" in meta else None)
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
    policy_keys = []
    for item in overrides:
        parts, value = parse_override(item)
        _set_path(out, parts, value, (RunConfig,), [], item)
        if parts[0] == "policy" and len(parts) > 2:
            policy_keys += [(item, tag, parts[2:]) for tag in (out["policy"] if parts[1] == "*" else [parts[1]])]
    for item, tag, keys in policy_keys:  # once every override is in: against the policy's final algorithm
        problem = foreign_override((out.get("policy") or {}).get(tag), tag, keys)
        if problem:
            raise ConfigError(f"--set {item}: {problem}")
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
    data = read_yaml_file(path, "fix the file")  # not UTF-8 or not YAML: one line naming the file and line
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
    except KeyError as exc:  # registry.EnvLookupError: unknown, or a package.module:Class that does not import
        raise ConfigError(f"env.name: {exc}") from None
    try:
        env = env_class(**config.env.config)
    except ParameterError as exc:  # the env's parameter table: already one line naming the key, value and fix
        raise ConfigError(f"env.config: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"env.config: {env_class.__name__}({', '.join(config.env.config)}) failed: {exc}") from None
    return policy_agents(config.policy, env.agent_groups())

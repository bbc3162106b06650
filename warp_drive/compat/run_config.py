"""WarpDrive 2.7 run configs (its ``run_configs/*.yaml``, tutorial 5's dict) translated to this project's config.

WarpDrive's YAML has ``name`` (the env id, e.g. ``tag_continuous``), ``env``
(the env constructor's keyword arguments), ``trainer`` (``num_envs``,
``train_batch_size``, ``num_episodes``, ...), ``policy.<tag>`` (``vf_loss_coeff``,
``entropy_coeff``, ``clip_grad_norm``, ...), an optional ``sampler.params`` and
``saving``; missing keys took the values of its ``default_configs.yaml``
(:data:`WARPDRIVE_DEFAULTS`, re-typed here). :func:`translate` turns it into
our config dict and a :class:`~warp_drive.training.config.RunConfig`, key by
key, and records every decision in :class:`Translation` (``text()``), which the
CLI prints and the run saves as ``warpdrive_translation.txt`` beside its
``config.yaml``, so the user sees what ran.

Where WarpDrive's defaults differ from ours they are written out (A2C, ReLU, a
shared trunk for the value head, ``to_train`` false, gamma 0.98, lr 1e-4,
vf 0.01, entropy 0.05, max_grad_norm 0.5, no advantage normalisation, clip
0.01, fc [64, 64], log every 100 and save every 1000 iterations, ...), so a
WarpDrive config trains as WarpDrive configured it -- with our algorithms,
which are correct where WarpDrive's were not (reference §9: GAE with
truncation bootstrap, a real PPO, replay-based DDPG). ``gae_lambda`` is set to
1.0 because WarpDrive's advantages were plain discounted returns minus the
value, which is GAE with lambda = 1.

Keys with no equivalent are reported by name (a warning where ignoring them
keeps the training the same or nearly, an error where it would change what is
learned). Keys of *our* schema may be mixed into a WarpDrive file (e.g.
``num_epochs`` for PPO); they pass through unchanged.

This module imports neither torch nor the executors: ``load_config`` uses it.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from warp_drive.registry import get_env_class, registered_envs
from warp_drive.training import config as ours
from warp_drive.training.config import (
    CONFIG_DIR,
    ConfigError,
    RunConfig,
    apply_overrides,
    parse_override,
    parse_yaml,
)

# ----------------------------------------------------------------------------- WarpDrive's schema and defaults
# warp_drive/training/run_configs/default_configs.yaml of WarpDrive 2.7.1, re-typed.
WARPDRIVE_DEFAULTS: dict[str, dict[str, Any]] = {
    "trainer": {"num_gpus": 1, "num_envs": 10, "num_episodes": 10000, "train_batch_size": 10000,
                "env_backend": "pycuda"},
    "policy": {"to_train": False, "algorithm": "A2C", "vf_loss_coeff": 0.01, "entropy_coeff": 0.05,
               "clip_grad_norm": True, "max_grad_norm": 0.5, "normalize_advantage": False,
               "normalize_return": False, "clip_param": 0.01, "gamma": 0.98, "lr": 0.0001,
               "model": {"type": "fully_connected", "fc_dims": [64, 64], "model_ckpt_filepath": ""}},
    "saving": {"metrics_log_freq": 100, "model_params_save_freq": 1000, "basedir": "/tmp", "name": "default",
               "tag": "experiment"},
}
TOP_KEYS = ("name", "env", "trainer", "policy", "sampler", "saving")
TRAINER_KEYS = ("num_gpus", "num_envs", "num_episodes", "train_batch_size", "env_backend", "seed", "n_step",
                "evaluator", "neg_pos_env_ratio")
POLICY_KEYS = ("to_train", "algorithm", "vf_loss_coeff", "entropy_coeff", "clip_grad_norm", "max_grad_norm",
               "normalize_advantage", "normalize_return", "clip_param", "gamma", "lr", "tau", "model")
MODEL_KEYS = ("type", "fc_dims", "model_ckpt_filepath", "init_method", "output_w", "output_b", "actor", "critic")
SAVING_KEYS = ("metrics_log_freq", "model_params_save_freq", "basedir", "name", "tag", "use_wandb")
SAMPLER_PARAMS = ("damping", "stddev", "scale")

# WarpDrive's env ids (its run config names): our registered env, and constructor arguments added.
WARPDRIVE_ENVS: dict[str, tuple[str, dict]] = {
    "tag_continuous": ("TagContinuous", {}),
    "tag_gridworld": ("TagGridWorld", {}),
    # WarpDrive's pool variant drew start cells from a reset pool: our TagGridWorld's random_starts.
    "tag_gridworld_with_reset_pool": ("TagGridWorld", {"random_starts": True}),
    "single_cartpole": ("CartPole", {}),
    "single_acrobot": ("Acrobot", {}),
    "single_mountain_car": ("MountainCar", {}),
    "single_continuous_mountain_car": ("ContinuousMountainCar", {}),
    "single_pendulum": ("Pendulum", {}),
    "dummy_env": ("DummyEnv", {}),
}
# `warp-drive train -e NAME`: WarpDrive's run config names -> our shipped config of that env (+ overrides).
SHIPPED_FOR_WARPDRIVE_ENV: dict[str, tuple[str, list[str]]] = {
    "tag_continuous": ("tag_continuous", []),
    "tag_gridworld": ("tag_gridworld", []),
    "tag_gridworld_with_reset_pool": ("tag_gridworld", ["env.config.random_starts=true"]),
    "single_cartpole": ("cartpole", []),
    "single_acrobot": ("acrobot", []),
    "single_mountain_car": ("mountain_car", []),
    "single_continuous_mountain_car": ("continuous_mountain_car", []),
    "single_pendulum": ("pendulum", []),
}
# Env constructor keys of WarpDrive's envs that ours do not take, and why dropping them is safe.
DROPPED_ENV_KEYS = {
    "reset_pool_size": "WarpDrive's classic-control envs drew resets from a pool of this size; here every reset "
                       "draws from EnvWrapper's reset pool (the run config's env.reset_pool_size, default 1000, "
                       "not an env constructor argument), fresh start states from the same distribution",
}

# What each WarpDrive key is called here: the hints of config.py's unknown-key messages use this.
_HINTS = {
    "trainer": {
        "num_episodes": "trainer.total_steps = num_episodes x episode_length",
        "train_batch_size": "trainer.rollout_length = train_batch_size // num_envs",
        "num_gpus": "the number of processes: `warp-drive train --nproc N` (or -n N)",
        "env_backend": "trainer.backend",
        "n_step": "policy.<tag>.n_step (DDPG)",
        "evaluator": "no key: Trainer.evaluate_episodes() or `warp-drive evaluate`",
        "neg_pos_env_ratio": "no equivalent: every env's steps are trained on",
    },
    "policy": {
        "vf_loss_coeff": "vf_coef",
        "entropy_coeff": "entropy_coef",
        "clip_grad_norm": "max_grad_norm (null for no clipping)",
        "normalize_return": "no equivalent (value targets are not normalised); normalize_advantage is the "
                            "advantage's",
        "tau": "tau (DDPG)",
    },
    "model": {
        "model_ckpt_filepath": "Trainer.load_model_checkpoint({policy: path})",
        "init_method": "no equivalent (our models' own initialisation)",
        "output_w": "no key: a DDPG actor's output is scaled to the action space's bounds",
        "output_b": "no key: a DDPG actor's output is scaled to the action space's bounds",
        "actor": "model.fc_dims (DDPG actor)",
        "critic": "model.critic_fc_dims (DDPG critic)",
    },
    "saving": {"use_wandb": "no equivalent (metrics.csv and TensorBoard events are written)"},
    "": {"sampler": "policy.<tag>.noise_stddev / noise_damping (DDPG)"},
}


def warpdrive_key_hint(path: str, key: Any) -> str | None:
    """If ``key`` under ``path`` (a config key path such as ``trainer`` or ``policy.tagger``) is WarpDrive's,
    a sentence saying so and what it is here; else None."""
    if re.fullmatch(r"policy\.[^.]+", path or ""):
        section = "policy"
    elif re.fullmatch(r"policy\.[^.]+\.model", path or ""):
        section = "model"
    else:
        section = path or ""
    target = _HINTS.get(section, {}).get(str(key))
    if target is None:
        return None
    return (f"{key} is a WarpDrive 2.7 run-config key; here: {target}. A whole WarpDrive run config (its "
            f"trainer.train_batch_size/num_episodes, env as constructor arguments) is detected and translated "
            f"automatically when loaded (warp_drive.compat.run_config)")


# ----------------------------------------------------------------------------- detection
def is_warpdrive_config(data: Any) -> bool:
    """True when ``data`` (parsed YAML) is a WarpDrive run config rather than ours.

    Ours always has ``env: {name: <registered env>, config: {...}}``. WarpDrive's
    ``env`` holds the constructor's arguments (never just ``name``/``config``),
    and its trainer sizes are ``train_batch_size``/``num_episodes`` where ours
    are ``rollout_length``/``total_steps``. A config of our shape with a stray
    WarpDrive key is *not* translated: its unknown-key message names the key.
    """
    if not isinstance(data, Mapping):
        return False
    env = data.get("env")
    trainer = data.get("trainer") if isinstance(data.get("trainer"), Mapping) else {}
    ours_env = isinstance(env, Mapping) and "name" in env and set(env) <= {"name", "config"}
    if ours_env:
        return False
    if isinstance(env, Mapping) and env and not ({"name", "config"} & set(env)):
        return True
    warpdrive_sizes = {"train_batch_size", "num_episodes"} & set(trainer)
    our_sizes = {"rollout_length", "total_steps"} & set(trainer)
    return bool(warpdrive_sizes) and not our_sizes


# ----------------------------------------------------------------------------- the translation
class _Error(ValueError):
    pass


@dataclass
class Translation:
    """A translated WarpDrive run config: our config dict, every decision, and what it could not carry.

    ``config``: our config dict (``RunConfig.from_dict(config)`` validates it;
    :attr:`run_config` does that). ``lines``: one line per translated key.
    ``warnings``: keys with no equivalent (ignored). ``num_processes``:
    ``trainer.num_gpus`` (processes of a data-parallel run). ``checkpoints``:
    ``policy -> model_ckpt_filepath`` (loaded by the Trainer at start, as
    WarpDrive did). ``warpdrive_config``: the input merged with WarpDrive's
    defaults.
    """

    config: dict
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    num_processes: int = 1
    checkpoints: dict[str, Any] = field(default_factory=dict)
    warpdrive_config: dict = field(default_factory=dict)
    source: str | None = None

    @property
    def run_config(self) -> "WarpDriveRunConfig":
        """Our config, validated, carrying this translation (``warpdrive_translation``)."""

        try:
            config = WarpDriveRunConfig.from_dict(self.config, source=self.source)
            config.warpdrive_translation = self
            return config
        except ConfigError as exc:
            raise ConfigError([*exc.errors, "(this config was translated from a WarpDrive run config; "
                                            "the keys above are ours, see Translation.text())"],
                              exc.source or "(translated WarpDrive run config)") from None

    def text(self) -> str:
        head = f"WarpDrive run config{f' {self.source}' if self.source else ''} translated:"
        out = [head, *(f"  {line}" for line in self.lines)]
        if self.warnings:
            out.append("  ignored (no equivalent here):")
            out += [f"    {w}" for w in self.warnings]
        return "\n".join(out)


def _merge(config: dict, defaults: Mapping) -> dict:
    """WarpDrive's recursive merge: missing keys take the default (on a copy)."""
    out = copy.deepcopy(dict(config))
    for key, value in defaults.items():
        if key not in out or out[key] is None and isinstance(value, dict):
            out[key] = copy.deepcopy(value)
        elif isinstance(value, dict) and isinstance(out[key], Mapping):
            out[key] = _merge(out[key], value)
    return out


def _our_fields(*cls_names: str) -> set[str]:
    return {f.name for name in cls_names for f in dataclasses.fields(getattr(ours, name))}


def _unknown(path: str, key: str, warpdrive: Iterable[str], ours: Iterable[str]) -> str:
    valid = sorted(set(warpdrive) | set(ours))
    close = difflib.get_close_matches(key, valid, n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
    return (f"{path}.{key}: unknown key in a WarpDrive run config; {hint}WarpDrive's keys here: "
            f"{', '.join(warpdrive)} (keys of ours pass through: {', '.join(sorted(ours))})")


def load_warpdrive_config(source: Any) -> tuple[dict, str | None]:
    """``source`` as a dict: a mapping, a YAML file path, or YAML text; returns (dict, label)."""

    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source)), None
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source
                                    and source.strip().endswith((".yaml", ".yml"))):
        path = Path(source).expanduser()
        if not path.is_file():
            raise ConfigError(f"WarpDrive run config {path} does not exist")
        data, label = parse_yaml(path.read_text(encoding="utf-8")), str(path)
    elif isinstance(source, str):
        data, label = parse_yaml(source), None
    else:
        raise TypeError(f"a WarpDrive run config is a dict, a YAML file path or YAML text; got "
                        f"{type(source).__name__}")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{label or 'YAML text'}: a run config's top level is a mapping, got {data!r}")
    return dict(data), label


def _override_is_warpdrive(parts: list[str]) -> bool:
    """Whether a ``--set`` key path names WarpDrive's schema (applied before the translation) or ours (after)."""
    head = parts[0]
    if head in ("name", "env", "sampler"):
        return True
    if head == "trainer":
        return len(parts) > 1 and parts[1] in TRAINER_KEYS
    if head == "saving":
        return len(parts) > 1 and parts[1] in SAVING_KEYS
    if head == "policy":
        if len(parts) < 3:
            return True
        if parts[2] == "model":
            return len(parts) < 4 or parts[3] in MODEL_KEYS
        return parts[2] in POLICY_KEYS
    return False


def _apply_warpdrive_overrides(data: dict, items: list[str]) -> None:

    for item in items:
        parts, value = parse_override(item)
        targets = [parts]
        if parts[0] == "policy" and len(parts) > 1 and parts[1] == "*":
            tags = list((data.get("policy") or {}))
            if not tags:
                raise ConfigError(f"--set {item}: there are no policies for '*' to match")
            targets = [["policy", tag, *parts[2:]] for tag in tags]
        for path in targets:
            node = data
            for i, key in enumerate(path[:-1]):
                child = node.get(key)
                if child is None:
                    child = node[key] = {}
                if not isinstance(child, dict):
                    raise ConfigError(f"--set {item}: {'.'.join(path[:i + 1])} holds {child!r}, not a mapping")
                node = child
            node[path[-1]] = value


def _env_class_default_length(env_class: type, env_config: dict) -> int:
    """The episode length the env would have without an ``episode_length`` argument."""
    parameter = inspect.signature(env_class).parameters.get("episode_length")
    if parameter is not None and isinstance(parameter.default, int) and not isinstance(parameter.default, bool):
        return int(parameter.default)
    default = getattr(env_class, "default_episode_length", None)
    if isinstance(default, int):
        return default
    return int(env_class(**env_config).episode_length)


def _schedule_constant(value: Any, what: str) -> Any:
    """A WarpDrive schedule where ours takes a number: a constant one collapses to its number, else an error."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(p, (list, tuple)) and len(p) == 2
                                                          for p in value):
        levels = {p[1] for p in value}
        if len(levels) == 1:
            return next(iter(levels))
        raise _Error(f"{what}: a schedule {value!r}; here this coefficient is one number (only lr and entropy_coef "
                     f"take schedules)")
    return value


def translate(source: Any, overrides: Iterable[str] = (), *, env_wrapper: Any = None,
              default_name: str | None = None, label: str | None = None) -> Translation:
    """Translate a WarpDrive run config (dict, YAML path or YAML text) to ours; see the module docstring.

    ``overrides``: ``--set KEY=VALUE`` items. A key of WarpDrive's schema
    (``trainer.train_batch_size``, ``env.num_runners``, ``policy.tagger.vf_loss_coeff``)
    is applied to the WarpDrive config before translating; a key only ours has
    (``trainer.backend``, ``trainer.rollout_length``, ``policy.tagger.num_epochs``)
    to the translated config. ``env_wrapper``: the env is already built
    (``Trainer(env_wrapper, config=...)``), so its name, episode length,
    number of envs and backend are the wrapper's.
    """

    data, file_label = load_warpdrive_config(source)
    label = label or file_label
    overrides = list(overrides)

    before = [o for o in overrides if _override_is_warpdrive(parse_override(o)[0])]
    after = [o for o in overrides if o not in before]
    _apply_warpdrive_overrides(data, before)
    try:
        translation = _translate(data, env_wrapper, default_name, label)
    except _Error as exc:
        raise ConfigError(str(exc), f"WarpDrive run config {label}" if label else None) from None
    if before:
        translation.lines.insert(0, f"--set (WarpDrive's keys, before translating): {' '.join(before)}")
    if after:
        translation.config = apply_overrides(translation.config, after)
        translation.lines.append(f"--set (our keys, after translating): {' '.join(after)}")
    return translation


def _policy_section_errors(raw: Mapping) -> list[str]:
    """One message for every ``policy`` entry that is not a policy section (a mapping of its keys).

    WarpDrive's ``default_configs.yaml`` has the policy keys directly under
    ``policy`` (they were merged into each section); loaded as a run config,
    every one of its keys would fail alike, so they are named in one message.
    """
    bad = [(tag, section) for tag, section in raw["policy"].items()
           if section is not None and not isinstance(section, Mapping)]
    if not bad:
        return []
    names = ", ".join(str(tag) for tag, _ in bad)
    if all(tag in POLICY_KEYS for tag, _ in bad):
        return [f"policy: {names} are policy keys, but policy holds one section per policy tag "
                f"(e.g. policy: {{shared: {{to_train: true, ...}}}}). This looks like WarpDrive's "
                f"default_configs.yaml: default_configs.yaml is WarpDrive's defaults, merged into every run "
                f"config (here they are built in: warp_drive.compat.run_config.WARPDRIVE_DEFAULTS), not a run "
                f"config; load an env's run config instead, e.g. tag_continuous.yaml"]
    tag, section = bad[0]
    more = f" (also not sections: {', '.join(str(t) for t, _ in bad[1:])})" if len(bad) > 1 else ""
    return [f"policy.{tag}: expected a policy section (a mapping of its keys), got {section!r}{more}; policy "
            f"holds one section per policy tag, e.g. policy: {{{tag}: {{to_train: true, ...}}}}"]


def _translate(raw: dict, env_wrapper: Any, default_name: str | None, label: str | None) -> Translation:
    errors: list[str] = []
    for key in raw:
        if key not in TOP_KEYS:
            errors.append(_unknown("config", str(key), TOP_KEYS, ()).replace("config.", "", 1))
    for section in ("trainer", "saving", "sampler"):
        if raw.get(section) is not None and not isinstance(raw.get(section), Mapping):
            errors.append(f"{section}: expected a mapping, got {raw[section]!r}")
    if not isinstance(raw.get("policy"), Mapping) or not raw.get("policy"):
        errors.append("policy: required, one section per policy tag (e.g. {shared: {to_train: true}})")
    else:
        errors += _policy_section_errors(raw)
    if errors:
        raise _Error("; ".join(errors))
    explicit = copy.deepcopy(raw)
    merged = {**raw,
              "trainer": _merge(raw.get("trainer") or {}, WARPDRIVE_DEFAULTS["trainer"]),
              "policy": {tag: _merge(p or {}, WARPDRIVE_DEFAULTS["policy"]) for tag, p in raw["policy"].items()},
              "saving": _merge(raw.get("saving") or {}, WARPDRIVE_DEFAULTS["saving"])}
    t = Translation(config={}, warpdrive_config=merged, source=label)
    lines, warn = t.lines, t.warnings
    trainer_wd, trainer_in = merged["trainer"], explicit.get("trainer") or {}

    # ---- env
    name = raw.get("name", default_name)
    env_kwargs = dict(raw.get("env") or {})
    if env_wrapper is not None:
        env_name = str(env_wrapper.name)
        episode_length = int(env_wrapper.episode_length)
        env_config: dict = {}
        lines.append(f"env: the EnvWrapper's {env_name} ({env_wrapper.num_envs} envs, episode_length "
                     f"{episode_length})")
        name = name or env_name
    else:
        env_name, env_config, episode_length = _translate_env(name, env_kwargs, lines, warn)
    if not isinstance(name, str) or not name:
        raise _Error("name: required (WarpDrive's env id, e.g. tag_continuous)")

    # ---- trainer
    trainer: dict[str, Any] = {}
    num_envs = trainer_wd["num_envs"]
    if env_wrapper is not None:
        if "num_envs" in trainer_in and int(trainer_in["num_envs"]) != env_wrapper.num_envs:
            raise _Error(f"trainer.num_envs: {trainer_in['num_envs']} in the config, but the EnvWrapper has "
                         f"{env_wrapper.num_envs} envs; make them equal")
        num_envs = env_wrapper.num_envs
    _check_int(num_envs, "trainer.num_envs")
    trainer["num_envs"] = num_envs
    our_trainer = _our_fields("TrainerConfig")
    for key in trainer_in:
        if key not in TRAINER_KEYS and key not in our_trainer:
            raise _Error(_unknown("trainer", str(key), TRAINER_KEYS, our_trainer))
    if "rollout_length" in trainer_in or "total_steps" in trainer_in:
        both = [k for k in ("train_batch_size", "num_episodes") if k in trainer_in]
        if both:
            raise _Error(f"trainer: give WarpDrive's {' and '.join(both)} or our rollout_length/total_steps, "
                         f"not both")
    batch = trainer_wd["train_batch_size"]
    _check_int(batch, "trainer.train_batch_size")
    rollout = trainer_in.get("rollout_length", batch // num_envs)
    if rollout < 1:
        raise _Error(f"trainer.train_batch_size: {batch} env steps per iteration is fewer than num_envs "
                     f"{num_envs}; each env needs at least one step (WarpDrive asserted the same)")
    if "rollout_length" not in trainer_in:
        if batch % num_envs:
            warn.append(f"trainer.train_batch_size {batch} is not a multiple of num_envs {num_envs}: each "
                        f"iteration runs {rollout} steps per env, {rollout * num_envs} env steps (WarpDrive "
                        f"rounded down the same way)")
        lines.append(f"trainer.train_batch_size {batch} // num_envs {num_envs} -> trainer.rollout_length {rollout}")
    trainer["rollout_length"] = rollout
    if "total_steps" in trainer_in:
        trainer["total_steps"] = trainer_in["total_steps"]
    else:
        episodes = trainer_wd["num_episodes"]
        _check_int(episodes, "trainer.num_episodes")
        total = episodes * episode_length
        iterations = total // batch
        if iterations == 0:
            raise _Error(f"trainer.num_episodes: {episodes} episodes x episode_length {episode_length} = {total:,} "
                         f"env steps is less than one iteration (train_batch_size {batch:,}); raise num_episodes "
                         f"or lower train_batch_size")
        trainer["total_steps"] = iterations * rollout * num_envs
        lines.append(f"trainer.num_episodes {episodes} x episode_length {episode_length} = {total:,} env steps "
                     f"= {iterations} iterations of {batch:,} -> trainer.total_steps {trainer['total_steps']:,}")
    if env_wrapper is not None:
        trainer["backend"] = env_wrapper.backend.name
    else:
        trainer["backend"] = _translate_backend(trainer_in, lines, warn)
    if "seed" in trainer_in:
        trainer["seed"] = trainer_in["seed"]
    else:
        trainer["seed"] = 0
        lines.append("trainer.seed absent (WarpDrive seeded from the clock) -> trainer.seed 0 (reproducible; set "
                     "trainer.seed for another)")
    gpus = trainer_wd["num_gpus"]
    _check_int(gpus, "trainer.num_gpus")
    t.num_processes = gpus
    lines.append(f"trainer.num_gpus {gpus} -> {gpus} process(es) (`warp-drive train --nproc {gpus}`: one GPU each, "
                 f"or a share of the CPU on the cpu executor); a Trainer object is one process")
    for key in ("on_nonfinite",):
        if key in trainer_in:
            trainer[key] = trainer_in[key]
    if trainer_in.get("evaluator"):
        warn.append("trainer.evaluator: WarpDrive's greedy test episodes at each log; here call "
                    "Trainer.evaluate_episodes(use_argmax=True) or `warp-drive evaluate RUN_DIR`")
    if trainer_in.get("neg_pos_env_ratio", -1) not in (-1, None):
        warn.append(f"trainer.neg_pos_env_ratio {trainer_in['neg_pos_env_ratio']}: WarpDrive's down-sampling of "
                    f"envs without a success; here every env's steps are trained on")

    # ---- policies
    policies: dict[str, dict] = {}
    ddpg_tags = []
    for tag, policy_wd in merged["policy"].items():
        policies[tag] = _translate_policy(str(tag), policy_wd, (raw["policy"][tag] or {}), t)
        if policies[tag]["algorithm"] == "DDPG":
            ddpg_tags.append(tag)
    n_step = trainer_in.get("n_step")
    if n_step is not None:
        if ddpg_tags:
            for tag in ddpg_tags:
                policies[tag]["n_step"] = n_step
            lines.append(f"trainer.n_step {n_step} -> policy.{{{','.join(ddpg_tags)}}}.n_step")
        elif n_step != 1:
            warn.append(f"trainer.n_step {n_step}: used only by DDPG in WarpDrive; no policy here is DDPG")
    action_half_range = {tag: _actor_output_w(merged["policy"][tag], str(tag)) for tag in ddpg_tags}
    for tag in ddpg_tags:
        if "warmup_steps" not in ((explicit.get("policy") or {}).get(tag) or {}):
            policies[tag]["warmup_steps"] = 0
            lines.append(f"policy.{tag}: no random warm-up in WarpDrive -> policy.{tag}.warmup_steps 0 (ours "
                         "defaults to 10000 env steps of uniform actions before learning)")
    _translate_sampler(raw.get("sampler"), policies, action_half_range, lines, warn)

    # ---- saving
    saving_wd, saving_in = merged["saving"], explicit.get("saving") or {}
    our_saving = _our_fields("SavingConfig")
    saving: dict[str, Any] = {}
    for key, value in saving_wd.items():
        if key in ("metrics_log_freq", "model_params_save_freq", "basedir", "name", "tag") or key in our_saving:
            saving[key] = value
        elif key == "use_wandb":
            if value:
                warn.append("saving.use_wandb: WarpDrive had no wandb logging either; metrics go to metrics.csv "
                            "and TensorBoard events")
        else:
            raise _Error(_unknown("saving", str(key), SAVING_KEYS, our_saving))
    for key in ("metrics_log_freq", "model_params_save_freq", "basedir", "name", "tag"):
        if key not in saving_in:
            lines.append(f"saving.{key}: WarpDrive's default {saving_wd[key]!r}")
    for key in ("name", "tag"):
        saving[key] = str(saving[key])
    lines.append("checkpoints: WarpDrive's <policy>_<env steps>.state_dict model files (Trainer.train(), every one "
                 "kept) and our resumable checkpoints (saving.keep_checkpoints of them)")

    t.config = {"name": str(name), "env": {"name": env_name, "config": env_config}, "trainer": trainer,
                "policy": policies, "saving": saving}
    return t


def _check_int(value: Any, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        if isinstance(value, float) and value.is_integer() and value >= 1:
            return
        raise _Error(f"{path}: expected an integer >= 1, got {value!r}")


def _translate_env(name: Any, env_kwargs: dict, lines: list[str], warn: list[str]) -> tuple[str, dict, int]:
    if not isinstance(name, str) or not name:
        raise _Error("name: required (WarpDrive's env id, e.g. tag_continuous)")
    extra: dict = {}
    if name in WARPDRIVE_ENVS:
        env_name, extra = WARPDRIVE_ENVS[name]
    elif name in registered_envs():
        env_name = name
    elif (CONFIG_DIR / f"{name}.yaml").is_file():
        env_name = str(((parse_yaml((CONFIG_DIR / f"{name}.yaml").read_text(encoding="utf-8")) or {})
                        .get("env") or {}).get("name"))
    else:
        known = sorted({*WARPDRIVE_ENVS, *registered_envs()})
        close = difflib.get_close_matches(name, known, n=2)
        hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
        raise _Error(f"name: {name!r} is neither one of WarpDrive's env ids nor a registered env; {hint}known: "
                     f"{', '.join(known)} (register your own with warp_drive.register_env)")
    lines.append(f"name {name!r} -> env.name {env_name}" + (f" with {extra}" if extra else "") + "; run name "
                 f"{name!r}")
    config = {}
    for key, value in env_kwargs.items():
        if key in DROPPED_ENV_KEYS:
            warn.append(f"env.{key} {value!r}: {DROPPED_ENV_KEYS[key]}")
        else:
            config[key] = value
    for key, value in extra.items():
        config.setdefault(key, value)
    lines.append(f"env: {len(config)} constructor arguments -> env.config (checked by {env_name} itself)")
    try:
        env_class = get_env_class(env_name)
    except KeyError as exc:
        raise _Error(f"name: {exc.args[0]}") from None
    if "episode_length" in config:
        length = config["episode_length"]
        _check_int(length, "env.episode_length")
        length = int(length)
    else:
        try:
            length = _env_class_default_length(env_class, config)
        except (TypeError, ValueError) as exc:
            raise _Error(f"env: {env_class.__name__}({', '.join(config)}) failed: {exc}") from None
        lines.append(f"env.episode_length absent -> {env_class.__name__}'s default {length}")
    return env_name, config, length


def _translate_backend(trainer_in: Mapping, lines: list[str], warn: list[str]) -> str:
    if "backend" in trainer_in:
        if "env_backend" in trainer_in:
            raise _Error("trainer: give WarpDrive's env_backend or our backend, not both")
        return trainer_in["backend"]
    value = trainer_in.get("env_backend")
    if value is None:
        lines.append("trainer.env_backend absent (WarpDrive's trainer did not read it; its scripts chose) -> "
                     "trainer.backend auto (pycuda on a GPU, else the cpu executor)")
        return "auto"
    if value == "numba":
        warn.append("trainer.env_backend 'numba': WarpDrive's Numba kernels have no executor here; the env's "
                    "CUDA C kernel runs instead, on trainer.backend auto (pycuda on a GPU, else cpu)")
        return "auto"
    if value not in ("pycuda", "cpu"):
        raise _Error(f"trainer.env_backend: expected 'pycuda', 'numba' or 'cpu', got {value!r}")
    lines.append(f"trainer.env_backend {value!r} -> trainer.backend {value!r}"
                 + (" (the cpu executor, which runs the env's kernel)" if value == "cpu" else ""))
    return value


def _translate_policy(tag: str, wd: dict, given: Mapping, t: Translation) -> dict:
    lines, warn = t.lines, t.warnings
    where = f"policy.{tag}"
    ours = _our_fields("OnPolicyConfig", "DDPGPolicyConfig")  # every algorithm's; the config refuses another's
    for key in given:
        if key not in POLICY_KEYS and key not in ours:
            raise _Error(_unknown(where, str(key), POLICY_KEYS, ours))
    algorithm = str(wd["algorithm"]).upper()
    out: dict[str, Any] = {"algorithm": algorithm}
    defaulted = [k for k in WARPDRIVE_DEFAULTS["policy"] if k not in given and k != "model"]
    if algorithm == "PPO":
        lines.append(f"{where}.algorithm PPO: WarpDrive's PPO had a probability ratio of 1 (it was A2C); here a real "
                     f"PPO (num_epochs, num_minibatches: ours unless given)")
    ddpg = algorithm == "DDPG"
    out["to_train"] = wd["to_train"]
    out["gamma"] = wd["gamma"]
    if not ddpg:
        out["gae_lambda"] = given.get("gae_lambda", 1.0)
        if "gae_lambda" not in given:
            lines.append(f"{where}.gae_lambda 1.0 (WarpDrive's advantages: discounted returns minus the value, "
                         f"i.e. GAE with lambda 1)")
    lr = wd["lr"]
    if isinstance(lr, Mapping):
        if not ddpg:
            raise _Error(f"{where}.lr: {{actor, critic}} learning rates are DDPG's; {algorithm} takes one lr")
        unknown = set(lr) - {"actor", "critic"}
        if unknown:
            raise _Error(f"{where}.lr: expected keys actor and critic, got {sorted(lr)}")
        out["lr"] = lr.get("actor", WARPDRIVE_DEFAULTS["policy"]["lr"])
        out["critic_lr"] = lr.get("critic")
        lines.append(f"{where}.lr {{actor, critic}} -> lr (actor), critic_lr")
    else:
        out["lr"] = lr
    try:
        if not ddpg:
            out["vf_coef"] = _schedule_constant(wd["vf_loss_coeff"], f"{where}.vf_loss_coeff")
            out["entropy_coef"] = wd["entropy_coeff"]
            lines.append(f"{where}.vf_loss_coeff {out['vf_coef']!r} -> vf_coef; entropy_coeff "
                         f"{out['entropy_coef']!r} -> entropy_coef")
            out["clip_param"] = wd["clip_param"]
            out["normalize_advantage"] = wd["normalize_advantage"]
    except _Error:
        raise
    clip = wd["clip_grad_norm"]
    if not isinstance(clip, bool):
        raise _Error(f"{where}.clip_grad_norm: expected true or false, got {clip!r}")
    out["max_grad_norm"] = wd["max_grad_norm"] if clip else None
    lines.append(f"{where}.clip_grad_norm {clip}, max_grad_norm {wd['max_grad_norm']!r} -> max_grad_norm "
                 f"{out['max_grad_norm']!r}")
    if wd["normalize_return"] not in (False, None):
        raise _Error(f"{where}.normalize_return: {wd['normalize_return']!r}: WarpDrive normalised the value "
                     f"targets per step; here they are not, and ignoring the key would train something else; set "
                     f"it false (normalize_advantage is the advantage's)")
    if "tau" in wd:
        if ddpg:
            out["tau"] = wd["tau"]
        else:
            warn.append(f"{where}.tau: DDPG's target-network rate; {algorithm} has no target network")
    if defaulted:
        lines.append(f"{where}: WarpDrive's defaults for " + ", ".join(
            f"{k} {WARPDRIVE_DEFAULTS['policy'][k]!r}" for k in defaulted))
    for key, value in given.items():  # keys of ours pass through
        if key not in POLICY_KEYS and key in ours and key != "model":
            out[key] = value
    out["model"] = _translate_model(tag, wd.get("model") or {}, given.get("model") or {}, ddpg, t)
    return out


def _translate_model(tag: str, wd: Mapping, given: Mapping, ddpg: bool, t: Translation) -> dict:
    where = f"policy.{tag}.model"
    ours = _our_fields("ModelConfig", "DDPGModelConfig")
    for key in wd:
        if key not in MODEL_KEYS and key not in ours:
            raise _Error(_unknown(where, str(key), MODEL_KEYS, ours))
    out: dict[str, Any] = {}
    if ddpg and ("actor" in wd or "critic" in wd):
        actor, critic = wd.get("actor") or {}, wd.get("critic") or {}
        out["type"] = "fully_connected"
        out["fc_dims"] = actor.get("fc_dims", WARPDRIVE_DEFAULTS["policy"]["model"]["fc_dims"])
        out["critic_fc_dims"] = critic.get("fc_dims")
        for part, section in (("actor", actor), ("critic", critic)):
            for key in section:
                if key not in ("type", "fc_dims", "output_w", "output_b", "init_method"):
                    raise _Error(f"{where}.{part}.{key}: unknown key; WarpDrive's keys here: type, fc_dims, "
                                 f"output_w, output_b, init_method")
            if any(k in section for k in ("output_w", "output_b")):
                t.warnings.append(f"{where}.{part}.output_w/output_b: the actor's tanh output is scaled to the "
                                  f"action space's bounds here")
        t.lines.append(f"{where}.actor {actor.get('type', '')} / critic {critic.get('type', '')} -> "
                       f"model fully_connected: fc_dims {out['fc_dims']} (actor), critic_fc_dims "
                       f"{out['critic_fc_dims']}")
    else:
        kind = wd.get("type", "fully_connected")
        if kind in ("fully_connected_actor", "fully_connected_action_value_critic"):
            raise _Error(f"{where}.type {kind!r}: DDPG's; give algorithm DDPG with model: {{actor: ..., critic: ...}}")
        out["type"] = kind
        out["fc_dims"] = wd.get("fc_dims", [64, 64])
    if "activation" not in given:
        out["activation"] = "relu"
    if not ddpg and "shared_trunk" not in given:
        out["shared_trunk"] = True
    t.lines.append(f"{where}: type {out['type']}, fc_dims {out['fc_dims']}, activation "
                   f"{given.get('activation', 'relu')}" + ("" if ddpg else ", shared_trunk true (WarpDrive's value "
                                                           "head sat on the policy's trunk)"))
    for key in ("init_method", "output_w", "output_b"):
        if key in wd:
            t.warnings.append(f"{where}.{key} {wd[key]!r}: " + _HINTS["model"][key].split(": ", 1)[-1])
    for key, value in given.items():
        if key in ours and key not in MODEL_KEYS:
            out[key] = value
    path = wd.get("model_ckpt_filepath", "")
    if isinstance(path, Mapping):
        paths = {k: v for k, v in path.items() if v}
        if paths:
            t.checkpoints[tag] = paths
    elif path:
        t.checkpoints[tag] = str(path)
    if tag in t.checkpoints:
        t.lines.append(f"{where}.model_ckpt_filepath -> loaded by the Trainer at start: {t.checkpoints[tag]}")
    return out


def _actor_output_w(policy_wd: Mapping, tag: str) -> float:
    """WarpDrive's ``model.actor.output_w``: the factor mapping the actor's (-1, 1) onto the
    actions, i.e. half the action range the config was written for (1.0 when absent)."""
    actor = ((policy_wd.get("model") or {}).get("actor") or {}) if isinstance(policy_wd, Mapping) else {}
    value = actor.get("output_w", 1.0) if isinstance(actor, Mapping) else 1.0
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise _Error(f"policy.{tag}.model.actor.output_w: expected a positive number, got {value!r}")
    return float(value)


def _translate_sampler(sampler: Any, policies: dict, action_half_range: dict, lines: list[str],
                       warn: list[str]) -> None:
    """WarpDrive's OU noise ``stddev * scale`` is in action units (added to the scaled actor
    output); ``noise_stddev`` is in units of half the action range, so it is divided by the
    actor's ``output_w`` (WarpDrive's half range)."""
    if not sampler:
        return
    params = sampler.get("params") if isinstance(sampler, Mapping) else None
    if not isinstance(sampler, Mapping) or set(sampler) - {"params"} or not isinstance(params, Mapping):
        raise _Error(f"sampler: expected {{params: {{damping, stddev, scale}}}}, got {sampler!r}")
    unknown = set(params) - set(SAMPLER_PARAMS)
    if unknown:
        raise _Error(f"sampler.params: unknown keys {sorted(unknown)}; WarpDrive's: {', '.join(SAMPLER_PARAMS)}")
    if not action_half_range:
        warn.append(f"sampler.params {dict(params)}: exploration noise of DDPG; no policy here is DDPG")
        return
    scale = _schedule_constant(params.get("scale", 1.0), "sampler.params.scale")
    stddev = _schedule_constant(params.get("stddev", 0.2), "sampler.params.stddev")
    damping = _schedule_constant(params.get("damping", 0.15), "sampler.params.damping")
    for tag, half_range in action_half_range.items():
        noise = stddev * scale / half_range
        policies[tag]["noise_stddev"] = noise
        policies[tag]["noise_damping"] = damping
        lines.append(f"sampler.params damping {damping}, stddev {stddev} x scale {scale} (action units) -> "
                     f"policy.{tag}.noise_damping {damping}, noise_stddev {noise:g} (units of half the action "
                     f"range: / output_w {half_range:g}; Ornstein-Uhlenbeck noise, as WarpDrive's sampler)")


def scaled_overrides(chosen: Iterable[str], rollout_length: int) -> list[str]:
    """The auto-scaler's ``trainer.num_envs=N`` for a WarpDrive config: keep the steps per env, so
    ``train_batch_size`` becomes ``N * rollout_length`` (WarpDrive's batch is over all envs)."""
    out = []
    for item in chosen:
        key, _, value = item.partition("=")
        out.append(item)
        if key.strip() == "trainer.num_envs":
            out.append(f"trainer.train_batch_size={int(value) * rollout_length}")
    return out


# ----------------------------------------------------------------------------- the core's view
class WarpDriveRunConfig(RunConfig):
    """Our RunConfig, read from a WarpDrive run config: it carries the
    translation (the CLI prints it) and has a run save it beside its
    ``config.yaml`` as ``warpdrive_translation.txt``."""

    warpdrive_translation: "Translation | None" = None  # a plain attribute, not a config field

    def run_files(self) -> dict[str, str]:
        translation = self.warpdrive_translation
        return {} if translation is None else {"warpdrive_translation.txt": translation.text() + "\n"}


class _WarpDriveDialect:
    """WarpDrive 2.7's run-config format, as ``load_config`` sees it (entry point
    ``warp_drive.config_dialects: warpdrive`` in pyproject.toml)."""

    @staticmethod
    def claims(data: Any) -> bool:
        return is_warpdrive_config(data)

    @staticmethod
    def read(data: Any, overrides: Iterable[str], *, default_name: str | None = None,
             label: str | None = None) -> WarpDriveRunConfig:
        return translate(data, overrides, default_name=default_name, label=label).run_config

    @staticmethod
    def key_hint(path: str, key: Any) -> str | None:
        return warpdrive_key_hint(path, key)


DIALECT = _WarpDriveDialect()

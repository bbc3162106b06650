"""WarpDrive 2.7's run-config keys and how each becomes ours: the table (``assets/run_config_keys.yaml``)
and the translators it names.

A section is translated key by key in the table's order: a key with only ``to`` is copied to our key of
that name (a rename is recorded), a key with ``by`` is handed to the translator of that name (here for
the trainer and saving sections, ``run_config_policies`` for the policies'), which reads the section
(WarpDrive's defaults merged in) and writes ours. Keys of our schema written into a WarpDrive
section pass through unchanged; any other key is an error naming WarpDrive's keys and ours.
Every decision is recorded in the translation's ``lines`` (or ``warnings`` for what has no equivalent).
"""

from __future__ import annotations

import copy
import difflib
import inspect
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Callable, Iterable, Mapping

import yaml

from warp_drive.env.registry import get_env_class, registered_envs
from warp_drive.training.config import CONFIG_DIR, parse_yaml

TABLE: dict[str, Any] = yaml.safe_load(resources.files("warp_drive.compat").joinpath(
    "assets/run_config_keys.yaml").read_text(encoding="utf-8"))
WARPDRIVE_DEFAULTS: dict[str, dict[str, Any]] = yaml.safe_load(resources.files("warp_drive.compat").joinpath(
    "assets/default_configs.yaml").read_text(encoding="utf-8"))

# WarpDrive's env ids (its run config names): our registered env, and constructor arguments added.
ENVS: dict[str, tuple[str, dict]] = {name: (env["env"], env.get("config", {})) for name, env in TABLE["envs"].items()}


class TranslationError(ValueError):
    """A WarpDrive config that cannot be translated; one message (``translate`` raises it as a ConfigError)."""


@dataclass
class Section:
    """One section on its way from WarpDrive's schema to ours; what every translator reads and writes."""

    where: str  # its key path: trainer, policy.runner, policy.runner.model, saving
    merged: Mapping  # as written, WarpDrive's defaults filled in
    given: Mapping  # as written
    out: dict = field(default_factory=dict)  # ours
    lines: list[str] = field(default_factory=list)  # the translation's record (shared by every section)
    warnings: list[str] = field(default_factory=list)
    facts: dict = field(default_factory=dict)  # what later keys need: num_envs, episode_length, algorithm, ...


def check_count(value: Any, path: str) -> None:
    """An integer >= 1 (an integral float counts), or a TranslationError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        if isinstance(value, float) and value.is_integer() and value >= 1:
            return
        raise TranslationError(f"{path}: expected an integer >= 1, got {value!r}")


def unknown_key(path: str, key: str, warpdrive: Iterable[str], ours: Iterable[str]) -> str:
    valid = sorted(set(warpdrive) | set(ours))
    close = difflib.get_close_matches(key, valid, n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
    return (f"{path}.{key}: unknown key in a WarpDrive run config; {hint}WarpDrive's keys here: "
            f"{', '.join(warpdrive)} (keys of ours pass through: {', '.join(sorted(ours))})")


def translate_section(section: Section, table: Mapping[str, dict], ours: Iterable[str],
                      translators: Mapping[str, Callable[[Section, str, dict], None]]) -> dict:
    """``section`` by ``table`` (its keys' entries) and the ``translators`` it names, keys of ``ours`` passing
    through; returns ``section.out``."""
    ours = set(ours)
    for key in section.given:
        if key not in table and key not in ours:
            raise TranslationError(unknown_key(section.where, str(key), table, ours))
    for key, entry in table.items():
        if "only" in entry and section.facts.get("algorithm") not in entry["only"]:
            continue  # a key this policy's algorithm does not have here
        by = entry.get("by")
        (translators[by] if by else copy_key)(section, key, entry)
    for key, value in section.given.items():  # keys of ours pass through
        if key not in table:
            section.out[key] = value
    return section.out


# --------------------------------------------------------------------------- the env
def env_class_default_length(env_class: type, env_config: dict) -> int:
    """The episode length the env would have without an ``episode_length`` argument."""
    parameter = inspect.signature(env_class).parameters.get("episode_length")
    if parameter is not None and isinstance(parameter.default, int) and not isinstance(parameter.default, bool):
        return int(parameter.default)
    default = getattr(env_class, "default_episode_length", None)
    if isinstance(default, int):
        return default
    return int(env_class(**env_config).episode_length)


def translate_env(name: Any, env_kwargs: dict, lines: list[str], warn: list[str]) -> tuple[str, dict, int]:
    if not isinstance(name, str) or not name:
        raise TranslationError("name: required (WarpDrive's env id, e.g. tag_continuous)")
    extra: dict = {}
    if name in ENVS:
        env_name, extra = ENVS[name]
    elif name in registered_envs():
        env_name = name
    elif (CONFIG_DIR / f"{name}.yaml").is_file():
        env_name = str(((parse_yaml((CONFIG_DIR / f"{name}.yaml").read_text(encoding="utf-8")) or {})
                        .get("env") or {}).get("name"))
    else:
        known = sorted({*ENVS, *registered_envs()})
        close = difflib.get_close_matches(name, known, n=2)
        hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
        raise TranslationError(f"name: {name!r} is neither one of WarpDrive's env ids nor a registered env; {hint}known: "
                     f"{', '.join(known)} (register your own with warp_drive.register_env)")
    lines.append(f"name {name!r} -> env.name {env_name}" + (f" with {extra}" if extra else "") + "; run name "
                 f"{name!r}")
    config = {}
    for key, value in env_kwargs.items():
        if key in TABLE["dropped_env_keys"]:
            warn.append(f"env.{key} {value!r}: {TABLE['dropped_env_keys'][key]}")
        else:
            config[key] = value
    for key, value in extra.items():
        config.setdefault(key, value)
    lines.append(f"env: {len(config)} constructor arguments -> env.config (checked by {env_name} itself)")
    try:
        env_class = get_env_class(env_name)
    except KeyError as exc:
        raise TranslationError(f"name: {exc.args[0]}") from None
    if "episode_length" in config:
        length = config["episode_length"]
        check_count(length, "env.episode_length")
        length = int(length)
    else:
        try:
            length = env_class_default_length(env_class, config)
        except (TypeError, ValueError) as exc:
            raise TranslationError(f"env: {env_class.__name__}({', '.join(config)}) failed: {exc}") from None
        lines.append(f"env.episode_length absent -> {env_class.__name__}'s default {length}")
    return env_name, config, length


def merge_defaults(config: dict, defaults: Mapping) -> dict:
    """WarpDrive's recursive merge: missing keys take the default (on a copy)."""
    out = copy.deepcopy(dict(config))
    for key, value in defaults.items():
        if key not in out or out[key] is None and isinstance(value, dict):
            out[key] = copy.deepcopy(value)
        elif isinstance(value, dict) and isinstance(out[key], Mapping):
            out[key] = merge_defaults(out[key], value)
    return out


# --------------------------------------------------------------------------- the translators
def copy_key(s: Section, key: str, entry: dict) -> None:
    """WarpDrive's value, under our name (a rename is recorded)."""
    if key not in s.merged:
        return
    s.out[entry["to"]] = s.merged[key]
    if entry["to"] != key:
        s.lines.append(f"{s.where}.{key} {s.merged[key]!r} -> {entry['to']}")


def num_envs(s: Section, key: str, entry: dict) -> None:
    wrapper = s.facts.get("env_wrapper")
    value = s.merged[key]
    if wrapper is not None:
        if key in s.given and int(s.given[key]) != wrapper.num_envs:
            raise TranslationError(f"trainer.num_envs: {s.given[key]} in the config, but the EnvWrapper has "
                                   f"{wrapper.num_envs} envs; make them equal")
        value = wrapper.num_envs
    check_count(value, "trainer.num_envs")
    s.out["num_envs"] = s.facts["num_envs"] = value


def rollout_length(s: Section, key: str, entry: dict) -> None:
    """WarpDrive's batch counts every env's steps; ours, the steps of each env."""
    if "rollout_length" in s.given or "total_steps" in s.given:
        both = [k for k in ("train_batch_size", "num_episodes") if k in s.given]
        if both:
            raise TranslationError(f"trainer: give WarpDrive's {' and '.join(both)} or our rollout_length/"
                                   f"total_steps, not both")
    batch, envs = s.merged[key], s.facts["num_envs"]
    check_count(batch, "trainer.train_batch_size")
    rollout = s.given.get("rollout_length", batch // envs)
    if rollout < 1:
        raise TranslationError(f"trainer.train_batch_size: {batch} env steps per iteration is fewer than num_envs "
                               f"{envs}; each env needs at least one step (WarpDrive asserted the same)")
    if "rollout_length" not in s.given:
        if batch % envs:
            s.warnings.append(f"trainer.train_batch_size {batch} is not a multiple of num_envs {envs}: each "
                              f"iteration runs {rollout} steps per env, {rollout * envs} env steps (WarpDrive "
                              f"rounded down the same way)")
        s.lines.append(f"trainer.train_batch_size {batch} // num_envs {envs} -> trainer.rollout_length {rollout}")
    s.out["rollout_length"] = s.facts["rollout_length"] = rollout
    s.facts["batch"] = batch


def total_steps(s: Section, key: str, entry: dict) -> None:
    """WarpDrive ran whole iterations of its batch until num_episodes episodes' steps were taken."""
    if "total_steps" in s.given:
        s.out["total_steps"] = s.given["total_steps"]
        return
    episodes, length, batch = s.merged[key], s.facts["episode_length"], s.facts["batch"]
    check_count(episodes, "trainer.num_episodes")
    total = episodes * length
    iterations = total // batch
    if iterations == 0:
        raise TranslationError(f"trainer.num_episodes: {episodes} episodes x episode_length {length} = {total:,} "
                               f"env steps is less than one iteration (train_batch_size {batch:,}); raise "
                               f"num_episodes or lower train_batch_size")
    s.out["total_steps"] = iterations * s.facts["rollout_length"] * s.facts["num_envs"]
    s.lines.append(f"trainer.num_episodes {episodes} x episode_length {length} = {total:,} env steps = "
                   f"{iterations} iterations of {batch:,} -> trainer.total_steps {s.out['total_steps']:,}")


def backend(s: Section, key: str, entry: dict) -> None:
    wrapper = s.facts.get("env_wrapper")
    if wrapper is not None:
        s.out["backend"] = wrapper.backend.name
        return
    if "backend" in s.given:
        if key in s.given:
            raise TranslationError("trainer: give WarpDrive's env_backend or our backend, not both")
        s.out["backend"] = s.given["backend"]
        return
    value = s.given.get(key)
    if value is None:
        s.lines.append("trainer.env_backend absent (WarpDrive's trainer did not read it; its scripts chose) -> "
                       "trainer.backend auto (pycuda on a GPU, else the cpu executor)")
        s.out["backend"] = "auto"
    elif value == "numba":
        s.warnings.append("trainer.env_backend 'numba': WarpDrive's Numba kernels have no executor here; the env's "
                          "CUDA C kernel runs instead, on trainer.backend auto (pycuda on a GPU, else cpu)")
        s.out["backend"] = "auto"
    elif value not in ("pycuda", "cpu"):
        raise TranslationError(f"trainer.env_backend: expected 'pycuda', 'numba' or 'cpu', got {value!r}")
    else:
        s.lines.append(f"trainer.env_backend {value!r} -> trainer.backend {value!r}"
                       + (" (the cpu executor, which runs the env's kernel)" if value == "cpu" else ""))
        s.out["backend"] = value


def seed(s: Section, key: str, entry: dict) -> None:
    if key in s.given:
        s.out["seed"] = s.given[key]
    else:
        s.out["seed"] = 0
        s.lines.append("trainer.seed absent (WarpDrive seeded from the clock) -> trainer.seed 0 (reproducible; set "
                       "trainer.seed for another)")


def processes(s: Section, key: str, entry: dict) -> None:
    gpus = s.merged[key]
    check_count(gpus, "trainer.num_gpus")
    s.facts["num_processes"] = gpus
    s.lines.append(f"trainer.num_gpus {gpus} -> {gpus} process(es) (`warp-drive train --nproc {gpus}`: one GPU each, "
                   f"or a share of the CPU on the cpu executor); a Trainer object is one process")


def evaluator(s: Section, key: str, entry: dict) -> None:
    if s.given.get(key):
        s.warnings.append("trainer.evaluator: WarpDrive's greedy test episodes at each log; here call "
                          "Trainer.evaluate_episodes(use_argmax=True) or `warp-drive evaluate RUN_DIR`")


def neg_pos_env_ratio(s: Section, key: str, entry: dict) -> None:
    if s.given.get(key, -1) not in (-1, None):
        s.warnings.append(f"trainer.neg_pos_env_ratio {s.given[key]}: WarpDrive's down-sampling of envs without "
                          f"a success; here every env's steps are trained on")


def with_another_key(s: Section, key: str, entry: dict) -> None:
    """Translated with another key (n_step: with the policies, max_grad_norm: with clip_grad_norm)."""


def use_wandb(s: Section, key: str, entry: dict) -> None:
    if s.merged.get(key):
        s.warnings.append("saving.use_wandb: WarpDrive had no wandb logging either; metrics go to metrics.csv "
                          "and TensorBoard events")


def one_number(value: Any, what: str) -> Any:
    """A WarpDrive schedule where ours takes a number: a constant one collapses to its number, else an error."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(p, (list, tuple)) and len(p) == 2
                                                          for p in value):
        levels = {p[1] for p in value}
        if len(levels) == 1:
            return next(iter(levels))
        raise TranslationError(f"{what}: a schedule {value!r}; here this coefficient is one number (only lr and "
                               f"entropy_coef take schedules)")
    return value


def one_number_key(s: Section, key: str, entry: dict) -> None:
    s.out[entry["to"]] = one_number(s.merged[key], f"{s.where}.{key}")
    s.lines.append(f"{s.where}.{key} {s.out[entry['to']]!r} -> {entry['to']}")


# The translators of the trainer and saving sections, by their names in the table.
SECTION_TRANSLATORS: dict[str, Callable[[Section, str, dict], None]] = {
    "num_envs": num_envs, "rollout_length": rollout_length, "total_steps": total_steps, "backend": backend,
    "seed": seed, "processes": processes, "with_another_key": with_another_key, "evaluator": evaluator,
    "neg_pos_env_ratio": neg_pos_env_ratio, "use_wandb": use_wandb,
}

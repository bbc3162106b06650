"""WarpDrive 2.7 run configs (its ``run_configs/*.yaml``, tutorial 5's dict) translated to this project's config.

WarpDrive's YAML has ``name`` (the env id, e.g. ``tag_continuous``), ``env``
(the env constructor's keyword arguments), ``trainer`` (``num_envs``,
``train_batch_size``, ``num_episodes``, ...), ``policy.<tag>`` (``vf_loss_coeff``,
``entropy_coeff``, ``clip_grad_norm``, ...), an optional ``sampler.params`` and
``saving``; missing keys took the values of its ``default_configs.yaml``
(:data:`WARPDRIVE_DEFAULTS`, read from ``assets/default_configs.yaml``). :func:`translate`
turns it into our config dict and a :class:`~warp_drive.training.config.RunConfig`, key by
key as the table ``assets/run_config_keys.yaml`` says (``run_config_keys.py`` and
``run_config_policies.py`` hold its translators), and records every decision in
:class:`Translation` (``text()``), which the CLI prints and the run saves as
``warpdrive_translation.txt`` beside its ``config.yaml``, so the user sees what ran.

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
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from pydantic import PrivateAttr

from warp_drive.compat.run_config_keys import (SECTION_TRANSLATORS, TABLE, WARPDRIVE_DEFAULTS, Section,
                                               TranslationError, merge_defaults, translate_env, translate_section,
                                               unknown_key)
from warp_drive.compat.run_config_policies import (POLICY_TRANSLATORS, actor_output_w, policy_section_errors,
                                                   translate_sampler)
from warp_drive.training.config import (
    ConfigError,
    DDPGPolicyConfig,
    OnPolicyConfig,
    RunConfig,
    SavingConfig,
    TrainerConfig,
    apply_overrides,
    parse_override,
    parse_yaml,
)

__all__ = ["WARPDRIVE_DEFAULTS", "SHIPPED_FOR_WARPDRIVE_ENV", "Translation", "WarpDriveRunConfig", "DIALECT",
           "is_warpdrive_config", "load_warpdrive_config", "scaled_overrides", "translate", "warpdrive_key_hint"]

# `warp-drive train -e NAME`: WarpDrive's run config names -> our shipped config of that env (+ overrides).
SHIPPED_FOR_WARPDRIVE_ENV: dict[str, tuple[str, list[str]]] = {name: (env["shipped"], env.get("set", []))
                                                               for name, env in TABLE["envs"].items()
                                                               if "shipped" in env}
OUR_POLICY_KEYS = {*OnPolicyConfig.model_fields, *DDPGPolicyConfig.model_fields}  # every algorithm's


# ----------------------------------------------------------------------------- what WarpDrive's keys are here
def warpdrive_key_hint(path: str, key: Any) -> str | None:
    """If ``key`` under ``path`` (a config key path such as ``trainer`` or ``policy.tagger``) is WarpDrive's,
    a sentence saying so and what it is here; else None."""
    if re.fullmatch(r"policy\.[^.]+", path or ""):
        section = "policy"
    elif re.fullmatch(r"policy\.[^.]+\.model", path or ""):
        section = "model"
    else:
        section = path or ""
    if section == "" and key == "sampler":
        target = TABLE["sampler"]["here"]
    else:
        entry = TABLE.get(section, {}).get(str(key)) if section in ("trainer", "policy", "model", "saving") else None
        target = None if entry is None else entry.get("here", entry.get("to"))
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
        return len(parts) > 1 and parts[1] in TABLE["trainer"]
    if head == "saving":
        return len(parts) > 1 and parts[1] in TABLE["saving"]
    if head == "policy":
        if len(parts) < 3:
            return True
        if parts[2] == "model":
            return len(parts) < 4 or parts[3] in TABLE["model"]
        return parts[2] in TABLE["policy"]
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
    except TranslationError as exc:
        raise ConfigError(str(exc), f"WarpDrive run config {label}" if label else None) from None
    if before:
        translation.lines.insert(0, f"--set (WarpDrive's keys, before translating): {' '.join(before)}")
    if after:
        translation.config = apply_overrides(translation.config, after)
        translation.lines.append(f"--set (our keys, after translating): {' '.join(after)}")
    return translation


def _translate(raw: dict, env_wrapper: Any, default_name: str | None, label: str | None) -> Translation:
    errors: list[str] = []
    for key in raw:
        if key not in TABLE["top"]:
            errors.append(unknown_key("config", str(key), TABLE["top"], ()).replace("config.", "", 1))
    for section in ("trainer", "saving", "sampler"):
        if raw.get(section) is not None and not isinstance(raw.get(section), Mapping):
            errors.append(f"{section}: expected a mapping, got {raw[section]!r}")
    if not isinstance(raw.get("policy"), Mapping) or not raw.get("policy"):
        errors.append("policy: required, one section per policy tag (e.g. {shared: {to_train: true}})")
    else:
        errors += policy_section_errors(raw)
    if errors:
        raise TranslationError("; ".join(errors))
    explicit = copy.deepcopy(raw)
    merged = {**raw,
              "trainer": merge_defaults(raw.get("trainer") or {}, WARPDRIVE_DEFAULTS["trainer"]),
              "policy": {tag: merge_defaults(p or {}, WARPDRIVE_DEFAULTS["policy"]) for tag, p in raw["policy"].items()},
              "saving": merge_defaults(raw.get("saving") or {}, WARPDRIVE_DEFAULTS["saving"])}
    t = Translation(config={}, warpdrive_config=merged, source=label)

    # ---- env
    name = raw.get("name", default_name)
    if env_wrapper is not None:
        env_name, env_config, episode_length = str(env_wrapper.name), {}, int(env_wrapper.episode_length)
        t.lines.append(f"env: the EnvWrapper's {env_name} ({env_wrapper.num_envs} envs, episode_length "
                       f"{episode_length})")
        name = name or env_name
    else:
        env_name, env_config, episode_length = translate_env(name, dict(raw.get("env") or {}), t.lines, t.warnings)
    if not isinstance(name, str) or not name:
        raise TranslationError("name: required (WarpDrive's env id, e.g. tag_continuous)")

    # ---- trainer, by the table
    facts = {"env_wrapper": env_wrapper, "episode_length": episode_length, "num_processes": 1}
    trainer_in = explicit.get("trainer") or {}
    trainer = translate_section(Section("trainer", merged["trainer"], trainer_in, lines=t.lines, warnings=t.warnings,
                                        facts=facts), TABLE["trainer"], TrainerConfig.model_fields, SECTION_TRANSLATORS)
    t.num_processes = facts["num_processes"]

    # ---- policies, by the table
    policies: dict[str, dict] = {}
    for tag, policy_wd in merged["policy"].items():
        where, given = f"policy.{tag}", raw["policy"][tag] or {}
        section = Section(where, policy_wd, given, lines=t.lines, warnings=t.warnings,
                          facts={"checkpoints": t.checkpoints})
        policies[tag] = translate_section(section, TABLE["policy"], OUR_POLICY_KEYS, POLICY_TRANSLATORS)
        defaulted = [k for k in WARPDRIVE_DEFAULTS["policy"] if k not in given and k != "model"]
        if defaulted:
            t.lines.append(f"{where}: WarpDrive's defaults for " + ", ".join(
                f"{k} {WARPDRIVE_DEFAULTS['policy'][k]!r}" for k in defaulted))
    ddpg_tags = [tag for tag, policy in policies.items() if policy["algorithm"] == "DDPG"]
    n_step = trainer_in.get("n_step")
    if n_step is not None:
        if ddpg_tags:
            for tag in ddpg_tags:
                policies[tag]["n_step"] = n_step
            t.lines.append(f"trainer.n_step {n_step} -> policy.{{{','.join(ddpg_tags)}}}.n_step")
        elif n_step != 1:
            t.warnings.append(f"trainer.n_step {n_step}: used only by DDPG in WarpDrive; no policy here is DDPG")
    for tag in ddpg_tags:
        if "warmup_steps" not in ((explicit.get("policy") or {}).get(tag) or {}):
            policies[tag]["warmup_steps"] = 0
            t.lines.append(f"policy.{tag}: no random warm-up in WarpDrive -> policy.{tag}.warmup_steps 0 (ours "
                           "defaults to 10000 env steps of uniform actions before learning)")
    action_half_range = {tag: actor_output_w(merged["policy"][tag], str(tag)) for tag in ddpg_tags}
    translate_sampler(raw.get("sampler"), policies, action_half_range, t.lines, t.warnings)

    # ---- saving, by the table
    saving_in = explicit.get("saving") or {}
    saving = translate_section(Section("saving", merged["saving"], merged["saving"], lines=t.lines,
                                       warnings=t.warnings), TABLE["saving"], SavingConfig.model_fields,
                               SECTION_TRANSLATORS)
    for key in ("metrics_log_freq", "model_params_save_freq", "basedir", "name", "tag"):
        if key not in saving_in:
            t.lines.append(f"saving.{key}: WarpDrive's default {merged['saving'][key]!r}")
    for key in ("name", "tag"):
        saving[key] = str(saving[key])
    t.lines.append("checkpoints: WarpDrive's <policy>_<env steps>.state_dict model files (Trainer.train(), every "
                   "one kept) and our resumable checkpoints (saving.keep_checkpoints of them)")

    t.config = {"name": str(name), "env": {"name": env_name, "config": env_config}, "trainer": trainer,
                "policy": policies, "saving": saving}
    return t


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

    _translation: Any = PrivateAttr(default=None)  # not a config key: to_dict() and config.yaml leave it out

    @property
    def warpdrive_translation(self) -> "Translation | None":
        return self._translation

    @warpdrive_translation.setter
    def warpdrive_translation(self, translation: "Translation") -> None:
        self._translation = translation

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

"""The translators of WarpDrive's policy sections, their models and its ``sampler`` (the DDPG noise).

Where WarpDrive's defaults differ from ours they are written out (A2C, ReLU, a shared trunk for the
value head, ``to_train`` false, ...), so a WarpDrive config trains as WarpDrive configured it; ``gae_lambda``
is 1.0 because WarpDrive's advantages were plain discounted returns minus the value (GAE with lambda 1).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from warp_drive.compat.run_config_keys import (TABLE, WARPDRIVE_DEFAULTS, Section, TranslationError, one_number,
                                               one_number_key, unknown_key, with_another_key)
from warp_drive.training.config import DDPGModelConfig, ModelConfig

MODEL_KEYS = tuple(TABLE["model"])
OUR_MODEL_KEYS = {*ModelConfig.model_fields, *DDPGModelConfig.model_fields}


def algorithm(s: Section, key: str, entry: dict) -> None:
    name = str(s.merged[key]).upper()
    s.out["algorithm"] = s.facts["algorithm"] = name
    if name == "PPO":
        s.lines.append(f"{s.where}.algorithm PPO: WarpDrive's PPO had a probability ratio of 1 (it was A2C); here a "
                       f"real PPO (num_epochs, num_minibatches: ours unless given)")
    if name != "DDPG":
        s.out["gae_lambda"] = s.given.get("gae_lambda", 1.0)
        if "gae_lambda" not in s.given:
            s.lines.append(f"{s.where}.gae_lambda 1.0 (WarpDrive's advantages: discounted returns minus the value, "
                           f"i.e. GAE with lambda 1)")


def learning_rate(s: Section, key: str, entry: dict) -> None:
    """One rate, or DDPG's ``{actor, critic}``."""
    lr = s.merged[key]
    if not isinstance(lr, Mapping):
        s.out["lr"] = lr
        return
    if s.facts["algorithm"] != "DDPG":
        raise TranslationError(f"{s.where}.lr: {{actor, critic}} learning rates are DDPG's; {s.facts['algorithm']} "
                               f"takes one lr")
    if set(lr) - {"actor", "critic"}:
        raise TranslationError(f"{s.where}.lr: expected keys actor and critic, got {sorted(lr)}")
    s.out["lr"] = lr.get("actor", WARPDRIVE_DEFAULTS["policy"]["lr"])
    s.out["critic_lr"] = lr.get("critic")
    s.lines.append(f"{s.where}.lr {{actor, critic}} -> lr (actor), critic_lr")


def gradient_clipping(s: Section, key: str, entry: dict) -> None:
    """``clip_grad_norm`` (on or off) and ``max_grad_norm`` become our ``max_grad_norm`` (null: no clipping)."""
    clip = s.merged[key]
    if not isinstance(clip, bool):
        raise TranslationError(f"{s.where}.clip_grad_norm: expected true or false, got {clip!r}")
    s.out["max_grad_norm"] = s.merged["max_grad_norm"] if clip else None
    s.lines.append(f"{s.where}.clip_grad_norm {clip}, max_grad_norm {s.merged['max_grad_norm']!r} -> max_grad_norm "
                   f"{s.out['max_grad_norm']!r}")


def normalize_return(s: Section, key: str, entry: dict) -> None:
    if s.merged[key] not in (False, None):
        raise TranslationError(f"{s.where}.normalize_return: {s.merged[key]!r}: WarpDrive normalised the value "
                               f"targets per step; here they are not, and ignoring the key would train something "
                               f"else; set it false (normalize_advantage is the advantage's)")


def tau(s: Section, key: str, entry: dict) -> None:
    if key not in s.merged:
        return
    if s.facts["algorithm"] == "DDPG":
        s.out["tau"] = s.merged[key]
    else:
        s.warnings.append(f"{s.where}.tau: DDPG's target-network rate; {s.facts['algorithm']} has no target network")


def model(s: Section, key: str, entry: dict) -> None:
    model_section = Section(f"{s.where}.model", s.merged.get(key) or {}, s.given.get(key) or {},
                            lines=s.lines, warnings=s.warnings, facts=s.facts)
    s.out["model"] = translate_model(model_section)


def translate_model(s: Section) -> dict:
    """WarpDrive's model section: one network (A2C/PPO) or DDPG's ``actor`` and ``critic``."""
    for key in s.merged:
        if key not in MODEL_KEYS and key not in OUR_MODEL_KEYS:
            raise TranslationError(unknown_key(s.where, str(key), MODEL_KEYS, OUR_MODEL_KEYS))
    ddpg, out = s.facts["algorithm"] == "DDPG", s.out
    if ddpg and ("actor" in s.merged or "critic" in s.merged):
        actor, critic = s.merged.get("actor") or {}, s.merged.get("critic") or {}
        out["type"] = "fully_connected"
        out["fc_dims"] = actor.get("fc_dims", WARPDRIVE_DEFAULTS["policy"]["model"]["fc_dims"])
        out["critic_fc_dims"] = critic.get("fc_dims")
        for part, network in (("actor", actor), ("critic", critic)):
            for key in network:
                if key not in ("type", "fc_dims", "output_w", "output_b", "init_method"):
                    raise TranslationError(f"{s.where}.{part}.{key}: unknown key; WarpDrive's keys here: type, "
                                           f"fc_dims, output_w, output_b, init_method")
            if any(k in network for k in ("output_w", "output_b")):
                s.warnings.append(f"{s.where}.{part}.output_w/output_b: the actor's tanh output is scaled to the "
                                  f"action space's bounds here")
        s.lines.append(f"{s.where}.actor {actor.get('type', '')} / critic {critic.get('type', '')} -> model "
                       f"fully_connected: fc_dims {out['fc_dims']} (actor), critic_fc_dims {out['critic_fc_dims']}")
    else:
        kind = s.merged.get("type", "fully_connected")
        if kind in ("fully_connected_actor", "fully_connected_action_value_critic"):
            raise TranslationError(f"{s.where}.type {kind!r}: DDPG's; give algorithm DDPG with model: "
                                   f"{{actor: ..., critic: ...}}")
        out["type"] = kind
        out["fc_dims"] = s.merged.get("fc_dims", [64, 64])
    if "activation" not in s.given:
        out["activation"] = "relu"
    if not ddpg and "shared_trunk" not in s.given:
        out["shared_trunk"] = True
    s.lines.append(f"{s.where}: type {out['type']}, fc_dims {out['fc_dims']}, activation "
                   f"{s.given.get('activation', 'relu')}" + ("" if ddpg else ", shared_trunk true (WarpDrive's "
                                                             "value head sat on the policy's trunk)"))
    for key in ("init_method", "output_w", "output_b"):
        if key in s.merged:
            s.warnings.append(f"{s.where}.{key} {s.merged[key]!r}: " + TABLE["model"][key]["here"].split(": ", 1)[-1])
    for key, value in s.given.items():  # keys of ours pass through
        if key in OUR_MODEL_KEYS and key not in MODEL_KEYS:
            out[key] = value
    checkpoint(s)
    return out


def checkpoint(s: Section) -> None:
    """``model_ckpt_filepath``: loaded by the Trainer at start, as WarpDrive did."""
    tag, path = s.where.split(".")[1], s.merged.get("model_ckpt_filepath", "")
    checkpoints = s.facts["checkpoints"]
    if isinstance(path, Mapping):
        paths = {k: v for k, v in path.items() if v}
        if paths:
            checkpoints[tag] = paths
    elif path:
        checkpoints[tag] = str(path)
    if tag in checkpoints:
        s.lines.append(f"{s.where}.model_ckpt_filepath -> loaded by the Trainer at start: {checkpoints[tag]}")


# The translators of a policy section, by their names in the table.
POLICY_TRANSLATORS: dict[str, Callable[[Section, str, dict], None]] = {
    "algorithm": algorithm, "learning_rate": learning_rate, "one_number": one_number_key,
    "gradient_clipping": gradient_clipping, "with_another_key": with_another_key,
    "normalize_return": normalize_return, "tau": tau, "model": model,
}


def policy_section_errors(raw: Mapping) -> list[str]:
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
    if all(tag in TABLE["policy"] for tag, _ in bad):
        return [f"policy: {names} are policy keys, but policy holds one section per policy tag "
                f"(e.g. policy: {{shared: {{to_train: true, ...}}}}). This looks like WarpDrive's "
                f"default_configs.yaml: default_configs.yaml is WarpDrive's defaults, merged into every run "
                f"config (here they are built in: warp_drive.compat.run_config.WARPDRIVE_DEFAULTS), not a run "
                f"config; load an env's run config instead, e.g. tag_continuous.yaml"]
    tag, section = bad[0]
    more = f" (also not sections: {', '.join(str(t) for t, _ in bad[1:])})" if len(bad) > 1 else ""
    return [f"policy.{tag}: expected a policy section (a mapping of its keys), got {section!r}{more}; policy "
            f"holds one section per policy tag, e.g. policy: {{{tag}: {{to_train: true, ...}}}}"]


def actor_output_w(policy: Any, tag: str) -> float:
    """WarpDrive's ``model.actor.output_w``: the factor mapping the actor's (-1, 1) onto the
    actions, i.e. half the action range the config was written for (1.0 when absent)."""
    actor = ((policy.get("model") or {}).get("actor") or {}) if isinstance(policy, Mapping) else {}
    value = actor.get("output_w", 1.0) if isinstance(actor, Mapping) else 1.0
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise TranslationError(f"policy.{tag}.model.actor.output_w: expected a positive number, got {value!r}")
    return float(value)


def translate_sampler(sampler: Any, policies: dict, action_half_range: dict, lines: list[str],
                      warnings: list[str]) -> None:
    """WarpDrive's OU noise ``stddev * scale`` is in action units (added to the scaled actor
    output); ``noise_stddev`` is in units of half the action range, so it is divided by the
    actor's ``output_w`` (WarpDrive's half range)."""
    if not sampler:
        return
    known = TABLE["sampler"]["params"]
    params = sampler.get("params") if isinstance(sampler, Mapping) else None
    if not isinstance(sampler, Mapping) or set(sampler) - {"params"} or not isinstance(params, Mapping):
        raise TranslationError(f"sampler: expected {{params: {{{', '.join(known)}}}}}, got {sampler!r}")
    unknown = set(params) - set(known)
    if unknown:
        raise TranslationError(f"sampler.params: unknown keys {sorted(unknown)}; WarpDrive's: {', '.join(known)}")
    if not action_half_range:
        warnings.append(f"sampler.params {dict(params)}: exploration noise of DDPG; no policy here is DDPG")
        return
    scale = one_number(params.get("scale", 1.0), "sampler.params.scale")
    stddev = one_number(params.get("stddev", 0.2), "sampler.params.stddev")
    damping = one_number(params.get("damping", 0.15), "sampler.params.damping")
    for tag, half_range in action_half_range.items():
        noise = stddev * scale / half_range
        policies[tag]["noise_stddev"] = noise
        policies[tag]["noise_damping"] = damping
        lines.append(f"sampler.params damping {damping}, stddev {stddev} x scale {scale} (action units) -> "
                     f"policy.{tag}.noise_damping {damping}, noise_stddev {noise:g} (units of half the action "
                     f"range: / output_w {half_range:g}; Ornstein-Uhlenbeck noise, as WarpDrive's sampler)")

"""Typed run configuration: YAML in, validated pydantic models out.

A run is described by one YAML file (``warp_drive/training/configs/<name>.yaml`` or any path) with five
sections: ``name``, ``env``, ``trainer``, ``policy`` (one section per policy tag) and ``saving``.
:func:`load_config` (or :meth:`RunConfig.from_dict`) checks every value *before* anything is built, so a
typo fails in a second with a message naming the full key path, not after a kernel compile with a
``KeyError`` deep inside the trainer (the original WarpDrive merged dicts and read keys lazily, so
misspelt keys were silently ignored). Every key, its type and default: ``docs/config_reference.md``,
generated from the schema by ``python -m warp_drive.training.config.reference``.

Rules kept deliberately strict, because each one hides a real mistake:

* unknown keys are errors (with a "did you mean" suggestion), except inside the free-form ``env.config``
  (the env constructor checks those) and ``model.extra`` (keys for user-registered models);
* ``true`` is not an int and ``1`` is not a bool; ints are fine where a float is expected, and an integral
  float (``1e6``) is fine where an int is;
* ``total_steps`` must cover at least one iteration (``num_envs * rollout_length`` env steps);
* a policy section has the keys of its ``algorithm`` only (A2C/PPO's or DDPG's, ``policies.py``);
* A2C does one epoch on one minibatch; asking it for more is an error rather than an ignored setting.

The modules: ``schema`` (:class:`RunConfig`, ``env``, ``trainer``, ``saving``), ``policies`` (the policy
and model sections), ``values`` and ``schedule_spec`` (the kinds of value, as pydantic types),
``section`` (the sections' base class), ``errors`` (one line per problem), ``reader`` (the bounded YAML
reader), ``overrides`` (``--set``), ``loading`` (shipped configs, :func:`load_config`), ``dialects``
(other formats), ``env_fit`` (a config against its env), ``reference`` (the key reference page).
Reading a config imports no torch.
"""

from warp_drive.training.config.dialects import CONFIG_DIALECT_GROUP, config_dialects
from warp_drive.training.config.env_fit import check_env, policy_agents
from warp_drive.training.config.errors import SETUP_REFUSAL, ConfigError, RunError, refused_setup
from warp_drive.training.config.loading import CONFIG_DIR, available_configs, config_path, load_config
from warp_drive.training.config.overrides import apply_overrides, parse_override
from warp_drive.training.config.policies import (
    ACTIVATIONS,
    ALGORITHMS,
    DEFAULT_ALGORITHM,
    POLICY_SECTIONS,
    POLICY_TYPES,
    DDPGModelConfig,
    DDPGPolicyConfig,
    ModelConfig,
    NetworkConfig,
    OnPolicyConfig,
    PolicyConfig,
    foreign_override,
    policy_config_type,
)
from warp_drive.training.config.reader import MAX_YAML_BYTES, MAX_YAML_NODES, RUN_CONFIG_FIX, parse_yaml, read_yaml_file
from warp_drive.training.config.schema import (
    BACKENDS,
    DEFAULT_OMITTED_KEYS,
    OPT_IN_KEYS,
    RESUMABLE_KEYS,
    EnvConfig,
    RunConfig,
    SavingConfig,
    TrainerConfig,
)
from warp_drive.training.config.section import Section, field_default
from warp_drive.training.config.values import BUILTIN_MODELS

__all__ = [
    "ACTIVATIONS", "ALGORITHMS", "BACKENDS", "BUILTIN_MODELS", "CONFIG_DIALECT_GROUP", "CONFIG_DIR",
    "DEFAULT_ALGORITHM", "DEFAULT_OMITTED_KEYS", "MAX_YAML_BYTES", "MAX_YAML_NODES", "OPT_IN_KEYS",
    "POLICY_SECTIONS", "POLICY_TYPES", "RESUMABLE_KEYS", "RUN_CONFIG_FIX", "SETUP_REFUSAL",
    "ConfigError", "DDPGModelConfig", "DDPGPolicyConfig", "EnvConfig", "ModelConfig", "NetworkConfig",
    "OnPolicyConfig", "PolicyConfig", "RunConfig", "RunError", "SavingConfig", "Section", "TrainerConfig",
    "apply_overrides", "available_configs", "check_env", "config_dialects", "config_path", "field_default",
    "foreign_override", "load_config", "parse_override", "parse_yaml", "policy_agents", "policy_config_type",
    "read_yaml_file", "refused_setup",
]

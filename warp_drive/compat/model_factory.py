"""WarpDrive 2.7's ``ModelFactory`` (at its path ``warp_drive.training.models.factory``) over this project's
model registry.

WarpDrive kept a table of ``"module:object"`` paths: ``ModelFactory.add(name,
model_path, object_name)`` put a user model in it and ``ModelFactory.create(name)``
imported and returned the *class*, which the trainer instantiated for a
config's ``model.type``. Here the one table is
:func:`warp_drive.training.models.register_model`'s registry, which the
Trainer and the config check read, so ``add`` registers the class there and
``create`` returns the registered class: a name added either way is usable
as ``model.type`` in a run config and is listed by ``registered_models()``.

Two differences, on purpose:

* ``add`` imports the model at once (WarpDrive imported it at ``create``), so a
  wrong path or class name is reported at the ``add`` call that made it and the
  config check knows the name before the Trainer is built.
* A model here is ``cls(obs_dim, action_space, config)`` whose
  ``forward(obs)`` returns ``(ActionDistribution, value)`` (see the models
  package docstring; ``ActionHead`` builds the head). WarpDrive's models
  (``cls(env, model_config, policy, policy_tag_to_agent_id_map, ...)``) read
  the env's placeholders themselves and cannot be driven by this Trainer; adding
  one is refused with that explanation rather than failing inside training.

WarpDrive's built-in keys resolve to this project's networks: ``fully_connected``
to :class:`~warp_drive.training.models.ActorCritic`, and DDPG's
``fully_connected_actor`` / ``fully_connected_action_value_critic`` both to
:class:`~warp_drive.training.ddpg.networks.DDPGModel`, which holds the actor, the critic
and their target networks in one module (a DDPG policy's config names its
``actor`` and ``critic`` sizes; the run-config translator maps them).
"""

from __future__ import annotations

import importlib
import inspect

from warp_drive.training import models
from warp_drive.training.ddpg.networks import DDPGModel

# WarpDrive's reserved keys that are not entries of our registry.
_DDPG_KEYS = ("fully_connected_actor", "fully_connected_action_value_critic")
WARPDRIVE_BUILTIN_MODELS = ("fully_connected", *_DDPG_KEYS)


def _warpdrive_signature(cls: type) -> bool:
    """True when ``cls`` takes WarpDrive's model arguments (``env, model_config, policy, ...``)."""
    try:
        params = list(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return False
    return params[:3] == ["env", "model_config", "policy"]


class ModelFactory:
    """WarpDrive's model factory: ``add`` a user model by module path, ``create`` a model class by name."""

    # WarpDrive's attribute: the "module:object" path of every model added through the factory.
    model_pool: dict[str, str] = {}

    @classmethod
    def add(cls, model_name: str, model_path: str, object_name: str) -> type:
        """Register ``<model_path>.<object_name>`` as ``model.type: <model_name>``; returns the class.

        As in WarpDrive, a built-in name or a name already taken is refused.
        """
        if not isinstance(model_name, str) or not model_name:
            raise ValueError(f"ModelFactory.add: model_name must be a non-empty string, got {model_name!r}")
        if model_name in WARPDRIVE_BUILTIN_MODELS or model_name in models.registered_models():
            raise ValueError(f"ModelFactory.add: model name {model_name!r} is already used by the model collection "
                             f"({', '.join(sorted({*WARPDRIVE_BUILTIN_MODELS, *models.registered_models()}))}); "
                             f"choose another name")
        try:
            module = importlib.import_module(model_path)
        except ImportError as exc:
            raise ImportError(f"ModelFactory.add({model_name!r}): cannot import the module {model_path!r} ({exc}); "
                              f"model_path is a module's dotted import path, e.g. 'my_package.my_models'") from exc
        model_cls = getattr(module, object_name, None)
        if model_cls is None:
            raise AttributeError(f"ModelFactory.add({model_name!r}): module {model_path!r} has no {object_name!r}")
        if inspect.isclass(model_cls) and _warpdrive_signature(model_cls):
            raise TypeError(
                f"ModelFactory.add({model_name!r}): {object_name} takes WarpDrive's model arguments (env, "
                f"model_config, policy, ...) and reads the env's placeholders itself. Here a model is "
                f"{object_name}(obs_dim, action_space, config) and forward(obs) returns (ActionDistribution, value); "
                f"its trainer feeds it the policy's observations (see warp_drive.training.models and the "
                f"migration guide)")
        models.register_model(model_name, model_cls)
        cls.model_pool[model_name] = f"{model_path}:{object_name}"
        return model_cls

    @classmethod
    def create(cls, model_name: str) -> type:
        """The model class registered as ``model_name`` (WarpDrive's built-in keys included)."""
        if model_name in _DDPG_KEYS:
            return DDPGModel
        if model_name not in models.registered_models():
            known = sorted({*WARPDRIVE_BUILTIN_MODELS, *models.registered_models()})
            raise ValueError(f"model {model_name!r} is not registered ({', '.join(known)}); add it with "
                             f"ModelFactory.add(model_name, model_path, object_name) or "
                             f"warp_drive.training.models.register_model")
        return models._MODEL_REGISTRY[model_name]


__all__ = ["ModelFactory", "WARPDRIVE_BUILTIN_MODELS"]

"""WarpDrive 2.7's saved policy weights, in this project's actor-critic layout.

WarpDrive's ``FullyConnected`` model (``fully_connected`` in its run configs)
saved ``fc.<i>.0.{weight,bias}`` (hidden layer ``i``, each followed by a ReLU),
``policy_head.<k>.{weight,bias}`` (one linear head per action component, a
softmax after it) and ``vf_head.{weight,bias}`` (the value), all on one trunk.
This project's ``ActorCritic`` with the same ``fc_dims``, ``activation: relu``
and discrete actions computes the same function from
``trunk.<2i>`` (``shared_trunk: true``) or from two copies of the trunk
(``actor_trunk.<2i>`` and ``critic_trunk.<2i>``, the default), with
``actor_head.heads.<k>`` and ``value_head``: :func:`convert` renames the
tensors (and copies the trunk for the default layout); the model's own shape
check then refuses weights of another size.

The weights act as trained only on observations laid out as WarpDrive's env
laid them out: an env of this project with the same name is not checked for
that here.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

_KEY = re.compile(r"^(?:fc\.(\d+)\.0|policy_head\.(\d+)|vf_head)\.(weight|bias)$")


def is_warpdrive_state(state: Mapping[str, Any]) -> bool:
    """True for a state dict laid out as WarpDrive's ``FullyConnected`` saved it."""
    return bool(state) and "vf_head.weight" in state and all(_KEY.match(str(k)) for k in state)


def convert(state: Mapping[str, Any], model_keys) -> dict[str, Any]:
    """WarpDrive's ``state`` under the names of a model whose state dict has ``model_keys``."""
    shared = any(str(k).startswith("trunk.") for k in model_keys)
    trunks = ["trunk"] if shared else ["actor_trunk", "critic_trunk"]
    out: dict[str, Any] = {}
    for key, value in state.items():
        layer, head, part = _KEY.match(key).groups()
        if layer is not None:  # Linear i sits at 2i of a Sequential of (Linear, activation) pairs
            for trunk in trunks:
                out[f"{trunk}.{2 * int(layer)}.{part}"] = value.clone()
        elif head is not None:
            out[f"actor_head.heads.{head}.{part}"] = value
        else:
            out[f"value_head.{part}"] = value
    return out

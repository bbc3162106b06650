"""Which action spaces a model supports, and what it needs to know about one.

Models, their heads and the config check all have to tell a ``Discrete`` from a
``MultiDiscrete`` or a ``Box`` -- from gymnasium or from old ``gym``, whose
spaces have the same attributes but other classes. This module classifies a
space once, into a :class:`SpaceInfo`, and says in its ValueError why a space
is not supported, so no other module inspects space objects itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SpaceInfo:
    """What a model needs from an action space, independent of gym vs gymnasium.

    ``kind`` is ``"discrete"`` (``nvec`` holds the choices per head; one entry for
    ``Discrete``) or ``"continuous"`` (``dim`` is D of ``Box(shape=(D,))``).
    """

    kind: str
    nvec: tuple[int, ...] = ()
    dim: int = 0

    @property
    def num_heads(self) -> int:
        return len(self.nvec) if self.kind == "discrete" else 1


def describe_action_space(space: Any) -> SpaceInfo:
    """Classify ``space``; a ValueError says why an unsupported space is rejected.

    Checked by class name as well as ``isinstance`` so that old ``gym`` spaces
    (same attribute names) are accepted without importing ``gym``.
    """
    kind = type(space).__name__
    try:  # gymnasium is a hard dependency, but keep the error readable if it is broken
        from gymnasium import spaces as gspaces
    except Exception:  # pragma: no cover
        gspaces = None
    is_ = lambda name: kind == name or (gspaces is not None and isinstance(space, getattr(gspaces, name)))  # noqa: E731

    if is_("Discrete"):
        n = int(space.n)
        if n < 1:
            raise ValueError(f"Discrete action space needs n >= 1, got {n}")
        return SpaceInfo("discrete", nvec=(n,))
    if is_("MultiDiscrete"):
        nvec = np.asarray(space.nvec)
        if nvec.ndim != 1 or nvec.size == 0:
            raise ValueError(f"MultiDiscrete action space must have a non-empty 1-D nvec, got shape {nvec.shape}")
        if (nvec < 1).any():
            raise ValueError(f"MultiDiscrete action space needs every nvec entry >= 1, got {nvec.tolist()}")
        return SpaceInfo("discrete", nvec=tuple(int(n) for n in nvec))
    if is_("Box"):
        shape = tuple(space.shape)
        if len(shape) != 1 or shape[0] < 1:
            raise ValueError(f"Box action space must have shape (D,) with D >= 1, got {shape}")
        return SpaceInfo("continuous", dim=int(shape[0]))
    raise ValueError(f"unsupported action space {space!r}: use Discrete, MultiDiscrete or Box(shape=(D,))")

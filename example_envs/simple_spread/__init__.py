"""SimpleSpread: MPE's cooperative navigation (JaxMARL's ``MPE_simple_spread_v3``), class + CUDA C step kernel."""

from .simple_spread import SimpleSpread

__all__ = ["SimpleSpread"]

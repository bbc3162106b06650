"""WarpDrive: end-to-end multi-agent reinforcement learning on a GPU.

Environment steps are CUDA C kernels (one block per environment, one thread per
agent). They run on a GPU through PyCUDA, or on any machine through the ``cpu``
executor, which builds the same ``.cu`` sources with the host C++ compiler.

Submodules are imported lazily: ``import warp_drive`` stays cheap and does not
require torch or PyCUDA.
"""

__version__ = "0.1.0"

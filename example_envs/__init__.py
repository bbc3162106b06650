"""Example environments: each a Python class (most with a NumPy reference) plus one CUDA C step kernel.

A package of its own beside ``warp_drive``, installed under this one name as
WarpDrive 2.7's were, so that ``from example_envs.tag_continuous.tag_continuous
import TagContinuous`` is the same import in a source checkout, an editable
install and a wheel. Each ``.cu`` sits next to its class and ships as package
data (``Environment.cuda_source_path`` resolves it against the class's file).

The modules build on warp_drive's env layer and below only (data feed,
``Environment``, portable math, neighbours, rendering), never on training, the
adapters, the CLI or WarpDrive compatibility: an import contract in
pyproject.toml checks it.
"""

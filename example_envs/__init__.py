"""Example environments: each a Python class with a NumPy reference plus one CUDA C step kernel.

Their one import name is ``warp_drive.example_envs`` (where a wheel installs
them); ``example_envs`` is an alias for it (``warp_drive._example_envs_alias``).
When ``example_envs`` is imported before ``warp_drive`` (from a source
checkout on ``sys.path``, or from an installed wheel, which ships this one file
as a top-level package for WarpDrive programs), this file runs under the name
``example_envs``: it then
replaces itself in ``sys.modules`` with ``warp_drive.example_envs``, so that no
module here is ever loaded twice under two names.
"""

if __name__ == "example_envs":
    import sys

    import warp_drive.example_envs

    sys.modules[__name__] = warp_drive.example_envs

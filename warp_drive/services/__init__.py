"""The services layer: what every env gets from the framework, as kernels over the runtime.

``sampler`` (actions drawn on the device from the policies' probabilities), ``reset`` and
``reset_kernel`` (finished envs restarted from their reset pools on the device),
``env_clock`` (the step counter and the done flags the framework owns) and ``log``
(per-step arrays recorded on the device for an episode's replay).

Imports the runtime layer only.
"""

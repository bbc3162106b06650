"""The env layer: the contract an environment fulfils and the tools around it.

``environment`` (the ``Environment`` class a user subclasses, its ``Parameter`` table in
``env_parameters``), ``wrapper`` (``EnvWrapper``: many replicas stepped by one kernel
launch), ``registry`` (envs by name), ``group_arrays`` (per-group arrays), ``consistency``
(the kernel against its optional NumPy reference), ``host_replica`` (one replica stepped on
the host), ``neighbors``, ``rendering`` (episode GIFs), ``demo`` (the runtime end to end),
and the tools of ``warp-drive check`` / ``new``: ``env_rollout``, ``env_check``, ``scaffold``
(its ``templates/``), and ``gymnasium_ids`` (the example envs as Gymnasium ids, strings only).

Imports the services and runtime layers only.
"""

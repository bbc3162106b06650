"""The runtime layer: arrays on the device and the kernels that run over them.

One backend interface (``backends``) with two executors of the same CUDA C: ``pycuda`` on an
NVIDIA GPU and ``cpu``, which builds the ``.cu`` sources with the host C++ compiler. Over it:
``data_feed`` (arrays declared by name), ``data_values`` (their names and checks),
``data_manager`` (arrays pushed to and pulled from the device), ``function_manager``
(kernels built and launched, arguments bound by their C parameter names), ``layouts``
(threads over agents), ``philox`` (the counter-based random stream the kernels share),
``portable_math`` (NumPy ports of the kernels' math, bit for bit), ``env_vars`` (the
``WARP_DRIVE_*`` variables, parsed in one place) and ``launch_clock``.

Imports nothing above it (``lint-imports``: cli > training | adapters > env > services > runtime).
"""

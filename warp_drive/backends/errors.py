"""The two errors of the backend layer, in a module of their own that imports
nothing: every backend module raises them, and the interface (``base``)
re-exports them."""


class KernelBuildError(RuntimeError):
    """A kernel source failed to preprocess or compile.

    The message carries the compiler's own output, which names the user's file
    and line.
    """


class KernelLaunchError(RuntimeError):
    """A launch was refused (bad arguments or geometry) or the kernel failed
    while running (device assert, divergent barrier, ...)."""

"""The two errors of the backend layer, in a module of their own that imports
nothing: every backend module raises them, and the interface (``base``)
re-exports them."""


class KernelBuildError(RuntimeError):
    """A kernel source failed to preprocess or compile.

    The message carries the compiler's own output, which names the user's file
    and line.
    """

    def one_line(self) -> str:
        """The message as one line, for the CLI: its first line (what was built) and the compiler's first
        error line, which names the user's ``.cu`` with its line (``file.cu:12:5: error: ...`` from g++ or
        clang, ``file.cu(12): error: ...`` from nvcc). The whole output stays in the message (``--debug``)."""
        lines = [line.strip() for line in str(self).splitlines() if line.strip()]
        if not lines:
            return "kernel build failed"
        head = lines[0]
        if head.endswith(":"):  # "compiling X failed (exit 1):" -> "compiling X failed"
            head = head[:-1]
            if head.endswith(")") and " (exit " in head:
                head = head[:head.rindex(" (exit ")]
        errors = [line for line in lines[1:] if _is_error_line(line)]
        if not errors:
            rest = [line for line in lines[1:] if not line.startswith("command:")]
            return f"{head}: {rest[0]}" if rest else head
        n = len(errors) - 1
        more = f" (and {n} more error{'s' if n > 1 else ''}; --debug shows the compiler's whole output)" if n else ""
        return f"{head}: {errors[0]}{more}"


def _is_error_line(line: str) -> bool:
    """A compiler's diagnostic line of severity error: ``path:line[:col]: [fatal ]error: ...`` or nvcc's
    ``path(line): error: ...`` (``catastrophic error`` included)."""
    for marker in (": error", ": fatal error", ": catastrophic error"):
        at = line.find(marker)
        if at > 0:
            where = line[:at]
            return where.endswith(")") or where.rpartition(":")[2].isdigit()
    return False


class KernelLaunchError(RuntimeError):
    """A launch was refused (bad arguments or geometry) or the kernel failed
    while running (device assert, divergent barrier, ...)."""

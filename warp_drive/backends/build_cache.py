"""Where build products live and how they are produced safely.

Nothing is ever written inside the installed package. Products go to
``$WARP_DRIVE_CACHE`` (default: ``$XDG_CACHE_HOME/warp_drive`` or
``~/.cache/warp_drive``) under a key that hashes the *preprocessed* sources
(so every included header counts), the compiler and its flags, and the runtime
version. A product is compiled into a temporary file in the same directory and
renamed into place, so processes building the same key concurrently never see a
half-written file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from warp_drive.backends.base import KernelBuildError

if TYPE_CHECKING:
    import numpy as np

# Bump when the emulation header, the runtime or the generated wrapper change in
# a way the preprocessed user source does not show.
RUNTIME_VERSION = "1"

PACKAGE_CUDA_DIR = Path(__file__).resolve().parent.parent / "cuda"
INCLUDE_DIR = PACKAGE_CUDA_DIR / "include"
KERNELS_DIR = PACKAGE_CUDA_DIR / "kernels"
EMULATION_HEADER = PACKAGE_CUDA_DIR / "cpu" / "cuda_emulation.h"


def cache_root() -> Path:
    root = os.environ.get("WARP_DRIVE_CACHE")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "warp_drive")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_key(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    digest.update(RUNTIME_VERSION.encode())
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:24]


def run_compiler(cmd: Sequence[str], what: str) -> str:
    """Run a compiler; on failure raise KernelBuildError with its own message
    (which names the user's file and line)."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise KernelBuildError(f"{what}: compiler {cmd[0]!r} not found ({exc})") from None
    if proc.returncode != 0:
        raise KernelBuildError(
            f"{what} failed (exit {proc.returncode}):\n{proc.stderr.strip() or proc.stdout.strip()}\n"
            f"command: {' '.join(cmd)}"
        )
    return proc.stdout


def build_atomically(target: Path, compile_to: "callable") -> bool:
    """Produce ``target`` with ``compile_to(tmp_path)`` unless it already exists.

    Returns True when the product came from the cache.
    """
    if target.exists():
        return True
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        compile_to(Path(tmp))
        os.replace(tmp, target)  # atomic: readers see the old absence or the whole file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return False


def write_atomically(target: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, target)


def preprocess_for_symbols(cxx: str, sources: Sequence[Path], include_flags: list[str], define_flags: list[str]) -> str:
    """The signature pass both executors share: the host preprocessor over the
    sources with the emulation header in ``WD_MARKER_PASS`` mode, which leaves
    markers for ``__global__``/``__constant__``/``__shared__`` that
    ``signature.parse_symbols`` reads. Its output also keys the build cache."""
    unit = "".join(f'#include "{src}"\n' for src in sources)
    cmd = [cxx, "-E", "-std=c++20", "-DWD_MARKER_PASS", *define_flags, "-include", str(EMULATION_HEADER),
           *include_flags, "-x", "c++", "-"]
    try:
        proc = subprocess.run(cmd, input=unit, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise KernelBuildError(f"cannot run the C++ compiler {cxx!r}: {exc}") from None
    if proc.returncode != 0:
        raise KernelBuildError(f"preprocessing {', '.join(map(str, sources))} failed:\n{proc.stderr.strip()}")
    return proc.stdout


# ---------------------------------------------------------------- what both executors share
def host_compiler(purpose: str) -> str:
    """``$CXX``, else g++, clang++ or c++ on the PATH; ``purpose`` says who needs it."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++") or shutil.which("c++")
    if not cxx:
        raise KernelBuildError(f"{purpose} needs a host C++ compiler: install g++ (or set $CXX)")
    return cxx


def include_and_define_flags(include_dirs: Sequence[str | Path], defines: dict[str, str] | None
                             ) -> tuple[list[str], list[str]]:
    """``-I`` flags (the framework's headers first) and ``-D`` flags, the same for every compiler."""
    include_flags = [f"-I{d}" for d in [INCLUDE_DIR, *include_dirs]]
    define_flags = [f"-D{k}={v}" for k, v in (defines or {}).items()]
    return include_flags, define_flags


def constant_bytes(name: str, value, size: int, declared: str) -> "np.ndarray":
    """``value`` as the contiguous float32/int32/uint32 array that fills a
    ``__constant__`` of ``size`` bytes, or a clear error (never a cast)."""
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    data = np.ascontiguousarray(value)
    if data.dtype not in (np.float32, np.int32, np.uint32):
        raise TypeError(f"__constant__ {name}: pass float32, int32 or uint32 data, got {data.dtype}")
    if data.nbytes != size:
        raise ValueError(
            f"__constant__ {name} ({declared}) holds {size} bytes; got {data.nbytes} bytes "
            f"({data.dtype} of shape {data.shape})"
        )
    return data

"""clang as a second CUDA front end over the kernels the build gate builds (optional).

Why: nvcc's front end is EDG; clang's CUDA mode is another parser, with its
own reading of C++ and of host/device rules. A kernel only nvcc accepts breaks
every LLVM-based tool (clangd, clang-tidy, HIP's hipify) and any future clang
build of it. Each gate unit is parsed twice, ``--cuda-host-only`` and
``--cuda-device-only`` (sm_90), and any diagnostic fails the check.

The tool is the ``clang-tidy`` wheel from PyPI (``pip install clang-tidy``):
a whole clang with its resource headers, CUDA's wrappers included. The
``libclang`` wheel was tried first and cannot do it: it has no resource
headers, so ``__clang_cuda_runtime_wrapper.h`` (which defines ``__device__``,
``threadIdx`` and the device math) is missing and with ``-nocudainc`` nothing
CUDA is declared. With clang-tidy two things are still needed: the toolkit's
``include/cccl`` as a system directory, and an empty ``curand_mtgp32_kernel.h``
(clang's wrapper includes it; a toolkit without cuRAND has none). It is never
a test dependency: without clang-tidy the check skips and says how to get it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

INSTALL_HINT = ("clang-tidy not found: the optional second CUDA front end needs it "
                "(pip install clang-tidy, or set $CLANG_TIDY); it is not a test dependency")
STUB_HEADERS = ("curand_mtgp32_kernel.h",)
MODES = ("--cuda-host-only", "--cuda-device-only")


def find_clang_tidy() -> str | None:
    """``$CLANG_TIDY``, else ``clang-tidy`` on the PATH."""
    candidate = os.environ.get("CLANG_TIDY") or shutil.which("clang-tidy")
    return candidate if candidate and os.access(candidate, os.X_OK) else None


def cuda_root(nvcc: str) -> Path | None:
    """The toolkit nvcc belongs to (its ``TOP``: /usr/local/bin/nvcc may be a wrapper script)."""
    proc = subprocess.run([nvcc, "-dryrun", "-cubin", "-x", "cu", os.devnull, "-o", os.devnull],
                          capture_output=True, text=True)
    match = re.search(r"^#\$ TOP=(.+)$", proc.stdout + proc.stderr, re.M)
    return Path(match.group(1)).resolve() if match else None


def parse_units(units: Sequence[tuple[Sequence[Path], Sequence[Path], dict]], include_dir: Path, nvcc: str,
                workers: int = 2) -> list[str]:
    """Every diagnostic clang gives over ``units`` ((sources, include dirs, defines)
    each), in both compilation modes; empty when it accepts them all."""
    clang_tidy = find_clang_tidy()
    root = cuda_root(nvcc)
    if clang_tidy is None or root is None:
        raise RuntimeError(INSTALL_HINT if clang_tidy is None else f"cannot find the CUDA toolkit of {nvcc}")
    cccl = next((p for p in (root / "include" / "cccl", *root.glob("targets/*/include/cccl")) if p.is_dir()), None)
    with tempfile.TemporaryDirectory(prefix="wd_clang_") as tmp:
        stubs = Path(tmp) / "stubs"
        stubs.mkdir()
        for name in STUB_HEADERS:
            (stubs / name).write_text("// empty: clang's CUDA wrapper includes it; this toolkit has no cuRAND\n")
        jobs = []
        for index, (sources, include_dirs, defines) in enumerate(units):
            unit = Path(tmp) / f"unit{index}.cu"
            unit.write_text("".join(f'#include "{Path(s).resolve()}"\n' for s in sources))
            flags = ["-x", "cuda", f"--cuda-path={root}", "--cuda-gpu-arch=sm_90", "-nocudalib", "-std=c++17",
                     "-isystem", str(stubs), *(["-isystem", str(cccl)] if cccl else []), f"-I{include_dir}",
                     *(f"-I{d}" for d in include_dirs), *(f"-D{k}={v}" for k, v in defines.items())]
            jobs += [(sources, mode, [clang_tidy, "--allow-no-checks", "--checks=-*", "--quiet", str(unit), "--",
                                      *flags, mode]) for mode in MODES]

        def run(job):
            sources, mode, command = job
            proc = subprocess.run(command, capture_output=True, text=True)
            text = (proc.stdout + proc.stderr).strip()
            if proc.returncode != 0 or re.search(r"\b(error|warning):", text):
                return [f"clang {mode} over {', '.join(Path(s).name for s in sources)}:\n{text}"]
            return []

        with ThreadPoolExecutor(max_workers=workers) as pool:
            return [p for found in pool.map(run, jobs) for p in found]

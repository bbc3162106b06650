"""Where build products live and how they are produced safely.

Nothing is ever written inside the installed package. Products go to
``$WARP_DRIVE_CACHE`` (default: ``$XDG_CACHE_HOME/warp_drive`` or
``~/.cache/warp_drive``) under a key that hashes the *preprocessed* sources
(so every included header counts), the compiler and its flags, and the runtime
version. A product is compiled into a temporary file in the same directory and
renamed into place, so processes building the same key concurrently never see a
half-written file.

Trust model. The cache holds libraries this process loads (their constructors
run on load) and reports it believes, so:

* every cache directory is created 0700 and must be owned by the user and not
  writable by group or others, else :class:`CacheTrustError` names it and says
  how to fix it (this holds for the cache root and its ``cpu``/``pycuda``
  subdirectories; products and their hash files are checked the same way);
* every product has a sidecar ``<product>.sha256`` written (atomically) after
  the product; a product is used only when its bytes hash to that value, so a
  truncated, altered or foreign file (e.g. a ``module_*.so`` copied in by hand)
  is rebuilt, never loaded. A product without its hash file is rebuilt too;
* builders of one key take an exclusive ``flock`` on ``<product>.lock``, so
  racing processes build it once and always leave a product and hash that
  agree; readers take no lock (a product whose hash is not there yet reads as
  "rebuild needed", which then waits on the lock and finds it built).

The hash detects corruption and files that did not come from a build; it is no
signature: whoever can write the (private) cache directory can write both.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from warp_drive.runtime import env_vars
from warp_drive.runtime.backends import preprocess_memo
from warp_drive.runtime.backends.errors import KernelBuildError

if TYPE_CHECKING:
    import numpy as np

# Bump when the emulation header, the runtime or the generated wrapper change in
# a way the preprocessed user source does not show.
RUNTIME_VERSION = "1"

PACKAGE_CUDA_DIR = Path(__file__).resolve().parents[2] / "cuda"
INCLUDE_DIR = PACKAGE_CUDA_DIR / "include"
KERNELS_DIR = PACKAGE_CUDA_DIR / "kernels"
EMULATION_HEADER = PACKAGE_CUDA_DIR / "cpu" / "cuda_emulation.h"


class CacheTrustError(KernelBuildError):
    """A cache directory or product that another user could have written."""


HASH_SUFFIX = ".sha256"


def _owner_name(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def check_trusted(path: Path, info: os.stat_result | None = None) -> None:
    """Refuse ``path`` (a cache directory or product) unless this user owns it
    and neither group nor others may write it."""
    if info is None:
        info = os.lstat(path)
    kind = "directory" if stat.S_ISDIR(info.st_mode) else "file"
    me = os.geteuid()
    if info.st_uid != me:
        raise CacheTrustError(
            f"build cache {kind} {path} is owned by {_owner_name(info.st_uid)}, not by you ({_owner_name(me)}): "
            f"warp_drive loads code from its build cache and trusts only a cache of your own. Remove it "
            f"(rm -rf {path}) or set WARP_DRIVE_CACHE to a directory you own."
        )
    if info.st_mode & 0o022:
        raise CacheTrustError(
            f"build cache {kind} {path} is writable by {'others' if info.st_mode & 0o002 else 'its group'} "
            f"(mode {stat.S_IMODE(info.st_mode):04o}): warp_drive loads code from its build cache and trusts only "
            f"a cache no one else can write. Run `chmod 700 {path}` if its contents are yours (or remove it), or "
            f"set WARP_DRIVE_CACHE to a private directory."
        )


def private_dir(path: Path) -> Path:
    """``path`` as a trusted cache directory: created 0700 when missing (its
    parents as the umask says), refused (CacheTrustError) when another user owns
    it or group/others may write it, or when it is not a directory."""
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise CacheTrustError(f"build cache path {path} is not a directory (a {'symlink' if stat.S_ISLNK(info.st_mode) else 'file'}); "
                              f"remove it or set WARP_DRIVE_CACHE to a directory you own")
    check_trusted(path, info)
    return path


def cache_root() -> Path:
    root = env_vars.read("WARP_DRIVE_CACHE")  # refused, naming it, when a file stands where it should go
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "warp_drive")
    return private_dir(Path(root))


def cache_dir(name: str) -> Path:
    """A subdirectory of the cache root (``cpu``, ``pycuda``), checked like the root."""
    return private_dir(cache_root() / name)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def hash_path(target: Path) -> Path:
    return target.with_name(target.name + HASH_SUFFIX)


def verified(target: Path) -> bool:
    """True when ``target`` is a regular file of ours whose bytes match the hash
    recorded when it was built; False when it is missing, has no hash, or
    differs (then it must be rebuilt). Raises CacheTrustError for a product or
    hash file another user owns or may write."""
    sidecar = hash_path(target)
    try:
        info = os.lstat(target)
        side_info = os.lstat(sidecar)
    except FileNotFoundError:
        return False
    if not (stat.S_ISREG(info.st_mode) and stat.S_ISREG(side_info.st_mode)):
        return False  # a symlink or other oddity: rebuilt in its place
    check_trusted(target, info)
    check_trusted(sidecar, side_info)
    try:
        recorded = sidecar.read_text().split()[0]
        return recorded == file_sha256(target)
    except (OSError, IndexError, UnicodeDecodeError):
        return False


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
    """Produce ``target`` with ``compile_to(tmp_path)`` unless a verified copy is
    cached (see the module docstring: a product is used only when its bytes
    match the hash recorded when it was built).

    Returns True when the product came from the cache. After it returns,
    ``target`` matches its recorded hash (load it right away: the directory is
    private, so only this user's builds replace it, and only by a verified
    product).
    """
    private_dir(target.parent)
    if verified(target):
        return True
    lock_path = target.with_name(target.name + ".lock")
    lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        check_trusted(lock_path, os.fstat(lock_fd))
        fcntl.flock(lock_fd, fcntl.LOCK_EX)  # one builder per key; the others wait here
        if verified(target):  # another process built it while we waited
            return True
        fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
        os.close(fd)
        try:
            compile_to(Path(tmp))
            # A linker creates its output with the umask's mode; the product is ours alone.
            os.chmod(tmp, stat.S_IMODE(os.stat(tmp).st_mode) & ~0o022)
            digest = file_sha256(Path(tmp))
            # Product first, hash second: a reader in between sees a mismatch
            # (rebuild needed), waits on the lock, and finds both in place.
            os.replace(tmp, target)
            write_atomically(hash_path(target), f"{digest}  {target.name}\n")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return False
    finally:
        os.close(lock_fd)  # releases the flock


def write_atomically(target: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def preprocess_for_symbols(cxx: str, sources: Sequence[Path], include_flags: list[str], define_flags: list[str],
                           compile_flags: Sequence[str] = ("-std=c++20",)) -> str:
    """The signature pass both executors share: the host preprocessor over the
    sources with the emulation header in ``WD_MARKER_PASS`` mode, which leaves
    markers for ``__global__``/``__constant__``/``__shared__`` that
    ``signature.parse_symbols`` reads. Its output also keys the build cache;
    the cpu executor, passing its ``compile_flags``, compiles that very output.
    A process building the same sources again reuses the text while none of
    the files it came from has changed (:mod:`preprocess_memo`)."""
    unit = "".join(f'#include "{src}"\n' for src in sources)
    cmd = [cxx, "-E", *compile_flags, "-DWD_MARKER_PASS", *define_flags, "-include", str(EMULATION_HEADER),
           *include_flags, "-x", "c++", "-"]

    def run() -> str:
        try:
            proc = subprocess.run(cmd, input=unit, capture_output=True, text=True)
        except FileNotFoundError as exc:
            raise KernelBuildError(f"cannot run the C++ compiler {cxx!r}: {exc}") from None
        if proc.returncode != 0:
            raise KernelBuildError(f"preprocessing {', '.join(map(str, sources))} failed:\n{proc.stderr.strip()}")
        return proc.stdout

    return preprocess_memo.preprocessed(cxx, sources, include_flags, define_flags, compile_flags, run)


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

"""The build cache loads only what it built (see ``warp_drive/runtime/backends/build_cache.py``).

Real compilers, real files: a foreign library planted at the exact path of a
cached product, a product truncated or with its machine code altered, cache
directories others may write or another user owns, and the pycuda executor's
cubins and ptxas reports. Builds whose products get loaded run in a fresh
child process, as a new Python session would.
"""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from warp_drive.runtime.backends import build_cache
from warp_drive.runtime.backends.base import KernelBuildError

pytestmark = pytest.mark.slow  # compiles kernels in fresh caches and child processes (the fast tier: pytest -m 'not slow')

ROOT = Path(__file__).resolve().parents[2]

SOURCE = """\
extern "C" __global__ void scaled(const float* in, float* out, int n) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] * 7.0f;
}
"""

BUILD_SCRIPT = """
import sys, torch
from warp_drive.runtime.backends.cpu import CpuBackend

module = CpuBackend().build([sys.argv[1]])
x = torch.arange(40, dtype=torch.float32)
out = torch.zeros(40)
module.get_function("scaled")(x, out, 40, grid=2, block=32)
assert out.tolist() == [7.0 * v for v in range(40)], out.tolist()
print("from_cache", module.from_cache)
"""

FOREIGN_LIBRARY = """\
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
  FILE* f = fopen("%s", "w");
  if (f) { fputs("the foreign library's constructor ran\\n", f); fclose(f); }
}
"""


def _builder(source: Path, cache: Path):
    """``build()``: a fresh process builds ``source`` with ``cache`` as WARP_DRIVE_CACHE; returns its output."""
    env = dict(os.environ, WARP_DRIVE_CACHE=str(cache))

    def build() -> str:
        proc = subprocess.run([sys.executable, "-c", BUILD_SCRIPT, str(source)], env=env, capture_output=True,
                              text=True, cwd=ROOT, timeout=300)
        assert proc.returncode == 0, f"rc={proc.returncode} (a negative rc is a signal)\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    build.source, build.cache = source, cache
    return build


@pytest.fixture(scope="module")
def built_once(tmp_path_factory):
    """One build of SOURCE into a new cache (the runtime and the module): what
    every ``setup`` starts from, so that each test need not compile both again."""
    root = tmp_path_factory.mktemp("built_once")
    source = root / "src" / "scaled.cu"
    source.parent.mkdir()
    source.write_text(SOURCE)
    build = _builder(source, root / "cache")
    assert "from_cache False" in build()
    return build


@pytest.fixture
def setup(built_once, tmp_path):
    """A private copy of ``built_once``'s cache (modes kept), built from the same
    source path; ``setup()`` builds again in a fresh process."""
    import shutil

    cache = tmp_path / "cache"
    shutil.copytree(built_once.cache, cache)
    return _builder(built_once.source, cache)


def product(cache: Path, pattern: str) -> Path:
    found = sorted((cache / "cpu").glob(pattern))
    assert len(found) == 1, found
    return found[0]


PRODUCTS = {"module": "module_*.so", "runtime": "wd_runtime_*.so"}


@pytest.mark.parametrize("which", PRODUCTS)
def test_foreign_library_at_the_cache_path_is_never_loaded(setup, tmp_path, which):
    target = product(setup.cache, PRODUCTS[which])
    marker = tmp_path / "constructor-ran"
    planted_source = tmp_path / "planted.c"
    planted_source.write_text(FOREIGN_LIBRARY % marker)
    planted = tmp_path / "planted.so"
    subprocess.run(["gcc", "-shared", "-fPIC", str(planted_source), "-o", str(planted)], check=True)
    os.replace(planted, target)  # exactly where the build looks, with the build's own name

    out = setup()  # a new process builds the same source: the kernel still computes 7 * x
    assert not marker.exists(), f"the planted {target.name} was loaded: its constructor ran"
    assert build_cache.verified(target)  # rebuilt in place, with its hash
    if which == "module":
        assert "from_cache False" in out


@pytest.mark.parametrize("which", PRODUCTS)
def test_truncated_library_is_rebuilt_not_loaded(setup, which):
    target = product(setup.cache, PRODUCTS[which])
    with open(target, "r+b") as handle:
        handle.truncate(1000)
    out = setup()  # no SIGBUS, no "file too short": a rebuild
    assert target.stat().st_size > 1000
    if which == "module":
        assert "from_cache False" in out
    assert "from_cache True" in setup()


def text_section(data: bytes) -> tuple[int, int]:
    """(offset, size) of an ELF64 library's .text section."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i):
        name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, offset, size

    _, names_offset, _ = section(shstrndx)
    for i in range(shnum):
        name, offset, size = section(i)
        if data[names_offset + name:].split(b"\0", 1)[0] == b".text":
            return offset, size
    raise AssertionError("no .text section")


def test_library_with_altered_machine_code_is_rebuilt(setup):
    target = product(setup.cache, "module_*.so")
    data = bytearray(target.read_bytes())
    offset, size = text_section(bytes(data))
    for i in range(offset + size // 4, offset + size // 4 + 32):
        data[i] ^= 0xFF
    target.write_bytes(bytes(data))  # same size, same name, same owner: only the code differs
    assert "from_cache False" in setup()
    assert build_cache.verified(target)


def test_product_without_recorded_hash_is_rebuilt(setup):
    target = product(setup.cache, "module_*.so")
    build_cache.hash_path(target).unlink()
    assert "from_cache False" in setup()
    assert build_cache.verified(target)


def test_new_cache_directories_are_private(built_once):
    for directory in (built_once.cache, built_once.cache / "cpu"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    for path in (built_once.cache / "cpu").iterdir():
        assert not path.stat().st_mode & 0o022, path


def test_cache_writable_by_others_is_refused_naming_it(tmp_path, monkeypatch):
    cache = tmp_path / "shared"
    cache.mkdir()
    os.chmod(cache, 0o777)
    monkeypatch.setenv("WARP_DRIVE_CACHE", str(cache))
    with pytest.raises(KernelBuildError, match="writable by others") as info:
        build_cache.cache_root()
    assert str(cache) in str(info.value) and "chmod 700" in str(info.value)

    # A subdirectory too, through a real build.
    os.chmod(cache, 0o700)
    (cache / "cpu").mkdir(mode=0o700)
    os.chmod(cache / "cpu", 0o775)
    from warp_drive.runtime.backends.cpu import CpuBackend

    source = tmp_path / "scaled.cu"
    source.write_text(SOURCE)
    with pytest.raises(KernelBuildError, match="writable by its group") as info:
        CpuBackend().build([source])
    assert str(cache / "cpu") in str(info.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_cache_or_product_owned_by_another_user_is_refused_naming_it(tmp_path, monkeypatch):
    cache = tmp_path / "theirs"
    cache.mkdir(mode=0o700)
    os.chown(cache, 12345, 12345)
    monkeypatch.setenv("WARP_DRIVE_CACHE", str(cache))
    with pytest.raises(KernelBuildError, match="owned by uid 12345") as info:
        build_cache.cache_root()
    assert str(cache) in str(info.value)

    os.chown(cache, os.geteuid(), os.getegid())
    (cache / "cpu").mkdir(mode=0o700)
    target = cache / "cpu" / "module_x.so"
    target.write_bytes(b"\x7fELF not really")
    build_cache.hash_path(target).write_text(build_cache.file_sha256(target))
    os.chown(target, 12345, 12345)
    with pytest.raises(KernelBuildError, match="owned by uid 12345") as info:
        build_cache.build_atomically(target, lambda tmp: pytest.fail("must not build over another user's file"))
    assert str(target) in str(info.value)


def test_racing_builders_leave_a_product_and_hash_that_agree(tmp_path, monkeypatch):
    """Many threads build one key at once (each would write different bytes):
    one builds, the others wait and use it."""
    import threading

    monkeypatch.setenv("WARP_DRIVE_CACHE", str(tmp_path / "cache"))
    target = build_cache.cache_dir("cpu") / "product.bin"
    built, results = [], []

    def compile_to(tmp: Path) -> None:
        built.append(1)
        tmp.write_bytes(os.urandom(4096))

    threads = [threading.Thread(target=lambda: results.append(build_cache.build_atomically(target, compile_to)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and sorted(results) == [False] + [True] * 7
    assert build_cache.verified(target)
    assert not list(target.parent.glob("*.tmp"))


# ---------------------------------------------------------------- pycuda products (nvcc, no GPU needed)
def _toolchain():
    from warp_drive.runtime.backends import pycuda_backend as pb

    if pb.find_nvcc() is None:
        pytest.skip("nvcc not found")
    return pb.NvccToolchain.find()


def test_cubin_truncated_or_altered_is_rebuilt(tmp_path, monkeypatch):
    from warp_drive.runtime.backends import pycuda_backend as pb

    monkeypatch.setenv("WARP_DRIVE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "scaled.cu"
    source.write_text(SOURCE)
    plan = pb.plan_build(_toolchain(), "sm_90", [source])
    assert plan.compile() is False
    good = plan.target.read_bytes()
    assert plan.compile() is True
    plan.target.write_bytes(good[:1000])
    assert plan.compile() is False and plan.target.read_bytes() == good
    altered = bytearray(good)
    altered[len(good) // 2] ^= 0xFF
    plan.target.write_bytes(bytes(altered))
    assert plan.compile() is False and plan.target.read_bytes() == good
    assert stat.S_IMODE((tmp_path / "cache" / "pycuda").stat().st_mode) == 0o700


def test_altered_ptxas_report_is_rebuilt_not_believed(tmp_path, monkeypatch):
    from warp_drive.runtime.backends.resources import ptxas_resources

    _toolchain()
    monkeypatch.setenv("WARP_DRIVE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "scaled.cu"
    source.write_text(SOURCE)
    true = ptxas_resources([source])["scaled"]
    report = next((tmp_path / "cache" / "pycuda").glob("resources_*.json"))
    fields = json.loads(report.read_text())
    fields["scaled"]["registers"] = 255
    fields["scaled"]["max_threads_per_block"] = 1
    report.write_text(json.dumps(fields))
    assert ptxas_resources([source])["scaled"] == true


EDIT_DURING_BUILD = """
import sys, torch
from pathlib import Path
from warp_drive.runtime.backends import build_cache
from warp_drive.runtime.backends.cpu import CpuBackend

source, header, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
if mode == "edit":  # the header is saved while the compiler runs (after the build hashed its input)
    real = build_cache.run_compiler
    def run_compiler(cmd, what):
        if any("module_" in part for part in cmd):  # the kernel library's compile, not the runtime's
            header.write_text("#define VALUE 2000.0f\\n")
        return real(cmd, what)
    build_cache.run_compiler = run_compiler
module = CpuBackend().build([source])
out = torch.zeros(1)
module.get_function("put")(out, grid=1, block=1)
print(out.item(), module.from_cache)
"""


def test_an_edit_during_a_build_cannot_land_under_the_old_key(tmp_path):
    """The library is built from the bytes the key hashed: a header saved while the
    compiler runs neither changes this build nor poisons the next process's."""
    source, header = tmp_path / "put.cu", tmp_path / "value.h"
    source.write_text('#include "value.h"\nextern "C" __global__ void put(float* out) { out[0] = VALUE; }\n')
    header.write_text("#define VALUE 1000.0f\n")
    env = dict(os.environ, WARP_DRIVE_CACHE=str(tmp_path / "cache"))

    def build(mode: str) -> tuple[float, bool]:
        proc = subprocess.run([sys.executable, "-c", EDIT_DURING_BUILD, str(source), str(header), mode], env=env,
                              capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr
        value, cached = proc.stdout.split()
        return float(value), cached == "True"

    assert build("edit") == (1000.0, False)  # built from the text it hashed, before the edit
    assert header.read_text() == "#define VALUE 2000.0f\n"
    assert build("plain") == (2000.0, False)  # the edited source: its own key, a new build
    header.write_text("#define VALUE 1000.0f\n")
    assert build("plain") == (1000.0, True)  # the original source: the cached library holds its code

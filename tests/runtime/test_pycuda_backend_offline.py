"""The pycuda executor: what can be checked without a GPU, plus GPU tests.

Without a GPU (and without PyCUDA) these tests still check that

* the module imports and the backend fails with a clear message;
* kernel parameters are packed with the sizes nvcc compiled: the layout we
  compute is compared with the parameter table nvcc writes into the cubin
  (``.nv.info.<kernel>``, EIATTR_KPARAM_INFO);
* the nvcc command line builds the framework's kernels and a kernel with a
  grid-wide barrier (``wd_sync_env``) into *loadable* cubins: ELF type
  ET_EXEC, every kernel present under its C name, no unresolved symbols;
* the cache key changes with a header edit that only nvcc sees;
* every libcuda entry point is bound under its exported name (cuda.h's
  ``_v2`` redirections) with a prototype matching cuda.h.

Tests marked ``gpu`` run the real thing (skipped here by conftest).
"""

from __future__ import annotations

import ctypes
import os
import re
import struct
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from warp_drive.runtime.backends import build_cache
from warp_drive.runtime.backends import pycuda_backend as pb
from warp_drive.runtime.backends.base import KernelBuildError, KernelLaunchError
from warp_drive.runtime.backends.cubin import elf_sections, kernel_params
from warp_drive.runtime.backends.signature import parse_symbols

pytestmark = pytest.mark.slow  # nvcc builds of every kernel (the fast tier: pytest -m 'not slow')

REPO = Path(__file__).resolve().parents[2]
ARCH = "sm_90"  # H100 / H200
NVCC = pb.find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (install the CUDA toolkit)")


# ---------------------------------------------------------------- cubin (ELF) reading
ET_REL, ET_EXEC = 1, 2


def _elf_sections(data: bytes) -> dict[str, bytes]:
    return elf_sections(data)


def elf_type(data: bytes) -> int:
    return struct.unpack_from("<H", data, 16)[0]


def elf_symbols(data: bytes) -> list[tuple[str, int, int, int]]:
    """(name, bind, type, section index) of every symbol."""
    sections = _elf_sections(data)
    symtab, strtab = sections[".symtab"], sections[".strtab"]
    out = []
    for i in range(0, len(symtab), 24):
        name_off, info, _other, shndx, _value, _size = struct.unpack_from("<IBBHQQ", symtab, i)
        name = strtab[name_off:strtab.index(b"\0", name_off)].decode()
        out.append((name, info >> 4, info & 0xF, shndx))
    return out


def elf_symbol_sizes(data: bytes) -> dict[str, int]:
    sections = _elf_sections(data)
    symtab, strtab = sections[".symtab"], sections[".strtab"]
    out = {}
    for i in range(0, len(symtab), 24):
        name_off, _info, _other, _shndx, _value, size = struct.unpack_from("<IBBHQQ", symtab, i)
        out[strtab[name_off:strtab.index(b"\0", name_off)].decode()] = size
    return out


def kparam_info(data: bytes, kernel: str) -> list[tuple[int, int, int]]:
    """(ordinal, offset, size) of the kernel's parameters as nvcc recorded them
    (the product's reader; ``test_kernel_parameters_match_what_nvcc_compiled``
    checks it against the layout the CUDA ABI gives)."""
    params = kernel_params(data, kernel)
    assert params is not None, f"no readable .nv.info.{kernel} section"
    return params


# ---------------------------------------------------------------- no PyCUDA, no GPU
def test_module_imports_without_importing_pycuda():
    code = "import sys, warp_drive.runtime.backends.pycuda_backend; assert 'pycuda' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_backend_without_pycuda_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pycuda", None)  # `import pycuda.driver` now raises ImportError
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    with pytest.raises(RuntimeError, match=re.escape("pip install -e '.[cuda]'")):
        pb.PyCudaBackend()
    import warp_drive.runtime.backends as backends

    monkeypatch.setattr(backends, "_instances", {})  # a GPU run may have created the shared instance already
    with pytest.raises(RuntimeError, match="PyCUDA"):
        backends.get_backend("pycuda")
    assert "pycuda" not in backends._instances


SIGNATURE_TEXT = (
    "__wd_global__ void k(const float* __restrict__ a, int n, double x, bool flag, short s,\n"
    "                     unsigned long long seed, char c, int* out, unsigned int u, long long ll) {}\n"
)
EXPECTED_CTYPES = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_double, ctypes.c_bool, ctypes.c_int16,
                   ctypes.c_uint64, ctypes.c_int8, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int64]
EXPECTED_LAYOUT = [(0, 8), (8, 4), (16, 8), (24, 1), (26, 2), (32, 8), (40, 1), (48, 8), (56, 4), (64, 8)]


def test_parameter_packing_follows_the_signature():
    signature = parse_symbols(SIGNATURE_TEXT).kernels["k"]
    assert pb.param_ctypes(signature) == EXPECTED_CTYPES
    assert pb.param_layout(signature) == EXPECTED_LAYOUT
    no_params = parse_symbols("__wd_global__ void z(void) {}").kernels["z"]
    assert pb.param_ctypes(no_params) == [] and pb.param_layout(no_params) == []


def test_nvcc_command_line():
    cmd = pb.nvcc_command("nvcc", Path("/c/unit.cu"), ["/u/inc"], {"N": "3"}, "sm_90", Path("/c/out.cubin"))
    assert cmd[0] == "nvcc"
    assert {"-cubin", "--fmad=false", "-std=c++17", "-arch=sm_90"} <= set(cmd)
    assert "-rdc=true" not in cmd  # grid sync needs no relocatable device code (see the coop test)
    assert cmd.index(f"-I{build_cache.INCLUDE_DIR}") < cmd.index("-I/u/inc")
    assert "-DN=3" in cmd
    assert cmd[-5:] == ["-x", "cu", "/c/unit.cu", "-o", "/c/out.cubin"]
    depend = pb.nvcc_depend_command("nvcc", Path("/c/unit.cu"), ["/u/inc"], {"N": "3"}, "sm_90")
    assert "-M" in depend and "-DN=3" in depend and "-cubin" not in depend


def test_unit_includes_the_user_files_by_absolute_path(tmp_path):
    src = tmp_path / "env.cu"
    src.write_text("")
    assert f'#include "{src.resolve()}"' in pb.unit_source([src])


def test_parse_dependencies():
    text = "unit.o : /c/unit.cu \\\n    /usr/include/a.h \\\n    /home/me/my\\ dir/b.h \\\n    /x/c.h\n"
    assert pb.parse_dependencies(text) == ["/c/unit.cu", "/usr/include/a.h", "/home/me/my dir/b.h", "/x/c.h"]


def test_unsupported_arch_is_a_clear_error():
    toolchain = pb.NvccToolchain("nvcc", "release 13.0", frozenset({"sm_80", "sm_90"}))
    toolchain.check_arch("sm_90")
    with pytest.raises(KernelBuildError, match="sm_999"):
        toolchain.check_arch("sm_999")


# ---------------------------------------------------------------- nvcc, offline
@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WARP_DRIVE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def toolchain():
    if NVCC is None:
        pytest.skip("nvcc not found")
    return pb.NvccToolchain.find()


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def _check_loadable(cubin: bytes, kernels) -> None:
    assert elf_type(cubin) == ET_EXEC, "a relocatable cubin (-rdc) cannot be loaded without a device link"
    symbols = elf_symbols(cubin)
    functions = {name for name, _bind, typ, _shndx in symbols if typ == 2}  # STT_FUNC
    assert set(kernels) <= functions, f"kernels missing (mangled?): {set(kernels) - functions}"
    # STB_GLOBAL (1) undefined (section 0) symbols would need a linker; weak
    # ones (.nv.reservedSmem*) are resolved by the driver.
    unresolved = [name for name, bind, _typ, shndx in symbols if shndx == 0 and bind == 1 and name]
    assert not unresolved


def _check_param_layout(cubin: bytes, symbols) -> None:
    for name, signature in symbols.kernels.items():
        compiled = [(offset, size) for _ordinal, offset, size in kparam_info(cubin, name)]
        assert compiled == pb.param_layout(signature), name


@needs_nvcc
def test_every_example_env_kernel_builds_with_nvcc(toolchain, cache):
    """Without a GPU, nvcc still checks that every shipped env's step kernel
    compiles for a device with the backend's flags (one build of them all)."""
    from warp_drive.env.registry import BUILTIN_ENVS, get_env_class

    classes = [get_env_class(name) for name in BUILTIN_ENVS]
    plan = pb.plan_build(toolchain, "sm_90", sorted({cls.cuda_source_path() for cls in classes}))
    plan.compile()
    assert plan.target.read_bytes()[:4] == b"\x7fELF"
    assert {cls.step_kernel for cls in classes} <= set(plan.symbols.kernels)


@needs_nvcc
def test_kernel_parameters_match_what_nvcc_compiled(toolchain, cache, tmp_path):
    src = _write(tmp_path / "params.cu", """\
        extern "C" __global__ void k(const float* __restrict__ a, int n, double x, bool flag, short s,
                                     unsigned long long seed, char c, int* out, unsigned int u, long long ll) {
          if (threadIdx.x == 0) out[0] = (int)(a[0] + n + x + flag + s + seed + c + u + ll);
        }
        """)
    plan = pb.plan_build(toolchain, ARCH, [src])
    assert plan.compile() is False
    cubin = plan.target.read_bytes()
    _check_loadable(cubin, ["k"])
    assert [(o, s) for _i, o, s in kparam_info(cubin, "k")] == EXPECTED_LAYOUT
    _check_param_layout(cubin, plan.symbols)
    # Same inputs: same key, no compiler run.
    again = pb.plan_build(toolchain, ARCH, [src])
    assert again.key == plan.key and again.compile() is True


@needs_nvcc
def test_framework_kernels_build_into_loadable_cubins(toolchain, cache):
    sources = sorted(build_cache.KERNELS_DIR.glob("*.cu"))
    if not sources:
        pytest.skip("no framework kernels yet")
    for group in [[s] for s in sources] + [sources]:  # each file, and all in one module as core_module does
        plan = pb.plan_build(toolchain, ARCH, group)
        plan.compile()
        cubin = plan.target.read_bytes()
        assert plan.symbols.kernels, group
        _check_loadable(cubin, plan.symbols.kernels)
        _check_param_layout(cubin, plan.symbols)


COOP_KERNEL = """\
    #include <warp_drive/core.h>
    // Each env spans gridDim.y blocks; every agent reads a value written by an
    // agent of the other block, so a partial barrier gives wrong results.
    extern "C" __global__ void wd_test_mirror(const float* in, float* out, int n_agents) {
      int agent = wd_agent_id();
      bool active = agent < n_agents;
      float v = active ? 2.0f * in[wd_agent_index(n_agents)] : 0.0f;
      if (active) out[wd_agent_index(n_agents)] = v;
      wd_sync_env();
      float mirrored = active ? out[wd_env_id() * n_agents + (n_agents - 1 - agent)] : 0.0f;
      wd_sync_env();
      if (active) out[wd_agent_index(n_agents)] = v + mirrored + 1.0f;
    }
    """


@needs_nvcc
def test_grid_sync_kernel_is_a_loadable_cubin_without_rdc(toolchain, cache, tmp_path):
    plan = pb.plan_build(toolchain, ARCH, [_write(tmp_path / "coop.cu", COOP_KERNEL)])
    assert "-rdc=true" not in plan.command
    plan.compile()
    cubin = plan.target.read_bytes()
    _check_loadable(cubin, ["wd_test_mirror"])
    _check_param_layout(cubin, plan.symbols)


@needs_nvcc
def test_cache_key_sees_header_branches_only_nvcc_reads(toolchain, cache, tmp_path):
    include = tmp_path / "inc"
    include.mkdir()
    header = include / "knob.h"
    src = _write(tmp_path / "k.cu", """\
        #include "knob.h"
        extern "C" __global__ void knob(float* out) { out[0] = KNOB; }
        """)
    header.write_text("#ifdef __CUDACC__\n#define KNOB 1.0f\n#else\n#define KNOB 0.0f\n#endif\n")
    first = pb.plan_build(toolchain, ARCH, [src], include_dirs=[include])
    header.write_text("#ifdef __CUDACC__\n#define KNOB 2.0f\n#else\n#define KNOB 0.0f\n#endif\n")
    second = pb.plan_build(toolchain, ARCH, [src], include_dirs=[include])
    assert first.key != second.key
    assert pb.plan_build(toolchain, ARCH, [src], include_dirs=[include], defines={"X": "1"}).key != second.key


@needs_nvcc
def test_nvcc_errors_name_the_users_file_and_line(toolchain, cache, tmp_path):
    src = _write(tmp_path / "broken_env.cu", """\
        extern "C" __global__ void broken(float* a) {
          a[0] = 1.0f;
          a[1] = undefined_thing;
        }
        """)
    plan = pb.plan_build(toolchain, ARCH, [src])
    with pytest.raises(KernelBuildError) as info:
        plan.compile()
    assert f"{src.resolve()}(3)" in str(info.value) and "undefined_thing" in str(info.value)
    assert not plan.target.exists()


def test_missing_source_is_a_build_error(tmp_path):
    toolchain = pb.NvccToolchain("nvcc", "", frozenset())
    with pytest.raises(KernelBuildError, match="does not exist"):
        pb.plan_build(toolchain, ARCH, [tmp_path / "nope.cu"])


# ---------------------------------------------------------------- ctypes prototypes vs cuda.h
def _cuda_header() -> Path | None:
    candidates = []
    if NVCC:
        candidates.append(Path(NVCC).resolve().parent.parent / "include" / "cuda.h")
    candidates += [Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include" / "cuda.h",
                   Path("/usr/local/cuda/include/cuda.h")]
    return next((c for c in candidates if c.is_file()), None)


CUDA_H = _cuda_header()
needs_cuda_h = pytest.mark.skipif(CUDA_H is None, reason="cuda.h not found")

_SCALAR_TYPES = {  # cuda.h parameter type -> size in bytes
    "CUfunction": 8, "CUmodule": 8, "CUstream": 8, "CUcontext": 8,
    "CUdeviceptr": 8, "size_t": 8, "unsigned int": 4, "int": 4, "CUresult": 4, "CUdevice": 4,
    "CUdevice_attribute": 4, "CUfunction_attribute": 4, "char": 1, "void": None,
}


def _declaration(text: str, name: str) -> list[str]:
    match = re.search(r"CUresult\s+CUDAAPI\s+" + re.escape(name) + r"\s*\(([^;]*?)\)\s*;", text, re.S)
    assert match, f"{name} is not declared in cuda.h"
    return [p.strip() for p in match.group(1).split(",")]


def _is_pointer_ctype(ctype) -> bool:
    """c_void_p, c_char_p or a POINTER(...) type (whose _type_ is a class, not a format letter)."""
    return ctype in (ctypes.c_void_p, ctypes.c_char_p) or isinstance(getattr(ctype, "_type_", None), type)


@needs_cuda_h
def test_driver_prototypes_match_cuda_h():
    text = CUDA_H.read_text(errors="replace")
    defines = dict(re.findall(r"^#define\s+(cu\w+)\s+(.+?)\s*$", text, re.M))
    aliases = {}  # exported name -> the name cuda.h declares it under
    for lhs, rhs in defines.items():
        inner = re.sub(r"__CUDA_API_PT(?:DS|SZ)\((\w+)\)", r"\1", rhs).strip()
        if re.fullmatch(r"\w+", inner):
            aliases.setdefault(inner, lhs)
    for name, argtypes in pb.DRIVER_PROTOTYPES.items():
        if name in defines:  # cuda.h redirects this name: libcuda exports the target instead
            inner = re.sub(r"__CUDA_API_PT(?:DS|SZ)\((\w+)\)", r"\1", defines[name]).strip()
            assert inner == name, f"bind {inner} instead of {name} (cuda.h: #define {name} {defines[name]})"
        declared = aliases.get(name, name)
        params = _declaration(text, declared)
        assert len(params) == len(argtypes), name
        for param, ctype in zip(params, argtypes):
            stars = param.count("*")
            words = re.sub(r"\bconst\b", " ", param).replace("*", " ").split()
            base = " ".join(words[:-1])  # cuda.h names every parameter
            if stars:
                assert _is_pointer_ctype(ctype), f"{name}: {param!r} is a pointer; bound as {ctype}"
                if stars == 1 and _SCALAR_TYPES.get(base) and isinstance(getattr(ctype, "_type_", None), type):
                    assert ctypes.sizeof(ctype._type_) == _SCALAR_TYPES[base], f"{name}: {param!r} bound as {ctype}"
            else:
                assert base in _SCALAR_TYPES, f"{name}: unexpected parameter type {param!r}"
                assert ctypes.sizeof(ctype) == _SCALAR_TYPES[base], f"{name}: {param!r} bound as {ctype}"


@needs_cuda_h
def test_driver_constants_match_cuda_h():
    text = CUDA_H.read_text(errors="replace")
    for name in dir(pb):
        if re.fullmatch(r"CU(DA)?_[A-Z0-9_]+", name) and isinstance(getattr(pb, name), int):
            match = re.search(r"\b" + name + r"\s*=\s*(0x[0-9a-fA-F]+|\d+)", text)
            assert match, f"{name} not in cuda.h"
            assert int(match.group(1), 0) == getattr(pb, name), name


# ---------------------------------------------------------------- the GPU code paths against a fake driver
class _FakeContext:
    def __init__(self):
        self.pushed = 0

    def push(self):
        self.pushed += 1

    def pop(self):
        self.pushed -= 1


class _FakePyCudaDevice:
    context = _FakeContext()

    def __init__(self, index):
        self.index = index

    def retain_primary_context(self):
        return self.context

    def get_attribute(self, attribute):
        return {"MAX_THREADS_PER_BLOCK": 1024, "MAX_SHARED_MEMORY_PER_BLOCK": 48 * 1024,
                "MULTIPROCESSOR_COUNT": 4}[attribute]

    def compute_capability(self):
        return (9, 0)

    def name(self):
        return "Fake H100"


def _fake_pycuda_driver():
    import types

    module = types.ModuleType("pycuda.driver")
    module.init = lambda flags=0: None
    module.Device = _FakePyCudaDevice
    module.device_attribute = types.SimpleNamespace(
        MAX_THREADS_PER_BLOCK="MAX_THREADS_PER_BLOCK", MAX_SHARED_MEMORY_PER_BLOCK="MAX_SHARED_MEMORY_PER_BLOCK",
        MULTIPROCESSOR_COUNT="MULTIPROCESSOR_COUNT")
    return module


class _FakeDriver:
    """libcuda as the backend calls it, over a real cubin; kernels run in numpy
    on host memory, reading their arguments from the packed void** array."""

    BLOCKS_PER_SM = 2

    def __init__(self, kernels):
        self.kernels = kernels  # name -> python implementation(args, grid, block)
        self.modules, self.functions, self.globals, self.calls = {}, {}, {}, []
        self.current = None

    @staticmethod
    def _out(ref, value):
        ref._obj.value = value

    def error_name(self, code):
        return f"CUresult {code}"

    def cuGetErrorName(self, code, ref):
        self._out(ref, f"CUDA_ERROR_{code}".encode())
        return 0

    def cuGetErrorString(self, code, ref):
        self._out(ref, b"fake")
        return 0

    def cuDriverGetVersion(self, ref):
        self._out(ref, 13000)
        return 0

    def cuDeviceGet(self, ref, index):
        self._out(ref, index)
        return 0

    def cuDeviceGetAttribute(self, ref, attribute, device):
        self._out(ref, {pb.CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: 1}[attribute])
        return 0

    def cuCtxGetCurrent(self, ref):
        self._out(ref, 0xC0)
        return 0

    def cuCtxSetCurrent(self, context):
        self.current = context
        return 0

    def cuModuleLoadData(self, ref, image):
        handle = 0x1000 + len(self.modules)
        self.modules[handle] = bytes(image)
        self._out(ref, handle)
        return 0

    def cuModuleGetFunction(self, ref, module, name):
        functions = {n for n, _b, typ, _s in elf_symbols(self.modules[module]) if typ == 2}
        if name.decode() not in functions:
            return pb.CUDA_ERROR_NOT_FOUND
        handle = 0x2000 + len(self.functions)
        self.functions[handle] = (module, name.decode())
        self._out(ref, handle)
        return 0

    def cuModuleGetGlobal_v2(self, address, size, module, name):
        sizes = elf_symbol_sizes(self.modules[module])
        if name.decode() not in sizes:
            return pb.CUDA_ERROR_NOT_FOUND
        buffer = self.globals.setdefault(name.decode(), (ctypes.c_char * sizes[name.decode()])())
        self._out(address, ctypes.addressof(buffer))
        self._out(size, sizes[name.decode()])
        return 0

    def cuMemcpyHtoDAsync_v2(self, dst, src, count, stream):
        ctypes.memmove(dst, src, count)
        return 0

    def cuStreamSynchronize(self, stream):
        return 0

    def cuFuncGetAttribute(self, ref, attribute, function):
        self._out(ref, 1024)
        return 0

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, ref, function, threads, shared):
        self._out(ref, self.BLOCKS_PER_SM)
        return 0

    def _run(self, kind, function, gx, gy, gz, bx, by, bz, shared, stream, argv):
        _module, name = self.functions[function]
        self.calls.append((kind, name, (gx, gy, gz), (bx, by, bz), shared, stream))
        slots = (ctypes.c_void_p * 16).from_address(argv) if argv else []
        self.kernels[name](slots, (gx, gy, gz), (bx, by, bz))
        return 0

    def cuLaunchKernel(self, *args):
        assert args[-1] is None  # extra
        return self._run("launch", *args[:-1])

    def cuLaunchCooperativeKernel(self, *args):
        return self._run("cooperative", *args)


def _array(slot, ctype, n):
    address = ctypes.c_void_p.from_address(slot).value
    return np.ctypeslib.as_array((ctype * n).from_address(address))


def _axpy(slots, grid, block):
    n = ctypes.c_int32.from_address(slots[3]).value
    a = ctypes.c_float.from_address(slots[2]).value
    x, y = _array(slots[0], ctypes.c_float, n), _array(slots[1], ctypes.c_float, n)
    y[:] = a * x + y


def _step(slots, grid, block):  # (int* counter, long long add, unsigned char flag, double scale)
    counter = _array(slots[0], ctypes.c_int32, 1)
    add = ctypes.c_int64.from_address(slots[1]).value
    flag = ctypes.c_uint8.from_address(slots[2]).value
    scale = ctypes.c_double.from_address(slots[3]).value
    counter[0] = int((counter[0] + add + flag) * scale)


@needs_nvcc
def test_gpu_code_paths_against_a_fake_driver(toolchain, cache, tmp_path, monkeypatch):
    import types

    coefficients = {}

    def coeffs_apply(slots, grid, block):
        n = ctypes.c_int32.from_address(slots[2]).value
        x, y = _array(slots[0], ctypes.c_float, n), _array(slots[1], ctypes.c_float, n)
        c = np.frombuffer(bytes(fake.globals["wd_test_coeffs"]), dtype=np.float32)
        coefficients["seen"] = c.copy()
        y[:] = c[np.arange(n) % 4] * x

    def mirror(slots, grid, block):
        n = ctypes.c_int32.from_address(slots[2]).value
        x = _array(slots[0], ctypes.c_float, grid[0] * n).reshape(grid[0], n)
        out = _array(slots[1], ctypes.c_float, grid[0] * n).reshape(grid[0], n)
        out[:] = 2 * x + 2 * x[:, ::-1] + 1

    fake = _FakeDriver({"wd_test_axpy": _axpy, "wd_test_step": _step, "wd_test_coeffs_apply": coeffs_apply,
                        "wd_test_mirror": mirror, "wd_test_mismatch": None})
    monkeypatch.setitem(sys.modules, "pycuda", types.ModuleType("pycuda"))
    monkeypatch.setitem(sys.modules, "pycuda.driver", _fake_pycuda_driver())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(pb, "_Driver", lambda: fake)
    monkeypatch.setattr(pb.atexit, "register", lambda fn: None)

    backend = pb.PyCudaBackend()
    assert backend.device == torch.device("cuda", 0) and backend.arch == "sm_90"
    assert backend.limits.max_threads_per_block == 1024 and backend.multiprocessors == 4
    assert _FakePyCudaDevice.context.pushed == 1 and backend._context == 0xC0
    # The fake runs kernels on host memory: let CPU tensors stand in for device ones.
    backend.device = torch.device("cpu")
    backend._raw_stream = lambda index: 0x5

    src = tmp_path / "gpu_test_kernels.cu"
    src.write_text(textwrap.dedent("""\
        #include <warp_drive/core.h>
        __constant__ float wd_test_coeffs[4];
        extern "C" __global__ void wd_test_axpy(const float* x, float* y, float a, int n) {
          int i = wd_global_thread_id();
          if (i < n) y[i] = a * x[i] + y[i];
        }
        extern "C" __global__ void wd_test_coeffs_apply(const float* x, float* y, int n) {
          int i = wd_global_thread_id();
          if (i < n) y[i] = wd_test_coeffs[i % 4] * x[i];
        }
        extern "C" __global__ void wd_test_step(int* counter, long long add, unsigned char flag, double scale) {
          if (threadIdx.x == 0 && blockIdx.x == 0) counter[0] = (int)((counter[0] + add + flag) * scale);
        }
        """) + textwrap.dedent(COOP_KERNEL))
    module = backend.build([src])
    assert module.from_cache is False and backend.build([src]) is module

    x = torch.arange(10, dtype=torch.float32)
    y = torch.ones(10)
    module.get_function("wd_test_axpy")(x, y, 2.0, 10, grid=(1, 1, 1), block=[256])
    torch.testing.assert_close(y, 2 * x + 1)
    assert fake.calls[-1] == ("launch", "wd_test_axpy", (1, 1, 1), (256, 1, 1), 0, 0x5)

    counter = torch.zeros(1, dtype=torch.int32)
    launch = module.get_function("wd_test_step").bind(counter, 5, 1, 2.0)
    launch.launch(1, 1)
    launch.set_scalar(1, -2)
    launch.set_scalar(3, 0.5)
    launch.launch(1, 1)
    assert counter.item() == 5
    with pytest.raises(KernelLaunchError, match="does not fit"):
        launch.set_scalar(2, 256)
    with pytest.raises(KernelLaunchError, match="threads per block"):
        launch.launch(1, 2048)
    with pytest.raises(KernelLaunchError, match="dynamic shared memory"):
        launch.launch(1, 1, shared_mem=64 * 1024)

    module.set_constant("wd_test_coeffs", np.array([1, 2, 3, 4], dtype=np.float32))
    out = torch.zeros(8)
    module.get_function("wd_test_coeffs_apply")(torch.ones(8), out, 8, grid=1, block=8)
    assert out.tolist() == [1, 2, 3, 4, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="16 bytes"):
        module.set_constant("wd_test_coeffs", np.zeros(3, dtype=np.float32))
    with pytest.raises(KeyError):
        module.set_constant("no_such_constant", np.zeros(1, dtype=np.float32))

    mirror = module.get_function("wd_test_mirror")
    x = torch.rand(3, 8)
    out = torch.zeros_like(x)
    mirror(x, out, 8, grid=(3, 2, 1), block=(4, 1, 1), cooperative=True)
    torch.testing.assert_close(out, 2 * x + 2 * x.flip(1) + 1)
    assert fake.calls[-1][:3] == ("cooperative", "wd_test_mirror", (3, 2, 1))
    too_many = 4 * _FakeDriver.BLOCKS_PER_SM // 2 + 1  # envs of 2 blocks on 4 SMs x 2 blocks
    with pytest.raises(KernelLaunchError, match="at most 4 envs"):
        mirror(x, out, 8, grid=(too_many, 2, 1), block=(4, 1, 1), cooperative=True)

    # A launch refused by the driver names the kernel and the error.
    fake.cuLaunchKernel = lambda *args: pb.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    with pytest.raises(KernelLaunchError, match="wd_test_axpy.*701.*registers"):
        module.get_function("wd_test_axpy")(x, out, 1.0, 1, grid=1, block=1)
    # A thread without a current context: made current, then retried.
    attempts = []
    fake.cuLaunchKernel = lambda *args: attempts.append(fake.current) or (
        pb.CUDA_ERROR_INVALID_CONTEXT if len(attempts) == 1 else 0)
    module.get_function("wd_test_axpy")(x, out, 1.0, 1, grid=1, block=1)
    assert attempts == [None, 0xC0]

    # The compiled parameter table is compared with the parsed signature.
    bad = tmp_path / "mismatch.cu"
    bad.write_text(textwrap.dedent("""\
        #ifdef __CUDACC__
        #define WD_TEST_T int
        #else
        #define WD_TEST_T long long
        #endif
        extern "C" __global__ void wd_test_mismatch(WD_TEST_T v, int* out) { out[0] = (int)v; }
        extern "C" __global__ void wd_test_axpy(const float* x, float* y, float a, int n) {}
        """))
    mismatched = backend.build([bad])
    mismatched.get_function("wd_test_axpy")
    with pytest.raises(KernelBuildError, match="parameter 0 'long long v' is 8 bytes .* but 4 bytes"):
        mismatched.get_function("wd_test_mismatch")
    # A parameter only nvcc sees: found from the cubin's table, with no driver
    # query past the kernel's last parameter (compute-sanitizer reports those).
    extra = tmp_path / "extra_param.cu"
    extra.write_text(textwrap.dedent("""\
        #ifdef __CUDACC__
        #define WD_TEST_EXTRA , int only_nvcc_sees_this
        #else
        #define WD_TEST_EXTRA
        #endif
        extern "C" __global__ void wd_test_mismatch(int* out WD_TEST_EXTRA) { out[0] = 1; }
        """))
    with pytest.raises(KernelBuildError, match="compiled with 2 parameters, but its source reads as .*[(]1;"):
        backend.build([extra]).get_function("wd_test_mismatch")

    backend._release_context()
    assert _FakePyCudaDevice.context.pushed == 0


# ---------------------------------------------------------------- device printf reaches a redirected stdout
def _run_with_stdout_in(path: Path, script: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``script`` in a child whose stdout is the file ``path`` (so C's stdout is fully buffered)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with path.open("w") as stdout:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(script), str(path), *args], cwd=REPO, env=env,
                              stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300)


def test_flush_c_stdio_writes_out_what_c_buffered(tmp_path):
    """``synchronize()``'s flush on its own: C-level printf output (where the CUDA
    driver puts device printf) held in C's buffer because stdout is a file is in
    the file once ``flush_c_stdio()`` returns, after what Python printed first."""
    out = tmp_path / "stdout.txt"
    proc = _run_with_stdout_in(out, """\
        import ctypes, sys
        from pathlib import Path
        from warp_drive.runtime.backends.pycuda_backend import flush_c_stdio
        out = Path(sys.argv[1])
        print("from python, first")
        ctypes.CDLL(None).printf(b"from C %d\\n", 42)
        held = out.read_text()
        assert "from C" not in held, f"C's stdout is not buffered here: {held!r}"
        flush_c_stdio()
        text = out.read_text()
        assert text == "from python, first\\nfrom C 42\\n", repr(text)
        sys.stderr.write("FLUSHED\\n")
        """)
    assert proc.returncode == 0 and "FLUSHED" in proc.stderr, proc.stderr
    assert out.read_text() == "from python, first\nfrom C 42\n"



def test_synchronize_writes_python_output_out_before_the_driver_prints(tmp_path):
    """The 580.x driver (H100) writes device printf output to file descriptor 1
    *during* the wait, not into C's buffer. ``PyCudaBackend.synchronize`` must
    write out what Python still buffers before it waits, or a line printed before
    the launch lands after the kernel's output (the GPU test
    ``test_device_printf_is_in_a_redirected_stdout_after_synchronize`` failed so).
    Here torch's wait is replaced by what that driver does in it."""
    out = tmp_path / "stdout.txt"
    proc = _run_with_stdout_in(out, """\
        import os, sys, types
        from pathlib import Path
        import torch
        from warp_drive.runtime.backends.pycuda_backend import PyCudaBackend
        out = Path(sys.argv[1])
        torch.cuda.synchronize = lambda device=None: os.write(1, b"hello from block 0\\n")
        print("before the launch")
        PyCudaBackend.synchronize(types.SimpleNamespace(device="cuda:0"))
        text = out.read_text()
        assert text == "before the launch\\nhello from block 0\\n", repr(text)
        sys.stderr.write("IN ORDER\\n")
        """)
    assert proc.returncode == 0 and "IN ORDER" in proc.stderr, proc.stderr

# ---------------------------------------------------------------- on a GPU
@pytest.fixture(scope="module")
def backend():
    from warp_drive.runtime.backends import get_backend

    return get_backend("pycuda")


@pytest.fixture
def gpu_module(backend, tmp_path_factory):
    src = tmp_path_factory.mktemp("kernels") / "gpu_test_kernels.cu"
    src.write_text(textwrap.dedent("""\
        #include <warp_drive/core.h>
        __constant__ float wd_test_coeffs[4];
        extern "C" __global__ void wd_test_axpy(const float* x, float* y, float a, int n) {
          int i = wd_global_thread_id();
          if (i < n) y[i] = a * x[i] + y[i];
        }
        extern "C" __global__ void wd_test_coeffs_apply(const float* x, float* y, int n) {
          int i = wd_global_thread_id();
          if (i < n) y[i] = wd_test_coeffs[i % 4] * x[i];
        }
        extern "C" __global__ void wd_test_step(int* counter, long long add, unsigned char flag, double scale) {
          if (threadIdx.x == 0 && blockIdx.x == 0) counter[0] = (int)((counter[0] + add + flag) * scale);
        }
        """) + textwrap.dedent(COOP_KERNEL))
    return backend.build([src])


@pytest.mark.gpu
def test_backend_shares_torchs_primary_context(backend):
    assert backend.device.type == "cuda" and backend.device.index == torch.cuda.current_device()
    assert backend.limits.max_threads_per_block >= 1024
    assert backend.limits.max_dynamic_shared_bytes >= 48 * 1024
    torch.zeros(1, device=backend.device)  # torch's runtime makes its context current
    current = ctypes.c_void_p()
    assert backend.driver.cuCtxGetCurrent(ctypes.byref(current)) == 0
    assert current.value == backend._context


@pytest.mark.gpu
def test_launch_over_torch_tensors(backend, gpu_module):
    n = 1000
    x = torch.arange(n, dtype=torch.float32, device=backend.device)
    y = torch.ones(n, dtype=torch.float32, device=backend.device)
    gpu_module.get_function("wd_test_axpy")(x, y, 2.0, n, grid=(4, 1, 1), block=(256, 1, 1))
    backend.synchronize()
    torch.testing.assert_close(y, 2.0 * x + 1.0)


@pytest.mark.gpu
@pytest.mark.parametrize("use_side_stream", [False, True])
def test_torch_ops_and_kernels_interleave_in_both_orders(backend, gpu_module, use_side_stream):
    axpy = gpu_module.get_function("wd_test_axpy")
    n = 1 << 20
    stream = torch.cuda.Stream(device=backend.device) if use_side_stream else torch.cuda.current_stream(backend.device)
    with torch.cuda.stream(stream):
        x = torch.empty(n, dtype=torch.float32, device=backend.device)
        y = torch.zeros(n, dtype=torch.float32, device=backend.device)
        launch = axpy.bind(x, y, 1.0, n)
        expected = torch.zeros(n, dtype=torch.float32, device=backend.device)
        for step in range(20):
            x.fill_(float(step))  # torch writes, the kernel reads
            y.mul_(0.5)  # the kernel's previous result, read and written by torch
            launch.launch((n // 256, 1, 1), (256, 1, 1))
            expected = expected * 0.5 + step
            y.add_(1.0)  # torch reads what the kernel wrote
            expected = expected + 1.0
    stream.synchronize()
    torch.testing.assert_close(y, expected, rtol=0, atol=0)  # the same float32 operations in the same order


@pytest.mark.gpu
def test_scalars_of_every_width_and_set_scalar(backend, gpu_module):
    counter = torch.zeros(1, dtype=torch.int32, device=backend.device)
    launch = gpu_module.get_function("wd_test_step").bind(counter, 5, 1, 2.0)
    launch.launch(1, 1)  # (0 + 5 + 1) * 2 = 12
    launch.set_scalar(1, -2)
    launch.set_scalar(3, 0.5)
    launch.launch(1, 1)  # (12 - 2 + 1) * 0.5 = 5.5 -> 5
    backend.synchronize()
    assert counter.item() == 5
    with pytest.raises(KernelLaunchError, match="pointer"):
        launch.set_scalar(0, 1)
    with pytest.raises(KernelLaunchError, match="does not fit"):
        launch.set_scalar(2, 256)


@pytest.mark.gpu
def test_set_constant(backend, gpu_module):
    x = torch.ones(8, dtype=torch.float32, device=backend.device)
    y = torch.zeros(8, dtype=torch.float32, device=backend.device)
    gpu_module.set_constant("wd_test_coeffs", np.array([1, 2, 3, 4], dtype=np.float32))
    gpu_module.get_function("wd_test_coeffs_apply")(x, y, 8, grid=1, block=8)
    backend.synchronize()
    assert y.tolist() == [1, 2, 3, 4, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="16 bytes"):
        gpu_module.set_constant("wd_test_coeffs", np.zeros(3, dtype=np.float32))
    with pytest.raises(KeyError):
        gpu_module.set_constant("no_such_constant", np.zeros(1, dtype=np.float32))


@pytest.mark.gpu
def test_cooperative_launch_with_two_blocks_per_env(backend, gpu_module):
    n_envs, n_agents, blocks_per_env = 64, 200, 2
    x = torch.rand(n_envs, n_agents, device=backend.device)
    out = torch.zeros_like(x)
    kernel = gpu_module.get_function("wd_test_mirror")
    kernel(x, out, n_agents, grid=(n_envs, blocks_per_env, 1), block=(n_agents // blocks_per_env, 1, 1),
           cooperative=True)
    backend.synchronize()
    torch.testing.assert_close(out, 2 * x + 2 * x.flip(1) + 1)


@pytest.mark.gpu
def test_cooperative_launch_refuses_grids_that_cannot_be_resident(backend, gpu_module):
    kernel = gpu_module.get_function("wd_test_mirror")
    x = torch.zeros(1, device=backend.device)
    launch = kernel.bind(x, x, 1)
    with pytest.raises(KernelLaunchError, match="resident"):
        launch.launch((backend.multiprocessors * 64, 2, 1), (1024, 1, 1), cooperative=True)


@pytest.mark.gpu
def test_argument_errors(backend, gpu_module):
    axpy = gpu_module.get_function("wd_test_axpy")
    cpu = torch.zeros(4)
    with pytest.raises(KernelLaunchError, match="on cuda"):
        axpy.bind(cpu, cpu, 1.0, 4)
    gpu = torch.zeros(4, device=backend.device)
    with pytest.raises(KernelLaunchError, match="threads per block"):
        axpy(gpu, gpu, 1.0, 4, grid=1, block=4096)
    with pytest.raises(KeyError, match="extern"):
        gpu_module.get_function("nope")


@pytest.mark.gpu
def test_launch_from_a_thread_torch_never_used(backend, gpu_module):
    x = torch.ones(256, device=backend.device)
    y = torch.zeros(256, device=backend.device)
    launch = gpu_module.get_function("wd_test_axpy").bind(x, y, 3.0, 256)
    errors = []

    def worker():
        try:
            launch.launch(1, 256)
            backend.synchronize()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert not errors, errors
    torch.cuda.synchronize()
    assert y.eq(3.0).all()


@pytest.mark.gpu
def test_framework_kernels_load(backend):
    sources = sorted(build_cache.KERNELS_DIR.glob("*.cu"))
    if not sources:
        pytest.skip("no framework kernels yet")
    module = backend.build(sources)
    for name in module.kernel_names:
        module.get_function(name)  # also compares the signature with the compiled parameters
    assert backend.build(sources) is module


@pytest.mark.gpu
def test_signature_mismatch_between_host_and_nvcc_views_is_caught(backend, tmp_path):
    src = tmp_path / "mismatch.cu"
    src.write_text(textwrap.dedent("""\
        #ifdef __CUDACC__
        #define WD_TEST_T int
        #else
        #define WD_TEST_T long long
        #endif
        extern "C" __global__ void wd_test_mismatch(WD_TEST_T v, int* out) { out[0] = (int)v; }
        """))
    with pytest.raises(KernelBuildError, match="bytes"):
        backend.build([src]).get_function("wd_test_mismatch")


@pytest.mark.gpu
def test_device_assert_surfaces_as_kernel_launch_error(tmp_path):
    # In a subprocess: a device-side assert leaves the CUDA context unusable.
    src = tmp_path / "assert_env.cu"
    src.write_text('#include <assert.h>\nextern "C" __global__ void wd_test_assert(int* a) { assert(a[0] == 1); }\n')
    script = textwrap.dedent(f"""\
        import torch
        from warp_drive.runtime.backends import get_backend
        from warp_drive.runtime.backends.base import KernelLaunchError
        backend = get_backend("pycuda")
        kernel = backend.build([{str(src)!r}]).get_function("wd_test_assert")
        kernel(torch.zeros(1, dtype=torch.int32, device=backend.device), grid=1, block=1)
        try:
            backend.synchronize()
        except KernelLaunchError as exc:
            print("CAUGHT", exc)
        """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert "CAUGHT" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.gpu
def test_device_printf_is_in_a_redirected_stdout_after_synchronize(tmp_path):
    """CUDA moves device printf output into C's stdout at a synchronization; with
    stdout redirected to a file C would hold it until exit. The child reads its
    own stdout file back right after ``backend.synchronize()``."""
    out = tmp_path / "stdout.txt"
    proc = _run_with_stdout_in(out, """\
        import sys
        from pathlib import Path
        from warp_drive.runtime.backends import get_backend
        out, kernels = Path(sys.argv[1]), Path(sys.argv[2])
        backend = get_backend("pycuda")
        say_hello = backend.build([kernels / "assert_printf.cu"]).get_function("say_hello")
        print("before the launch")
        say_hello(42, grid=3, block=4)
        backend.synchronize()
        lines = out.read_text().splitlines()
        assert lines[:1] == ["before the launch"], lines
        assert sorted(lines[1:]) == [f"hello from block {b} tag 42" for b in range(3)], lines
        sys.stderr.write("PRINTED BEFORE EXIT\\n")
        """, str(REPO / "tests" / "kernels"))
    assert proc.returncode == 0 and "PRINTED BEFORE EXIT" in proc.stderr, proc.stderr

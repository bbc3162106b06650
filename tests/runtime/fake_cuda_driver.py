"""A CUDA driver for the ``pycuda`` executor's host code whose kernels are the real ones.

No GPU runs here, so :mod:`warp_drive.runtime.backends.pycuda_backend` is pointed at
this stand-in for ``libcuda`` (and for ``pycuda.driver``): the backend builds
with nvcc as it always does, and hands the driver the cubin, its constant
uploads and its launches. The driver

* loads a module: it finds which sources (with include dirs and defines) the
  backend compiled that cubin from -- the backend's build plans are recorded --
  and builds the *same* sources with the GPU-shaped cpu executor
  (:class:`~warp_drive.runtime.backends.cpu.GpuShapedCpuBackend`, which like nvcc does
  not define ``WD_CPU_EXECUTOR``). Every load gets its own copy of the cpu
  library, so each module has its own ``__constant__`` storage, as on a GPU;
* answers ``cuModuleGetGlobal`` from the cubin's symbol table (name and size)
  with the address of the cpu module's symbol, and copies constant uploads
  there (refusing copies outside a known symbol);
* answers the function attributes and the occupancy query from what nvcc wrote
  into the cubin (registers, static shared memory, stack frame) with sm_90's
  limits, so launch sizes and co-residency come out as on an H100;
* launches: it reads the ``void**`` ``kernelParams`` array the backend packed
  using the parameter table nvcc compiled (``.nv.info.<kernel>``,
  EIATTR_KPARAM_INFO: offset and size of each parameter, read here by its own
  parser, not the backend's), copies each value into a parameter buffer at its
  compiled offset as the driver does, checks that every ``kernelParams[i]`` is
  readable for the compiled size and every pointer parameter points at mapped
  memory, and runs the cpu build's kernel on that buffer with the launch's
  grid and block. Device memory is host memory: torch CPU tensors whose
  addresses the backend passes as device pointers.
* refuses what the real driver refuses: launches without a current context on
  the calling thread (CUDA_ERROR_INVALID_CONTEXT), blocks too large for the
  device or for the kernel's registers, too much shared memory, cooperative
  grids that cannot be co-resident (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE),
  cubins for another architecture. A kernel that fails (a device ``assert``) or
  is handed a pointer into unmapped memory leaves a sticky error, as on a GPU:
  the launch returns success, ``torch.cuda.synchronize`` raises, and every later
  call returns the error. ``fail_next(entry, code)`` makes the next call of a
  driver entry point return ``code``.

What it cannot do: run an env spread over several blocks (a grid-wide
``cooperative_groups`` sync); the cpu executor has no grid barrier, and such a
kernel fails there with its ``wd_sync_env`` assert (reported as a device assert).
Co-residency is still checked first, as the driver does.

:func:`install` puts it under a :class:`PyCudaBackend` with pytest's monkeypatch.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import struct
import sys
import tempfile
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path

import torch

from warp_drive.runtime.backends import get_backend
from warp_drive.runtime.backends import pycuda_backend as pb
from warp_drive.runtime.backends.base import KernelLaunchError
from warp_drive.runtime.backends.cpu import CpuModule, GpuShapedCpuBackend

# ---------------------------------------------------------------- cuda.h (CUDA 13.0)
CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_INVALID_IMAGE = 200
CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_NO_BINARY_FOR_GPU = 209
CUDA_ERROR_INVALID_HANDLE = 400
CUDA_ERROR_NOT_FOUND = 500
CUDA_ERROR_ILLEGAL_ADDRESS = 700
CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701
CUDA_ERROR_ASSERT = 710
CUDA_ERROR_LAUNCH_FAILED = 719
CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720

ERRORS = {  # code -> (cuGetErrorName, cuGetErrorString), as libcuda answers
    CUDA_SUCCESS: ("CUDA_SUCCESS", "no error"),
    CUDA_ERROR_INVALID_VALUE: ("CUDA_ERROR_INVALID_VALUE", "invalid argument"),
    CUDA_ERROR_INVALID_IMAGE: ("CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"),
    CUDA_ERROR_INVALID_CONTEXT: ("CUDA_ERROR_INVALID_CONTEXT", "invalid device context"),
    CUDA_ERROR_NO_BINARY_FOR_GPU: ("CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on "
                                   "the device"),
    CUDA_ERROR_INVALID_HANDLE: ("CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"),
    CUDA_ERROR_NOT_FOUND: ("CUDA_ERROR_NOT_FOUND", "named symbol not found"),
    CUDA_ERROR_ILLEGAL_ADDRESS: ("CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"),
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: ("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for "
                                         "launch"),
    CUDA_ERROR_ASSERT: ("CUDA_ERROR_ASSERT", "device-side assert triggered"),
    CUDA_ERROR_LAUNCH_FAILED: ("CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"),
    CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: ("CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks in "
                                              "cooperative launch"),
}
STICKY = range(700, 800)  # errors after which the context is unusable

CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95
CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3
CU_FUNC_ATTRIBUTE_NUM_REGS = 4

# ---------------------------------------------------------------- sm_90 (H100) limits
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
WARP = 32
REGISTERS_PER_SM = 65536
REGISTER_UNIT = 256  # registers, allocated per warp
WARP_GRANULARITY = 4
MAX_THREADS_PER_SM = 2048
MAX_BLOCKS_PER_SM = 32
SHARED_PER_SM = 228 * 1024
SHARED_RESERVED_PER_BLOCK = 1024
SHARED_PER_BLOCK = 48 * 1024  # without the opt-in attribute, which the backend never sets

EM_CUDA = 190
STT_OBJECT, STT_FUNC = 1, 2
EIATTR_KPARAM_INFO, EIATTR_CBANK_PARAM_SIZE = 0x17, 0x19
EIATTR_FRAME_SIZE, EIATTR_REGCOUNT = 0x11, 0x2F

PRIMARY_CONTEXT = 0xC0C0_0000
STREAM = 0x5757_0000  # the "current stream" the backend is told torch uses


class FakeDriverError(AssertionError):
    """The fake cannot stand for the driver here (the harness is wrong, not the backend)."""


# ---------------------------------------------------------------- the cubin, read on its own
@dataclass
class CubinKernel:
    name: str
    params: list[tuple[int, int, int]]  # (ordinal, offset, size) as nvcc compiled them
    param_bytes: int | None  # EIATTR_CBANK_PARAM_SIZE
    registers: int = 0
    frame_bytes: int = 0
    static_shared: int = 0


@dataclass
class Cubin:
    arch: tuple[int, int]
    kernels: dict[str, CubinKernel]
    objects: dict[str, int]  # global variable -> size in bytes


def _attributes(info: bytes):
    """(attribute, format, value or payload) of an ``.nv.info`` section."""
    position = 0
    while position + 4 <= len(info):
        fmt, attribute, value = struct.unpack_from("<BBH", info, position)
        position += 4
        if fmt == 0x04:
            yield attribute, fmt, info[position:position + value]
            position += value
        elif fmt in (0x01, 0x02, 0x03):
            yield attribute, fmt, value
        else:
            raise FakeDriverError(f".nv.info attribute format {fmt:#x} unknown to the fake driver")


def read_cubin(image: bytes) -> Cubin:
    """What the driver needs from a cubin: its architecture, kernels with their
    parameter tables and resources, and its global variables."""
    if image[:4] != b"\x7fELF" or image[4] != 2 or struct.unpack_from("<H", image, 0x12)[0] != EM_CUDA:
        raise ValueError("not a CUDA ELF64 image")
    e_flags, = struct.unpack_from("<I", image, 0x30)
    sm = (e_flags >> 8) & 0xFF  # e.g. 0x5a: sm_90
    e_shoff, = struct.unpack_from("<Q", image, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", image, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", image, e_shoff + i * e_shentsize) for i in range(e_shnum)]

    def cstr(table: bytes, offset: int) -> str:
        return table[offset:table.index(b"\0", offset)].decode()

    names = headers[e_shstrndx]
    section_names = image[names[4]:names[4] + names[5]]
    sections = {cstr(section_names, h[0]): (h, image[h[4]:h[4] + h[5]]) for h in headers}
    symtab, strtab = sections[".symtab"][1], sections[".strtab"][1]
    symbols = []
    for i in range(0, len(symtab), 24):
        name_offset, info, _other, _shndx, _value, size = struct.unpack_from("<IBBHQQ", symtab, i)
        symbols.append((cstr(strtab, name_offset), info & 0xF, size))
    kernels, objects = {}, {}
    for name, kind, size in symbols:
        if kind == STT_FUNC:
            params, param_bytes = [], None
            for attribute, _fmt, value in _attributes(sections.get(f".nv.info.{name}", (None, b""))[1]):
                if attribute == EIATTR_KPARAM_INFO:
                    _index, ordinal, offset, flags = struct.unpack_from("<IHHI", value)
                    params.append((ordinal, offset, flags >> 18))
                elif attribute == EIATTR_CBANK_PARAM_SIZE:
                    param_bytes = value
            shared = sections.get(f".nv.shared.{name}")
            kernels[name] = CubinKernel(name, sorted(params), param_bytes,
                                        static_shared=shared[0][5] if shared else 0)
        elif kind == STT_OBJECT and name:
            objects[name] = size
    for attribute, _fmt, value in _attributes(sections.get(".nv.info", (None, b""))[1]):
        if attribute in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE):
            symbol, amount = struct.unpack_from("<II", value)
            kernel = kernels.get(symbols[symbol][0])
            if kernel is not None:
                setattr(kernel, "registers" if attribute == EIATTR_REGCOUNT else "frame_bytes", amount)
    for kernel in kernels.values():  # the table must be whole: consecutive ordinals, no overlaps
        end = 0
        for position, (ordinal, offset, size) in enumerate(kernel.params):
            if ordinal != position or offset < end or offset % size:
                raise FakeDriverError(f"{kernel.name}: parameter table {kernel.params} is not a C layout")
            end = offset + size
        if kernel.param_bytes is not None and kernel.param_bytes != end:
            raise FakeDriverError(f"{kernel.name}: parameters end at {end}, the cubin says {kernel.param_bytes}")
    return Cubin((sm // 10, sm % 10), kernels, objects)


def registers_per_warp(registers: int) -> int:
    return -(-registers * WARP // REGISTER_UNIT) * REGISTER_UNIT


def max_threads_per_block(kernel: CubinKernel) -> int:
    """CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: the device's 1024, or fewer for a register-heavy kernel."""
    if not kernel.registers:
        return MAX_THREADS_PER_BLOCK
    warps = REGISTERS_PER_SM // registers_per_warp(kernel.registers)
    warps -= warps % WARP_GRANULARITY
    return min(MAX_THREADS_PER_BLOCK, warps * WARP)


def max_active_blocks_per_sm(kernel: CubinKernel, threads: int, dynamic_shared: int) -> int:
    """cuOccupancyMaxActiveBlocksPerMultiprocessor on sm_90."""
    warps = -(-threads // WARP)
    by_threads = MAX_THREADS_PER_SM // (warps * WARP)
    by_registers = (REGISTERS_PER_SM // registers_per_warp(kernel.registers)) // warps if kernel.registers else 1 << 30
    by_shared = SHARED_PER_SM // (kernel.static_shared + dynamic_shared + SHARED_RESERVED_PER_BLOCK)
    return max(0, min(MAX_BLOCKS_PER_SM, by_threads, by_registers, by_shared))


# ---------------------------------------------------------------- host memory probe
class _Probe:
    """Is ``[address, address + size)`` readable? ``write(2)`` from it into a
    pipe answers EFAULT instead of faulting the process."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        for fd in (self._read, self._write):
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        libc = ctypes.CDLL(None, use_errno=True)
        self._libc_write = libc.write
        self._libc_write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        self._libc_write.restype = ctypes.c_ssize_t

    def readable(self, address: int, size: int) -> bool:
        if not address:
            return False
        done = 0
        while done < size:
            chunk = min(size - done, 4096)
            written = self._libc_write(self._write, address + done, chunk)
            if written <= 0:
                return False
            os.read(self._read, written)
            done += written
        return True

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)


# ---------------------------------------------------------------- driver objects
@dataclass
class LoadedModule:
    handle: int
    cubin: Cubin
    sources: list[Path]
    include_dirs: list
    defines: dict | None
    cpu: CpuModule  # this load's own copy of the cpu build
    globals: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (address, size), fetched ones


@dataclass
class LoadedFunction:
    handle: int
    module: LoadedModule
    kernel: CubinKernel


@dataclass
class Launch:
    """One launch the driver accepted."""

    kind: str  # "launch" or "cooperative"
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int
    stream: int
    params: bytes  # the parameter buffer the kernel ran on, laid out as nvcc compiled it
    param_table: list[tuple[int, int, int]]

    def value(self, ordinal: int, fmt: str):
        """Parameter ``ordinal`` decoded with a ``struct`` format (e.g. ``"<i"``)."""
        _ordinal, offset, size = self.param_table[ordinal]
        return struct.unpack(fmt, self.params[offset:offset + size])[0]


class FakeCudaDriver:
    """libcuda's entry points as ``pycuda_backend._Driver`` binds them (see the module docstring)."""

    def __init__(self, multiprocessors: int = 132, compute_capability: tuple[int, int] = (9, 0),
                 cooperative_launch: bool = True, cpu_backend: GpuShapedCpuBackend | None = None):
        self.multiprocessors = multiprocessors
        self.compute_capability = compute_capability
        self.cooperative_launch = cooperative_launch
        # The shared cpu-gpu instance: its builds are cached once; each load still gets its own library copy.
        self.cpu = cpu_backend or get_backend("cpu-gpu")
        self.builds: list[tuple] = []  # (CubinBuild, include_dirs, defines) the backend planned
        self.modules: dict[int, LoadedModule] = {}
        self.functions: dict[int, LoadedFunction] = {}
        self.launches: list[Launch] = []
        self.faults: list[str] = []  # why the device failed, newest last
        self.constant_copies: list[tuple[str, int]] = []  # (symbol, bytes)
        self.sticky: int = CUDA_SUCCESS
        self.context_misses = 0  # calls refused for want of a current context on the calling thread
        self._injected: dict[str, list[int]] = {}
        self._tls = threading.local()
        self._probe = _Probe()
        self._directory = Path(tempfile.mkdtemp(prefix="wd_fake_cuda_"))
        self._next_handle = 0x1000
        self.pycuda_context = _Context(self)  # the primary context, as pycuda.driver hands it out

    def close(self) -> None:
        self._probe.close()
        shutil.rmtree(self._directory, ignore_errors=True)

    # ------------------------------------------------------------ test knobs
    def fail_next(self, entry: str, code: int) -> None:
        """The next call of driver entry point ``entry`` returns ``code``."""
        self._injected.setdefault(entry, []).append(code)

    def recording_plan_build(self, plan_build):
        """Wrap the backend's ``plan_build`` so a loaded cubin can be traced to its sources."""

        def planned(toolchain, arch, sources, include_dirs=(), defines=None, *args, **kwargs):
            plan = plan_build(toolchain, arch, sources, include_dirs, defines, *args, **kwargs)
            self.builds.append((plan, list(include_dirs), dict(defines) if defines else None))
            return plan

        return planned

    @property
    def current_context(self) -> int | None:
        return getattr(self._tls, "context", None)

    # ------------------------------------------------------------ helpers
    def _handle(self) -> int:
        self._next_handle += 0x10
        return self._next_handle

    @staticmethod
    def _out(ref, value) -> None:
        ref._obj.value = value

    def _enter(self, entry: str, context: bool = True) -> int:
        """Injected errors first; then (for calls that need one) a current context; then a sticky error."""
        injected = self._injected.get(entry)
        if injected:
            return injected.pop(0)
        if context and self.current_context is None:
            self.context_misses += 1
            return CUDA_ERROR_INVALID_CONTEXT
        if context and self.sticky != CUDA_SUCCESS:
            return self.sticky
        return CUDA_SUCCESS

    def _fault(self, code: int, message: str) -> int:
        """A failure on the device: reported by later calls, not by the launch that caused it."""
        self.faults.append(message)
        if self.sticky == CUDA_SUCCESS:
            self.sticky = code
        return CUDA_SUCCESS

    def torch_synchronize(self, device=None) -> None:
        """``torch.cuda.synchronize`` over this driver: raises as torch does after a device fault."""
        if self.sticky != CUDA_SUCCESS:
            raise RuntimeError(f"CUDA error: {ERRORS[self.sticky][1]}\n{self.faults[-1] if self.faults else ''}")

    # ------------------------------------------------------------ errors, versions, devices, contexts
    error_name = pb._Driver.error_name  # the backend's own wrapper over the two entry points below

    def cuGetErrorName(self, code, ref):
        if code not in ERRORS:
            return CUDA_ERROR_INVALID_VALUE
        self._out(ref, ERRORS[code][0].encode())
        return CUDA_SUCCESS

    def cuGetErrorString(self, code, ref):
        if code not in ERRORS:
            return CUDA_ERROR_INVALID_VALUE
        self._out(ref, ERRORS[code][1].encode())
        return CUDA_SUCCESS

    def cuDriverGetVersion(self, ref):
        self._out(ref, 13000)
        return self._enter("cuDriverGetVersion", context=False)

    def cuDeviceGet(self, ref, ordinal):
        if ordinal != 0:
            return CUDA_ERROR_INVALID_VALUE
        self._out(ref, 0)
        return self._enter("cuDeviceGet", context=False)

    def cuDeviceGetAttribute(self, ref, attribute, device):
        if attribute != CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH or device != 0:
            return CUDA_ERROR_INVALID_VALUE
        self._out(ref, int(self.cooperative_launch))
        return self._enter("cuDeviceGetAttribute", context=False)

    def cuCtxGetCurrent(self, ref):
        self._out(ref, self.current_context)
        return self._enter("cuCtxGetCurrent", context=False)

    def cuCtxSetCurrent(self, context):
        code = self._enter("cuCtxSetCurrent", context=False)
        if code == CUDA_SUCCESS:
            if context not in (None, 0, PRIMARY_CONTEXT):
                return CUDA_ERROR_INVALID_CONTEXT
            self._tls.context = context or None
        return code

    # ------------------------------------------------------------ modules
    def _build_of(self, image: bytes):
        for plan, include_dirs, defines in reversed(self.builds):
            if plan.target.is_file() and plan.target.read_bytes() == image:
                return plan, include_dirs, defines
        raise FakeDriverError("a cubin the backend did not plan was loaded: the fake cannot tell its sources")

    def cuModuleLoadData(self, ref, image):
        code = self._enter("cuModuleLoadData")
        if code != CUDA_SUCCESS:
            return code
        image = bytes(image)
        try:
            cubin = read_cubin(image)
        except (ValueError, struct.error, KeyError):
            return CUDA_ERROR_INVALID_IMAGE
        major, minor = self.compute_capability
        if cubin.arch[0] != major or cubin.arch[1] > minor:  # SASS runs only within its major version
            return CUDA_ERROR_NO_BINARY_FOR_GPU
        plan, include_dirs, defines = self._build_of(image)
        built = self.cpu.build(plan.sources, include_dirs, defines)
        handle = self._handle()
        # A copy of the library per load: its own __constant__ storage, shared with no other module.
        copy = self._directory / f"module_{handle:x}.so"
        shutil.copyfile(built.library_path, copy)
        symbols = types.SimpleNamespace(kernels=built.signatures, constants=built.constants)
        cpu = CpuModule(self.cpu, copy, symbols, built.sources, True, include_dirs, defines)
        self.modules[handle] = LoadedModule(handle, cubin, list(plan.sources), include_dirs, defines, cpu)
        self._out(ref, handle)
        return CUDA_SUCCESS

    def cuModuleUnload(self, module):
        code = self._enter("cuModuleUnload")
        if code == CUDA_SUCCESS and self.modules.pop(module, None) is None:
            return CUDA_ERROR_INVALID_HANDLE
        return code

    def cuModuleGetFunction(self, ref, module, name):
        code = self._enter("cuModuleGetFunction")
        if code != CUDA_SUCCESS:
            return code
        loaded = self.modules.get(module)
        if loaded is None:
            return CUDA_ERROR_INVALID_HANDLE
        kernel = loaded.cubin.kernels.get(name.decode())
        if kernel is None:
            return CUDA_ERROR_NOT_FOUND
        handle = self._handle()
        self.functions[handle] = LoadedFunction(handle, loaded, kernel)
        self._out(ref, handle)
        return CUDA_SUCCESS

    def cuModuleGetGlobal_v2(self, address_ref, size_ref, module, name):
        code = self._enter("cuModuleGetGlobal_v2")
        if code != CUDA_SUCCESS:
            return code
        loaded = self.modules.get(module)
        if loaded is None:
            return CUDA_ERROR_INVALID_HANDLE
        name = name.decode()
        if name not in loaded.cubin.objects:
            return CUDA_ERROR_NOT_FOUND
        if name not in loaded.cpu._symbols:
            raise FakeDriverError(f"{name} is in the cubin but the cpu build has no __constant__ of that name")
        address, size = loaded.cpu._symbols[name]
        if size != loaded.cubin.objects[name]:
            raise FakeDriverError(f"{name}: {loaded.cubin.objects[name]} bytes in the cubin, {size} in the cpu build")
        loaded.globals[name] = (address, size)
        if address_ref is not None:
            self._out(address_ref, address)
        if size_ref is not None:
            self._out(size_ref, size)
        return CUDA_SUCCESS

    def cuMemcpyHtoDAsync_v2(self, destination, source, count, stream):
        code = self._enter("cuMemcpyHtoDAsync_v2")
        if code != CUDA_SUCCESS:
            return code
        for loaded in self.modules.values():
            for name, (address, size) in loaded.globals.items():
                if address <= destination and destination + count <= address + size:
                    if not self._probe.readable(source, count):
                        return CUDA_ERROR_INVALID_VALUE
                    ctypes.memmove(destination, source, count)
                    self.constant_copies.append((name, count))
                    return CUDA_SUCCESS
        return CUDA_ERROR_INVALID_VALUE  # not device memory this fake handed out

    def cuStreamSynchronize(self, stream):
        return self._enter("cuStreamSynchronize")

    # ------------------------------------------------------------ functions
    def cuFuncGetAttribute(self, ref, attribute, function):
        code = self._enter("cuFuncGetAttribute")
        if code != CUDA_SUCCESS:
            return code
        loaded = self.functions.get(function)
        if loaded is None:
            return CUDA_ERROR_INVALID_HANDLE
        kernel = loaded.kernel
        values = {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: max_threads_per_block(kernel),
                  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: kernel.static_shared,
                  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: kernel.frame_bytes,
                  CU_FUNC_ATTRIBUTE_NUM_REGS: kernel.registers}
        if attribute not in values:
            return CUDA_ERROR_INVALID_VALUE
        self._out(ref, values[attribute])
        return CUDA_SUCCESS

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, ref, function, threads, dynamic_shared):
        code = self._enter("cuOccupancyMaxActiveBlocksPerMultiprocessor")
        if code != CUDA_SUCCESS:
            return code
        loaded = self.functions.get(function)
        if loaded is None:
            return CUDA_ERROR_INVALID_HANDLE
        if threads < 1 or threads > max_threads_per_block(loaded.kernel):
            self._out(ref, 0)
            return CUDA_SUCCESS
        self._out(ref, max_active_blocks_per_sm(loaded.kernel, threads, dynamic_shared))
        return CUDA_SUCCESS

    # ------------------------------------------------------------ launches
    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared_mem, stream, params, extra):
        if extra is not None:
            return CUDA_ERROR_INVALID_VALUE  # the backend packs kernelParams, never `extra`
        return self._launch("launch", "cuLaunchKernel", function, (gx, gy, gz), (bx, by, bz), shared_mem, stream,
                            params)

    def cuLaunchCooperativeKernel(self, function, gx, gy, gz, bx, by, bz, shared_mem, stream, params):
        return self._launch("cooperative", "cuLaunchCooperativeKernel", function, (gx, gy, gz), (bx, by, bz),
                            shared_mem, stream, params)

    def _launch(self, kind, entry, function, grid, block, shared_mem, stream, params) -> int:
        code = self._enter(entry)
        if code != CUDA_SUCCESS:
            return code
        loaded = self.functions.get(function)
        if loaded is None:
            return CUDA_ERROR_INVALID_HANDLE
        kernel = loaded.kernel
        threads, blocks = block[0] * block[1] * block[2], grid[0] * grid[1] * grid[2]
        if (min(grid) < 1 or min(block) < 1 or any(g > m for g, m in zip(grid, MAX_GRID_DIM))
                or any(b > m for b, m in zip(block, MAX_BLOCK_DIM)) or threads > MAX_THREADS_PER_BLOCK
                or kernel.static_shared + shared_mem > SHARED_PER_BLOCK):
            return CUDA_ERROR_INVALID_VALUE
        if threads > max_threads_per_block(kernel):
            return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
        if kind == "cooperative":
            if not self.cooperative_launch:
                return CUDA_ERROR_INVALID_VALUE
            if blocks > max_active_blocks_per_sm(kernel, threads, shared_mem) * self.multiprocessors:
                return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE

        # The parameters, as the driver reads them: kernelParams[i] points at the
        # value of parameter i, of the size nvcc compiled, placed at its offset.
        table = kernel.params
        buffer = (ctypes.c_char * max(1, kernel.param_bytes or (table[-1][1] + table[-1][2] if table else 1)))()
        if table:
            if not params or not self._probe.readable(params, 8 * len(table)):
                self.faults.append(f"kernel {kernel.name}: kernelParams {params!r} cannot hold {len(table)} pointers")
                return CUDA_ERROR_INVALID_VALUE
            slots = (ctypes.c_void_p * len(table)).from_address(params)
            for ordinal, offset, size in table:
                source = slots[ordinal]
                if not source or not self._probe.readable(source, size):
                    self.faults.append(f"kernel {kernel.name}: kernelParams[{ordinal}] = {source!r} is not {size} "
                                       "readable bytes (a parameter missing from the packed array?)")
                    return CUDA_ERROR_INVALID_VALUE
                ctypes.memmove(ctypes.addressof(buffer) + offset, source, size)
        record = Launch(kind, kernel.name, grid, block, shared_mem, stream, bytes(buffer), list(table))
        self.launches.append(record)

        cpu_kernel = loaded.module.cpu._kernel(kernel.name)
        signature = cpu_kernel.signature
        if len(signature.params) != len(table):
            raise FakeDriverError(f"kernel {kernel.name}: {len(table)} parameters compiled by nvcc, "
                                  f"{len(signature.params)} in the cpu build")
        for index, (param, (_ordinal, offset, size)) in enumerate(zip(signature.params, table)):
            host_size = 8 if param.pointer else param.dtype.itemsize
            if host_size != size:
                raise FakeDriverError(f"kernel {kernel.name}: parameter {index} is {size} bytes in the cubin, "
                                      f"{host_size} in the cpu build")
            if param.pointer:
                pointer = struct.unpack_from("<Q", record.params, offset)[0]
                if not self._probe.readable(pointer, 1):
                    return self._fault(CUDA_ERROR_ILLEGAL_ADDRESS,
                                       f"kernel {kernel.name}: parameter {index} '{param.describe()}' = {pointer:#x} "
                                       "points at no mapped memory")
        base = ctypes.addressof(buffer)
        argv = (ctypes.c_void_p * max(1, len(table)))(*[base + offset for _o, offset, _s in table])
        geometry = ((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block))
        try:
            self.cpu._launch(cpu_kernel, ctypes.addressof(argv), geometry)
        except KernelLaunchError as exc:
            code = CUDA_ERROR_ASSERT if "ssert" in str(exc) else CUDA_ERROR_LAUNCH_FAILED
            return self._fault(code, f"kernel {kernel.name}: {exc}")
        return CUDA_SUCCESS


# ---------------------------------------------------------------- pycuda.driver over the same device
class _Context:
    def __init__(self, driver: FakeCudaDriver):
        self.driver = driver
        self.pushed = 0

    def push(self) -> None:
        self.pushed += 1
        self.driver._tls.context = PRIMARY_CONTEXT

    def pop(self) -> None:
        self.pushed -= 1
        self.driver._tls.context = None


class _Device:
    def __init__(self, driver: FakeCudaDriver, index: int):
        if index != 0:
            raise RuntimeError(f"cuDeviceGet failed: invalid device ordinal {index}")
        self.driver = driver

    def retain_primary_context(self) -> _Context:
        return self.driver.pycuda_context

    def get_attribute(self, attribute: str) -> int:
        return {"MAX_THREADS_PER_BLOCK": MAX_THREADS_PER_BLOCK, "MAX_SHARED_MEMORY_PER_BLOCK": SHARED_PER_BLOCK,
                "MULTIPROCESSOR_COUNT": self.driver.multiprocessors}[attribute]

    def compute_capability(self) -> tuple[int, int]:
        return self.driver.compute_capability

    def name(self) -> str:
        return "Fake H100 (kernels on the cpu executor)"


def fake_pycuda_driver_module(driver: FakeCudaDriver) -> types.ModuleType:
    module = types.ModuleType("pycuda.driver")
    module.init = lambda flags=0: None
    module.Device = lambda index: _Device(driver, index)
    module.device_attribute = types.SimpleNamespace(
        MAX_THREADS_PER_BLOCK="MAX_THREADS_PER_BLOCK", MAX_SHARED_MEMORY_PER_BLOCK="MAX_SHARED_MEMORY_PER_BLOCK",
        MULTIPROCESSOR_COUNT="MULTIPROCESSOR_COUNT")
    return module


def install(monkeypatch, **driver_options) -> tuple[pb.PyCudaBackend, FakeCudaDriver]:
    """A :class:`PyCudaBackend` over a :class:`FakeCudaDriver`, for the duration of a test.

    Only what the machine lacks is replaced: the driver library, PyCUDA, and
    torch's view of a GPU (``is_available``, ``init``, ``current_device`` and
    ``synchronize``). The backend's arrays live on the CPU (``backend.device``),
    which is where the fake driver's kernels read them.
    """
    from warp_drive.runtime import function_manager

    driver = FakeCudaDriver(**driver_options)
    package = types.ModuleType("pycuda")
    package.driver = fake_pycuda_driver_module(driver)
    monkeypatch.setitem(sys.modules, "pycuda", package)
    monkeypatch.setitem(sys.modules, "pycuda.driver", package.driver)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", driver.torch_synchronize)
    monkeypatch.setattr(pb, "_Driver", lambda: driver)
    monkeypatch.setattr(pb.atexit, "register", lambda fn: None)
    monkeypatch.setattr(pb, "plan_build", driver.recording_plan_build(pb.plan_build))
    # core_module() caches per id(backend): a fresh cache, so no module of an earlier fake is found again.
    monkeypatch.setattr(function_manager, "_core_modules", {})
    backend = pb.PyCudaBackend()
    backend.device = torch.device("cpu")  # device memory is host memory
    backend._raw_stream = lambda index: STREAM
    return backend, driver

"""The ``pycuda`` executor: nvcc builds a cubin for the present GPU, which runs
inside torch's primary CUDA context on pointers that torch allocated.

Who does what
-------------

* **torch** owns the device memory and the streams. Kernels receive
  ``tensor.data_ptr()`` directly (no copies) and are launched on torch's
  *current* stream, so they are ordered with torch operations in both
  directions; non-default streams (``with torch.cuda.stream(s):``) work too.
* **PyCUDA** initialises the driver and makes torch's *primary* context (the
  one the CUDA runtime, hence torch, uses) current: ``Device(i).retain_primary_context()``
  + ``push()``, popped at exit -- never a second context, never
  ``pycuda.autoinit``. The backend serves torch's current device at the time it
  is created (call ``torch.cuda.set_device`` first on multi-GPU machines); a
  thread that has no current context gets the primary context on its first
  launch.
* **the driver API through ctypes** (``libcuda.so.1``) loads the cubin and
  launches. PyCUDA (checked against its 2026.1 sources) exposes no handle for a
  ``Module`` or a ``Function`` (only ``Context``, ``Stream`` and ``Array`` have
  ``.handle``), has no cooperative launch, and its ``prepared_async_call``
  accepts only a PyCUDA ``Stream`` object or ``None``, so it can neither follow
  torch's current stream nor hand a ``CUfunction`` to
  ``cuLaunchCooperativeKernel``. Loading the module once through the driver
  keeps one copy of every ``__constant__``/``__device__`` symbol for both kinds
  of launch; ``cuLaunchKernel`` and ``cuLaunchCooperativeKernel`` take the same
  ``void**`` argument array, packed once per :meth:`Kernel.bind` (as the cpu
  executor does), so the hot path is one foreign call.

Builds
------

The signature pass is the cpu executor's: the sources are preprocessed by the
host compiler with the emulation header in ``WD_MARKER_PASS`` mode and parsed
by :mod:`warp_drive.runtime.backends.signature`, so both executors check launches
against the same C parameter lists. nvcc then compiles a one-line-per-source
unit (``#include "<user file>"``, so errors name the user's file and line) with
``-cubin -arch=sm_XY --fmad=false`` (no FMA contraction, like the cpu build's
``-ffp-contract=off``). Grid-wide ``cooperative_groups`` sync needs no
``-rdc``: the grid workspace is read from registers the driver sets for a
cooperative launch (``cooperative_groups/details/driver_abi.h``), and the cubin
is a loadable ``ET_EXEC`` image with no unresolved symbols (checked with nvcc
13 by ``tests/runtime/test_pycuda_backend_offline.py``).

The cache key hashes the marker-pass text, the *contents* of every file nvcc
reads (``nvcc -M``; so a change inside an ``#ifdef __CUDACC__`` branch of a
header rebuilds too), nvcc's ``--version``, the flags and the target
architecture. Products go to ``cache_root()/pycuda``, built atomically and
verified against their recorded sha256 before every load (see :mod:`build_cache`).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import struct
import sys
from pathlib import Path

import torch

from warp_drive.runtime.backends import build_cache
from warp_drive.runtime.backends.arguments import CTYPE_OF_DTYPE, PackedArguments, check_arguments
from warp_drive.runtime.backends.base import (
    Backend,
    BoundLaunch,
    DeviceLimits,
    Kernel,
    KernelBuildError,
    KernelLaunchError,
    Module,
    Capabilities,
    as_dim3,
    check_geometry,
)
from warp_drive.runtime.backends.cubin import elf_sections, kernel_params
from warp_drive.runtime.backends.nvcc import (  # noqa: F401  (re-exported: the executor's build, named here too)
    NVCC_FLAGS,
    CubinBuild,
    NvccToolchain,
    find_nvcc,
    nvcc_command,
    nvcc_depend_command,
    parse_dependencies,
    plan_build,
    unit_source,
)
from warp_drive.runtime.backends.resources import KernelResources
from warp_drive.runtime.backends.signature import KernelSignature, ModuleSymbols

INSTALL_HINT = "pip install -e '.[cuda]'"


# ---------------------------------------------------------------- driver API constants (cuda.h, CUDA 13.0)
CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_NOT_FOUND = 500
CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701
CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720
CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95
CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3
CU_FUNC_ATTRIBUTE_NUM_REGS = 4

_c_uint, _c_int, _c_size_t, _c_void_p, _c_char_p = (
    ctypes.c_uint, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p)
_P = ctypes.POINTER

# Every driver entry point used, under the name libcuda exports (cuda.h maps
# e.g. cuModuleGetGlobal to cuModuleGetGlobal_v2), with its C prototype.
# Optional entries may be missing from older drivers.
DRIVER_PROTOTYPES: dict[str, list] = {
    "cuGetErrorName": [_c_int, _P(_c_char_p)],
    "cuGetErrorString": [_c_int, _P(_c_char_p)],
    "cuDriverGetVersion": [_P(_c_int)],
    "cuDeviceGet": [_P(_c_int), _c_int],
    "cuDeviceGetAttribute": [_P(_c_int), _c_int, _c_int],
    "cuCtxGetCurrent": [_P(_c_void_p)],
    "cuCtxSetCurrent": [_c_void_p],
    "cuModuleLoadData": [_P(_c_void_p), _c_char_p],
    "cuModuleUnload": [_c_void_p],
    "cuModuleGetFunction": [_P(_c_void_p), _c_void_p, _c_char_p],
    "cuModuleGetGlobal_v2": [_P(ctypes.c_uint64), _P(_c_size_t), _c_void_p, _c_char_p],
    "cuMemcpyHtoDAsync_v2": [ctypes.c_uint64, _c_void_p, _c_size_t, _c_void_p],
    "cuStreamSynchronize": [_c_void_p],
    "cuFuncGetAttribute": [_P(_c_int), _c_int, _c_void_p],
    "cuOccupancyMaxActiveBlocksPerMultiprocessor": [_P(_c_int), _c_void_p, _c_int, _c_size_t],
    "cuLaunchKernel": [_c_void_p, _c_uint, _c_uint, _c_uint, _c_uint, _c_uint, _c_uint, _c_uint,
                       _c_void_p, _c_void_p, _c_void_p],
    "cuLaunchCooperativeKernel": [_c_void_p, _c_uint, _c_uint, _c_uint, _c_uint, _c_uint, _c_uint, _c_uint,
                                  _c_void_p, _c_void_p],
}



# ---------------------------------------------------------------- pure helpers (tested without a GPU)
def param_ctypes(signature: KernelSignature) -> list:
    """The ctypes type holding each parameter's value in the ``void**`` array."""
    out = []
    for param in signature.params:
        if param.pointer:
            out.append(ctypes.c_void_p)
        elif param.dtype in CTYPE_OF_DTYPE:
            out.append(CTYPE_OF_DTYPE[param.dtype])
        else:  # parse_param refuses these already
            raise KernelBuildError(f"kernel {signature.name}: unsupported parameter type {param.describe()}")
    return out


def param_layout(signature: KernelSignature) -> list[tuple[int, int]]:
    """(offset, size) of each parameter in the device-side parameter buffer:
    every parameter is aligned to its own size (all are fundamental types or
    pointers), which is what nvcc records in the cubin (:mod:`warp_drive.runtime.backends.cubin`)."""
    layout, offset = [], 0
    for ctype in param_ctypes(signature):
        size = ctypes.sizeof(ctype)
        offset = (offset + size - 1) // size * size
        layout.append((offset, size))
        offset += size
    return layout


# ---------------------------------------------------------------- device printf
_c_fflush = None  # libc's fflush, looked up once


def flush_python_stdio() -> None:
    """Write out Python's ``sys.stdout`` and ``sys.stderr`` buffers."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing to keep in order with
            pass


def flush_c_stdio() -> None:
    """Write out what C's stdio buffers hold: Python's ``sys.stdout``/``sys.stderr``
    first, then every C stream (``fflush(NULL)``).

    At a synchronization the CUDA driver may move device ``printf`` output into
    the C library's ``stdout`` (the 580.x driver writes it to the descriptor
    directly). When stdout is a terminal C flushes each line; when
    it is a file or a pipe C holds it in its buffer until that fills or the
    process exits, so a reader of the file (or of Python's redirected stdout)
    sees nothing after ``synchronize()``. The cpu executor flushes after each
    launch for the same reason. Python's own buffer goes first: what Python
    printed before the launch was written before the kernel ran, and the two
    buffers share one file descriptor, so this keeps the file in that order.
    """
    global _c_fflush
    flush_python_stdio()
    if _c_fflush is None:
        try:
            libc = ctypes.CDLL(None) if os.name != "nt" else ctypes.CDLL("ucrtbase")
            fflush = libc.fflush
        except (OSError, AttributeError):  # pragma: no cover - no C library to flush
            _c_fflush = False
            return
        fflush.argtypes, fflush.restype = [ctypes.c_void_p], ctypes.c_int
        _c_fflush = fflush
    if _c_fflush:
        _c_fflush(None)  # NULL: every output stream


# ---------------------------------------------------------------- the driver through ctypes
class _Driver:
    """``libcuda`` entry points with their prototypes; ``check`` turns a CUresult into an error."""

    def __init__(self) -> None:
        name = "nvcuda.dll" if os.name == "nt" else "libcuda.so.1"
        try:
            lib = ctypes.CDLL(name)
        except OSError as exc:
            raise RuntimeError(f"the pycuda backend cannot load the CUDA driver library {name}: {exc}") from None
        for fname, argtypes in DRIVER_PROTOTYPES.items():
            try:
                fn = getattr(lib, fname)
            except AttributeError:
                raise RuntimeError(f"the CUDA driver has no {fname}; update the NVIDIA driver") from None
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
            setattr(self, fname, fn)

    def error_name(self, code: int) -> str:
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        if self.cuGetErrorName(code, ctypes.byref(name)) != CUDA_SUCCESS or not name.value:
            return f"CUresult {code}"
        self.cuGetErrorString(code, ctypes.byref(text))
        described = name.value.decode()
        return f"{described} ({text.value.decode()})" if text.value else described


class PyCudaBoundLaunch(BoundLaunch):
    """Arguments packed once into a ``void**`` array: the launch is one driver call."""

    def __init__(self, kernel: "PyCudaKernel", checked: list):
        self.kernel = kernel
        self._packed = PackedArguments(kernel.signature, checked)
        self._argv_address = self._packed.address
        self._geometry: dict = {}

    def set_scalar(self, index: int, value) -> None:
        self._packed.set_scalar(index, value)

    def launch(self, grid, block, shared_mem: int = 0, cooperative: bool = False) -> None:
        if next(self._packed.due): self._packed.verify()  # stale pointers: 1st launch, then every 64th
        try:
            geometry = self._geometry[(grid, block)]
        except (KeyError, TypeError):  # TypeError: lists are not hashable; they are just not cached
            geometry = self.kernel.check_geometry(as_dim3(grid, "grid"), as_dim3(block, "block"))
            try:
                self._geometry[(grid, block)] = geometry
            except TypeError:
                pass
        self.kernel.module.backend._launch(self.kernel, geometry, int(shared_mem), self._argv_address, cooperative)


class PyCudaKernel(Kernel):
    def __init__(self, module: "PyCudaModule", signature: KernelSignature, handle: int):
        super().__init__(module, signature)
        self.handle = handle  # CUfunction
        self.param_types = param_ctypes(signature)
        backend = module.backend

        def attribute(which: int) -> int:
            value = ctypes.c_int()
            backend._driver_call(f"kernel {self.name}: reading its attributes", "cuFuncGetAttribute",
                                 ctypes.byref(value), which, handle)
            return value.value

        # Fewer threads than the device's limit when the kernel uses many registers.
        self._resources = KernelResources(
            max_threads_per_block=attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            registers=attribute(CU_FUNC_ATTRIBUTE_NUM_REGS),
            static_shared_bytes=attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            stack_frame_bytes=attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            source=f"the driver, {backend.arch}")
        self.max_threads_per_block = self._resources.max_threads_per_block
        self._co_resident: dict[tuple[int, int], int] = {}

    @property
    def resources(self) -> KernelResources:
        return self._resources

    def bind(self, *args) -> PyCudaBoundLaunch:
        device = self.module.backend.device
        checked = check_arguments(self.signature, args, device)
        for index, (param, value) in enumerate(zip(self.signature.params, checked)):
            if param.pointer and value.device.index != device.index:
                raise KernelLaunchError(
                    f"kernel {self.name}: parameter {index} '{param.describe()}' expects a tensor on {device}, "
                    f"got one on {value.device}"
                )
        return PyCudaBoundLaunch(self, checked)

    def check_geometry(self, grid, block):
        """The shared geometry checks (CUDA's grid limits, this kernel's own block
        limit from its registers); dynamic shared memory is checked per launch."""
        check_geometry(grid, block, 0, self.module.backend.limits, self.name, self._resources)
        return grid, block, block[0] * block[1] * block[2], grid[0] * grid[1] * grid[2]

    def check_co_resident(self, geometry, shared_mem: int) -> None:
        """A cooperative launch needs every block resident at once: refuse
        rather than let the driver fail (or, without cooperative launch, hang)."""
        grid, _block, threads, blocks = geometry
        key = (threads, shared_mem)
        backend = self.module.backend
        if key not in self._co_resident:
            per_sm = ctypes.c_int()
            backend._driver_call(f"kernel {self.name}: occupancy query", "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                                 ctypes.byref(per_sm), self.handle, threads, shared_mem)
            self._co_resident[key] = per_sm.value * backend.multiprocessors
        fit = self._co_resident[key]
        if blocks > fit:
            per_env = grid[1] * grid[2]
            raise KernelLaunchError(
                f"kernel {self.name}: a cooperative launch of {blocks} blocks of {threads} threads needs all of them "
                f"resident at once, but this GPU holds at most {fit} such blocks ({backend.multiprocessors} SMs); "
                f"with {per_env} blocks per env that is at most {fit // per_env} envs. Use fewer envs per launch, "
                "fewer agents per env, or a kernel split at the barrier."
            )


class PyCudaModule(Module):
    def __init__(self, backend: "PyCudaBackend", cubin: Path, symbols: ModuleSymbols, sources, from_cache: bool):
        super().__init__(sources, symbols.kernels, from_cache)
        self.backend = backend
        self.cubin_path = cubin
        self.constants = symbols.constants
        handle = ctypes.c_void_p()
        image = cubin.read_bytes()
        try:  # the compiled parameter tables, compared with each kernel's signature at its lookup
            self._cubin_sections: dict[str, bytes] | None = elf_sections(image)
        except (ValueError, struct.error):
            self._cubin_sections = None
        code = backend._call(lambda: backend.driver.cuModuleLoadData(ctypes.byref(handle), image))
        if code != CUDA_SUCCESS:
            raise KernelBuildError(
                f"the CUDA driver could not load {cubin} (built for {backend.arch} by {backend.toolchain.version}; "
                f"the driver supports CUDA {backend.driver_version}): {backend.driver.error_name(code)}. A cubin "
                "from a newer CUDA toolkit than the driver supports needs a driver update."
            )
        self.handle = handle.value
        self._kernels: dict[str, PyCudaKernel] = {}

    def _kernel(self, name: str) -> PyCudaKernel:
        if name not in self._kernels:
            backend = self.backend
            function = ctypes.c_void_p()
            code = backend._call(lambda: backend.driver.cuModuleGetFunction(
                ctypes.byref(function), self.handle, name.encode()))
            if code == CUDA_ERROR_NOT_FOUND:
                raise KernelBuildError(
                    f"kernel {name!r} is declared in {', '.join(map(str, self.sources))} but the cubin has no symbol "
                    "of that name: declare it extern \"C\" __global__ (C++ names are mangled)"
                )
            backend._check(code, f"looking up kernel {name}")
            signature = self.signatures[name]
            self._check_param_info(signature)
            self._kernels[name] = PyCudaKernel(self, signature, function.value)
        return self._kernels[name]

    def _check_param_info(self, signature: KernelSignature) -> None:
        """Compare the parsed signature with the parameters nvcc compiled, as
        the cubin records them (:mod:`warp_drive.runtime.backends.cubin`); raise on a
        mismatch, say nothing where the cubin's table cannot be read."""
        if self._cubin_sections is None:
            return
        compiled = kernel_params(self._cubin_sections, signature.name)
        if compiled is None:
            return
        expected = param_layout(signature)
        if len(compiled) != len(expected):
            raise KernelBuildError(
                f"kernel {signature.name}: compiled with {len(compiled)} parameters, but its source reads as "
                f"{signature.describe()} ({len(expected)}; different #if branches for nvcc and the host "
                "preprocessor?)"
            )
        for index, ((_offset, want), (_ordinal, _compiled_offset, size)) in enumerate(zip(expected, compiled)):
            if size != want:
                param = signature.params[index]
                raise KernelBuildError(
                    f"kernel {signature.name}: parameter {index} '{param.describe()}' is {want} bytes in the source "
                    f"as preprocessed for the signature check but {size} bytes in the compiled kernel "
                    "(different #if branches for nvcc and the host preprocessor?)"
                )

    def set_constant(self, name: str, value) -> None:
        backend = self.backend
        address, size = ctypes.c_uint64(), ctypes.c_size_t()
        code = backend._call(lambda: backend.driver.cuModuleGetGlobal_v2(
            ctypes.byref(address), ctypes.byref(size), self.handle, name.encode()))
        if code == CUDA_ERROR_NOT_FOUND:
            raise KeyError(
                f"__constant__ symbol {name!r} not found in {', '.join(map(str, self.sources))}; "
                f"constants: {', '.join(sorted(self.constants)) or '(none)'}"
            )
        backend._check(code, f"looking up __constant__ {name}")
        data = build_cache.constant_bytes(name, value, size.value, self.constants.get(name, "?"))
        # On torch's current stream, after the work already queued there; the
        # stream sync makes the new value visible to whatever runs next.
        stream = backend.current_stream()
        backend._driver_call(f"copying __constant__ {name}", "cuMemcpyHtoDAsync_v2",
                             address.value, data.ctypes.data, size.value, stream)
        backend._driver_call(f"copying __constant__ {name}", "cuStreamSynchronize", stream)


class PyCudaBackend(Backend):
    name = "pycuda"
    capabilities = Capabilities(serial_blocks=False, max_blocks_per_env=None, collective_backend="nccl",
                                memory="cuda", shares_host_cores=False)

    def __init__(self) -> None:
        try:
            import pycuda.driver as pycuda_driver
        except Exception as exc:  # ImportError, or OSError when libcuda is missing
            raise RuntimeError(
                f"the 'pycuda' backend needs PyCUDA, which cannot be imported ({type(exc).__name__}: {exc}). "
                f"Install it with  {INSTALL_HINT}  or use the 'cpu' backend."
            ) from exc
        if not torch.cuda.is_available():
            raise RuntimeError(
                "the 'pycuda' backend needs a CUDA GPU, but torch sees none (torch.cuda.is_available() is False; "
                f"a CPU-only torch build or no driver). Install a CUDA build of torch and {INSTALL_HINT}, "
                "or use the 'cpu' backend."
            )
        # torch first, so that the context below is the one torch uses.
        torch.cuda.init()
        index = torch.cuda.current_device()
        self.device = torch.device("cuda", index)

        pycuda_driver.init()
        pycuda_device = pycuda_driver.Device(index)  # runtime and driver ordinals agree
        self._pycuda_context = pycuda_device.retain_primary_context()  # torch's context, not a new one
        self._pycuda_context.push()
        atexit.register(self._release_context)

        self.driver = _Driver()
        context = ctypes.c_void_p()
        self._check(self.driver.cuCtxGetCurrent(ctypes.byref(context)), "reading the current context")
        self._context = context.value  # re-made current on threads that have none (see _call)
        device = ctypes.c_int()
        self._check(self.driver.cuDeviceGet(ctypes.byref(device), index), "cuDeviceGet")
        self._cu_device = device.value
        version = ctypes.c_int()
        self._check(self.driver.cuDriverGetVersion(ctypes.byref(version)), "cuDriverGetVersion")
        self.driver_version = f"{version.value // 1000}.{version.value % 1000 // 10}"

        attribute = pycuda_driver.device_attribute
        self.limits = DeviceLimits(
            max_threads_per_block=pycuda_device.get_attribute(attribute.MAX_THREADS_PER_BLOCK),
            max_dynamic_shared_bytes=pycuda_device.get_attribute(attribute.MAX_SHARED_MEMORY_PER_BLOCK),
        )
        self.multiprocessors = pycuda_device.get_attribute(attribute.MULTIPROCESSOR_COUNT)
        self.cooperative_launch = bool(self._device_attribute(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH))
        major, minor = pycuda_device.compute_capability()
        self.arch = f"sm_{major}{minor}"
        self.device_name = pycuda_device.name()

        self._raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self._toolchain: NvccToolchain | None = None
        self._modules: dict[str, PyCudaModule] = {}

    # ---------------------------------------------------------------- context & errors
    def _release_context(self) -> None:
        context, self._pycuda_context = self._pycuda_context, None
        if context is None:
            return
        try:
            context.pop()
        except Exception:  # pragma: no cover - exit path: popped elsewhere, or another thread pushed it
            pass

    def _device_attribute(self, attribute: int) -> int:
        value = ctypes.c_int()
        self._check(self.driver.cuDeviceGetAttribute(ctypes.byref(value), attribute, self._cu_device),
                    f"device attribute {attribute}")
        return value.value

    def _driver_call(self, what: str, name: str, *args) -> None:
        """``driver.<name>(*args)`` through :meth:`_call`, raising on failure."""
        fn = getattr(self.driver, name)
        self._check(self._call(lambda: fn(*args)), what)

    def _call(self, call) -> int:
        """Run a driver call; on a thread where no context is current yet (one
        torch has not used), make the primary context current and retry."""
        code = call()
        if code == CUDA_ERROR_INVALID_CONTEXT:
            self._check(self.driver.cuCtxSetCurrent(self._context), "making the primary context current")
            code = call()
        return code

    def _check(self, code: int, what: str) -> None:
        if code != CUDA_SUCCESS:
            raise KernelLaunchError(f"{what} failed: {self.driver.error_name(code)}")

    def current_stream(self) -> int:
        """torch's current stream on this device, as a CUstream handle (0: the legacy default stream)."""
        if self._raw_stream is not None:
            return self._raw_stream(self.device.index)
        return torch.cuda.current_stream(self.device).cuda_stream

    # ---------------------------------------------------------------- launches
    def _launch(self, kernel: PyCudaKernel, geometry, shared_mem: int, argv_address, cooperative: bool) -> None:
        (gx, gy, gz), (bx, by, bz), _threads, _blocks = geometry
        if shared_mem > self.limits.max_dynamic_shared_bytes or shared_mem < 0:
            raise KernelLaunchError(
                f"kernel {kernel.name}: {shared_mem} bytes of dynamic shared memory requested; the limit is "
                f"{self.limits.max_dynamic_shared_bytes}"
            )
        stream = self.current_stream()
        if cooperative:
            if not self.cooperative_launch:
                raise KernelLaunchError(f"kernel {kernel.name}: {self.device_name} does not support cooperative launches")
            kernel.check_co_resident(geometry, shared_mem)
            fn = self.driver.cuLaunchCooperativeKernel
            args = (kernel.handle, gx, gy, gz, bx, by, bz, shared_mem, stream, argv_address)
        else:
            fn = self.driver.cuLaunchKernel
            args = (kernel.handle, gx, gy, gz, bx, by, bz, shared_mem, stream, argv_address, None)
        code = fn(*args)
        if code == CUDA_ERROR_INVALID_CONTEXT:  # first launch on a thread torch has not used
            self._driver_call("making the primary context current", "cuCtxSetCurrent", self._context)
            code = fn(*args)
        if code != CUDA_SUCCESS:
            self._launch_failed(kernel, code, geometry, shared_mem, cooperative)

    def _launch_failed(self, kernel: PyCudaKernel, code: int, geometry, shared_mem: int, cooperative: bool) -> None:
        grid, block, _threads, blocks = geometry
        what = "cooperative launch" if cooperative else "launch"
        message = (f"kernel {kernel.name}: {what} with grid {grid}, block {block}, {shared_mem} bytes of dynamic "
                   f"shared memory failed: {self.driver.error_name(code)}")
        if code == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
            message += f" ({blocks} blocks cannot be resident at once)"
        elif code == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
            message += " (too many registers or too much shared memory for this block size)"
        elif code >= 700:
            message += " -- an error from an earlier kernel; the CUDA context is unusable after it"
        raise KernelLaunchError(message)

    def synchronize(self) -> None:
        """Wait for the device; then write out its ``printf`` output (see :func:`flush_c_stdio`).

        Python's own buffers are written out *before* the wait as well: the
        driver (seen with 580.x on an H100) writes device ``printf`` output
        straight to the file descriptor during the wait, so a line Python
        printed before the launch but still held in its buffer would land
        after the kernel's output in a redirected stdout.
        """
        flush_python_stdio()
        try:
            torch.cuda.synchronize(self.device)
        except RuntimeError as exc:  # a device-side assert or fault in a kernel (or a torch op) surfaces here
            raise KernelLaunchError(f"device work failed: {exc}") from exc
        finally:
            flush_c_stdio()  # what the kernels printed before a failure too

    # ---------------------------------------------------------------- builds
    @property
    def toolchain(self) -> NvccToolchain:
        if self._toolchain is None:
            self._toolchain = NvccToolchain.find()
        return self._toolchain

    def build(self, sources, include_dirs=(), defines=None) -> PyCudaModule:
        plan = plan_build(self.toolchain, self.arch, sources, include_dirs, defines)
        if plan.key in self._modules:
            return self._modules[plan.key]
        from_cache = plan.compile()
        module = PyCudaModule(self, plan.target, plan.symbols, plan.sources, from_cache)
        self._modules[plan.key] = module
        return module

"""The ``cpu`` executor: CUDA C built by the host C++ compiler and run on host threads.

The same ``.cu`` files nvcc builds for a GPU are compiled into a shared library
against ``warp_drive/cuda/cpu/cuda_emulation.h``; ``runtime.cpp`` (one library
per process) runs the blocks of a launch on a pool of host threads and the
threads of a block as fibers. Arrays are torch CPU tensors whose pointers the
kernels receive directly, exactly as on the GPU.

Build modes (``WARP_DRIVE_CPU_MODE``, or ``CpuBackend(mode=...)``):

* ``release`` (default): ``-O2 -g``;
* ``debug``: ``-O0 -g`` and a single worker thread, for stepping through an env
  kernel with gdb;
* ``asan``: AddressSanitizer (run Python with
  ``LD_PRELOAD=$(g++ -print-file-name=libasan.so)``);
* ``race``: ThreadSanitizer over CUDA threads (kernels built with
  ``-fsanitize=thread``; Python started with libtsan preloaded): a launch in
  which two threads race raises :class:`~warp_drive.runtime.backends.race.KernelRaceError`
  naming the kernel, both source lines and the array. Threads run in a shuffled
  order. See :mod:`warp_drive.runtime.backends.race`;
* ``coverage``: gcov line counts (``--coverage``), written next to the build
  products when the process exits; ``tests/runtime/test_kernel_coverage.py`` uses them
  to check that every line of every shipped kernel runs in some CPU test.

``WARP_DRIVE_CPU_SHUFFLE=<seed>`` (any mode; on with seed 0 in race mode,
``off`` to turn it off there) runs the threads of every block in a seeded
random order, per launch, block and barrier phase: results that depend on the
order threads run in differ between seeds.

Results never depend on the machine: ``-ffp-contract=off`` and no fast-math.

Interrupts and limits (see the top of ``runtime.cpp``):

* Ctrl-C (SIGINT) during a launch ends it with KeyboardInterrupt (a note names
  the kernel): the runtime's handler, chained in front of Python's, stops
  every worker at its next block boundary or ``__syncthreads()`` and abandons
  the block the launching thread runs, even in an endless loop. Blocks other
  workers run in a loop without a barrier cannot be stopped: the launch is
  abandoned after ~0.3 s, their arguments are kept alive, and the executor
  refuses launches (KernelLaunchError) until they return. The handlers are
  (re)installed whenever a cpu backend is made or builds; one installed after
  that (``signal.signal(SIGINT, ...)``) takes over until the next build.
* A kernel that divides an integer by zero (SIGFPE), or touches memory
  outside every mapping (SIGSEGV, SIGBUS), fails its launch with
  KernelLaunchError naming the kernel, block, thread and source line; after a
  memory fault the executor refuses launches until the process restarts (the
  kernel may have written anywhere first), as a CUDA context does. A fault
  inside a C library call the kernel made (printf, memcpy) is not caught.
* Each thread of a block that reaches ``__syncthreads()`` runs on a fiber with
  a ``WARP_DRIVE_CPU_STACK_KB`` (default 128) stack and a guard page. A fiber
  that overflows its stack fails the launch with KernelLaunchError naming the
  kernel and ``WARP_DRIVE_CPU_STACK_KB`` (x86-64, not under ASan); a block
  needing more fibers than the process may map (``vm.max_map_count``) or more
  stack than the machine's memory fails with an error naming the block size
  and the limit, before its fibers are allocated.

Two shapes of the same executor:

* ``cpu`` (native): an ``AGENT_PHASES`` kernel runs one host thread per env,
  which loops over the env's agents with no fiber switch; blocks are as large
  as a launch asks.
* ``cpu-gpu`` (:class:`GpuShapedCpuBackend`): the GPU's shape, so that CI runs
  the very code path a GPU runs. ``WD_CPU_EXECUTOR`` is not defined (nvcc does
  not define it), blocks are capped at 1024 threads and at each kernel's own
  limit from nvcc's resource report (``ptxas -v`` for sm_90, see
  :mod:`warp_drive.runtime.backends.resources`; static shared memory over 48 KiB fails
  that build as it would on a GPU), and ``AGENT_PHASES`` kernels get the block
  a GPU would give them: one thread per agent up to that limit.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import weakref
from pathlib import Path

import torch

from warp_drive.runtime import env_vars
from warp_drive.runtime.backends import build_cache
from warp_drive.runtime.backends.arguments import PackedArguments, check_arguments
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
from warp_drive.runtime.backends.nvcc import find_nvcc
from warp_drive.runtime.backends import race
from warp_drive.runtime.backends.resources import DEFAULT_ARCH, MAX_THREADS_PER_BLOCK, KernelResources, ptxas_resources
from warp_drive.runtime.backends.signature import KernelSignature, ModuleSymbols, parse_symbols

CPU_DIR = build_cache.PACKAGE_CUDA_DIR / "cpu"
EMULATION_HEADER = build_cache.EMULATION_HEADER
RUNTIME_SOURCE = CPU_DIR / "runtime.cpp"

# Dynamic shared memory per block: CUDA's default limit without opt-in, so a
# kernel that fits here fits on any GPU.
DYNAMIC_SHARED_BYTES = 48 * 1024

MODES = {
    "release": ["-O2", "-g"],
    "debug": ["-O0", "-g"],
    "asan": ["-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer"],
    "coverage": ["-O0", "-g", "--coverage", "-fprofile-update=atomic"],
    "race": ["-O1", "-g", "-fsanitize=thread"],
}
# The runtime of each flavour: race mode's is annotated for TSan, not instrumented (see runtime.cpp).
RUNTIME_FLAGS = {"plain": MODES["release"], "asan": MODES["asan"], "race": ["-O2", "-g", "-DWD_RACE=1"]}
# -fno-semantic-interposition + -Bsymbolic: a kernel library's own functions
# bind to themselves, so kernels inline into the thread loops below.
COMMON_FLAGS = ["-std=c++20", "-fPIC", "-shared", "-pthread", "-ffp-contract=off", "-fno-fast-math", "-Wall",
                "-Wno-unused-function", "-Wno-unused-variable", "-fno-semantic-interposition", "-mtls-dialect=gnu2", "-Wl,-Bsymbolic",
                # A frame larger than a page probes each page, so a fiber's overflow
                # hits its guard page instead of jumping over it into other memory.
                "-fstack-clash-protection",
                # Device printf is the emulation header's (it honours Ctrl-C): never turned into puts/putchar.
                "-fno-builtin-printf"]

_RUNTIME: tuple[str, ctypes.CDLL] | None = None  # (flavour, library): one per process
_RACE_LOG: "race.ReportLog | None" = None  # race mode: where TSan's reports go (one per process)

# Launch return codes of wd_cpu_launch beyond 0 (done) and 1 (error).
_INTERRUPTED, _ABANDONED = 2, 3
# Arguments of launches abandoned after Ctrl-C whose blocks still run: their
# tensors must outlive those blocks, which may never return.
_ABANDONED_ARGUMENTS: list = []



def _compiler_identity(cxx: str) -> str:
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except Exception:  # pragma: no cover - identity only feeds the cache key
        return cxx


_CODE_ADDRESS = re.compile(r"\[pc (/\S+?)\+0x([0-9a-f]+)\]")


def _with_source_lines(message: str) -> str:
    """The runtime names a faulting instruction as ``[pc <library>+0x<offset>]``:
    give the kernel's file:line instead (addr2line over the library's debug
    info; the library is built with -g), or leave it as it is."""
    def resolve(match: re.Match) -> str:
        try:
            out = subprocess.run(["addr2line", "-e", match.group(1), "-f", "-i", "0x" + match.group(2)],
                                 capture_output=True, text=True, timeout=10).stdout.split("\n")
        except (OSError, subprocess.SubprocessError):
            return match.group(0)
        if len(out) < 2 or out[1].startswith("??"):
            return match.group(0)
        return out[1].split(" (discriminator")[0]

    return _CODE_ADDRESS.sub(resolve, message)


class CpuBoundLaunch(BoundLaunch):
    """Arguments packed once; a launch is one call into the runtime."""

    def __init__(self, kernel: "CpuKernel", checked: list):
        self.kernel = kernel
        self._packed = PackedArguments(kernel.signature, checked)
        self._argv_address = self._packed.address or 0
        self._geometry: dict = {}
        if self._argv_address:  # found again if a launch is abandoned with blocks still running
            kernel.module.backend._packed_by_address[self._argv_address] = self._packed

    def set_scalar(self, index: int, value) -> None:
        self._packed.set_scalar(index, value)

    def launch(self, grid, block, shared_mem: int = 0, cooperative: bool = False) -> None:
        if next(self._packed.due): self._packed.verify()  # stale pointers: 1st launch, then every 64th
        key = (grid if isinstance(grid, int) else tuple(grid), block if isinstance(block, int) else tuple(block),
               shared_mem)
        geometry = self._geometry.get(key)
        if geometry is None:
            g, b = as_dim3(grid, "grid"), as_dim3(block, "block")
            check_geometry(g, b, shared_mem, self.kernel.module.backend.limits, self.kernel.name,
                           self.kernel.resources)
            geometry = ((ctypes.c_uint * 3)(*g), (ctypes.c_uint * 3)(*b))
            self._geometry[key] = geometry
        self.kernel.module.backend._launch(self.kernel, self._argv_address, geometry)


class CpuKernel(Kernel):
    def __init__(self, module: "CpuModule", signature: KernelSignature, thread_fns: tuple[int, int]):
        super().__init__(module, signature)
        self.thread_fn, self.threads_fn = thread_fns
        self.name_bytes = signature.name.encode()

    def bind(self, *args) -> CpuBoundLaunch:
        return CpuBoundLaunch(self, check_arguments(self.signature, args, self.module.backend.device))

    @property
    def resources(self) -> KernelResources:
        return self.module.resources(self.name)


class CpuModule(Module):
    def __init__(self, backend: "CpuBackend", library_path: Path, symbols: ModuleSymbols, sources, from_cache: bool,
                 include_dirs=(), defines=None):
        super().__init__(sources, symbols.kernels, from_cache)
        self.backend = backend
        self.include_dirs, self.defines = list(include_dirs), dict(defines or {})
        self.library_path = library_path
        self.constants = symbols.constants
        self._lib = ctypes.CDLL(str(library_path), mode=ctypes.RTLD_LOCAL)
        self._thread_fns = self._read_table("wd_kernels", _KernelEntry,
                                            lambda e: (e.name.decode(), (e.run_thread, e.run_threads)))
        self._symbols = self._read_table("wd_constants", _SymbolEntry,
                                         lambda e: (e.name.decode(), (e.address, e.size)))
        self._kernels: dict[str, CpuKernel] = {}
        self._resources: dict[str, KernelResources] | None = None

    def resources(self, kernel: str) -> KernelResources:
        """The kernel's resources as this backend counts them (see ``CpuBackend.kernel_resources``)."""
        if self._resources is None:
            self._resources = self.backend.kernel_resources(self)
        return self._resources[kernel]

    def _read_table(self, symbol: str, entry_type, item):
        table = ctypes.cast(getattr(self._lib, symbol), ctypes.POINTER(entry_type))
        out, i = {}, 0
        while table[i].name:
            key, value = item(table[i])
            out[key] = value
            i += 1
        return out

    def _kernel(self, name: str) -> CpuKernel:
        if name not in self._kernels:
            self._kernels[name] = CpuKernel(self, self.signatures[name], self._thread_fns[name])
        return self._kernels[name]

    def set_constant(self, name: str, value) -> None:
        if name not in self._symbols:
            raise KeyError(
                f"__constant__ symbol {name!r} not found in {', '.join(map(str, self.sources))}; "
                f"constants: {', '.join(sorted(self._symbols)) or '(none)'}"
            )
        address, size = self._symbols[name]
        data = build_cache.constant_bytes(name, value, size, self.constants.get(name, "?"))
        ctypes.memmove(address, data.ctypes.data, size)


class _KernelEntry(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("run_thread", ctypes.c_void_p), ("run_threads", ctypes.c_void_p)]


class _SymbolEntry(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("address", ctypes.c_void_p), ("size", ctypes.c_ulonglong)]


# Compiling the marker pass's output: its markers are the CUDA qualifiers again.
MARKER_DEFINES = ["-D__wd_global__=", "-D__wd_constant__=", "-D__wd_shared__=thread_local"]


def _generated_unit(preprocessed: str, symbols: ModuleSymbols) -> str:
    """The translation unit compiled into the library: the user's sources as
    preprocessed (the very text the cache key hashes, so a file edited during
    the build cannot put new code under the old key), plus tables that let the
    runtime call each kernel with a packed argument array."""
    lines = [preprocessed, "// generated by warp_drive's cpu executor; do not edit"]
    lines += [
        "namespace wd_generated {",
        "template <class T> using value_t = std::remove_cv_t<std::remove_reference_t<T>>;",
        "template <class... A> constexpr std::size_t arity(void (*)(A...)) { return sizeof...(A); }",
        "template <auto F, class... A, std::size_t... I>",
        "inline void apply(void (*)(A...), void* const* a, std::index_sequence<I...>) {",
        "  F(*static_cast<value_t<A>*>(a[I])...);",
        "}",
        "template <auto F> void run(void* const* a, const wd_thread_index* index) {",
        "  wd_set_thread_index(index);",
        "  apply<F>(F, a, std::make_index_sequence<arity(F)>{});",
        "}",
        "// The fast path's loop lives here, next to the kernel: one call per block.",
        "// The arguments are copied once into locals, which nothing the kernel",
        "// writes can alias, and the kernel is inlined into the loop (flatten), so",
        "// what does not depend on the thread index is done once per block, not",
        "// once per thread; the thread-local index is addressed once too.",
        "template <auto F, class... A, std::size_t... I>",
        "inline __attribute__((always_inline)) void loop(void (*)(A...), void* const* a, wd_thread_index* index,",
        "                                                unsigned int count, std::index_sequence<I...>) {",
        "  const std::tuple<value_t<A>...> args(*static_cast<value_t<A>*>(a[I])...);",
        "  const dim3 b = index->block_dim;",
        "  dim3* const thread_idx = &threadIdx;",
        "  dim3 t = index->thread;  // advanced in registers; index->thread is only written",
        "  for (unsigned int i = 0; i < count; ++i) {",
        "    *thread_idx = t;",
        "    index->thread = t;",
        "    F(std::get<I>(args)...);",
        "    if (++t.x == b.x) { t.x = 0; if (++t.y == b.y) { t.y = 0; ++t.z; } }",
        "  }",
        "}",
        "template <auto F> __attribute__((flatten)) void run_threads(void* const* a, wd_thread_index* index, unsigned int count) {",
        "  loop<F>(F, a, index, count, std::make_index_sequence<arity(F)>{});",
        "}",
        "}  // namespace wd_generated",
    ]
    for name, ctype in symbols.dynamic_shared.items():
        lines.append(
            f"thread_local {ctype} {name}[{DYNAMIC_SHARED_BYTES} / sizeof({ctype})] __attribute__((aligned(16)));"
        )
    lines.append('extern "C" __attribute__((visibility("default"))) const wd_kernel_entry wd_kernels[] = {')
    lines += [f'  {{"{k}", &wd_generated::run<&{k}>, &wd_generated::run_threads<&{k}>}},' for k in symbols.kernels]
    lines.append("  {nullptr, nullptr, nullptr}};")
    lines.append('extern "C" __attribute__((visibility("default"))) const wd_symbol_entry wd_constants[] = {')
    lines += [f'  {{"{c}", (void*)&{c}, sizeof({c})}},' for c in symbols.constants]
    lines.append("  {nullptr, nullptr, 0}};")
    return "\n".join(lines) + "\n"


class CpuBackend(Backend):
    name = "cpu"
    capabilities = Capabilities(serial_blocks=True, max_blocks_per_env=1, collective_backend="gloo", memory="host",
                                shares_host_cores=True)
    # Defines of every build: the emulation header defines WD_CPU_EXECUTOR unless told to look like nvcc.
    shape_defines: dict[str, str] = {}

    def __init__(self, mode: str | None = None, num_workers: int | None = None):
        self.mode = (mode or os.environ.get("WARP_DRIVE_CPU_MODE") or "release").lower()
        if self.mode not in MODES:
            raise ValueError(f"WARP_DRIVE_CPU_MODE={self.mode!r}; choose one of {', '.join(MODES)}")
        self.device = torch.device("cpu")
        self.limits = DeviceLimits(max_threads_per_block=1 << 30, max_dynamic_shared_bytes=DYNAMIC_SHARED_BYTES)
        self.cxx = build_cache.host_compiler("the cpu executor")
        self._flags = COMMON_FLAGS + MODES[self.mode]
        self._identity = _compiler_identity(self.cxx) + " " + " ".join(self._flags)
        self._runtime = self._load_runtime()
        self._race_log = self._open_race_log() if self.mode == "race" else None
        self.set_shuffle(race.shuffle_seed_from_environment(0 if self.mode == "race" else None))
        self._packed_by_address: "weakref.WeakValueDictionary[int, PackedArguments]" = weakref.WeakValueDictionary()
        self._signals = self._runtime.wd_cpu_install_signal_handlers()
        self._error = ctypes.create_string_buffer(2048)
        self._launch_fn = self._runtime.wd_cpu_launch
        self._launch_fn.restype = ctypes.c_int
        self._launch_fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        if num_workers is None and self.mode == "debug":
            num_workers = 1
        if num_workers is not None:
            self.set_num_workers(num_workers)
        self._modules: dict[str, CpuModule] = {}

    # ---------------------------------------------------------------- runtime
    def _load_runtime(self) -> ctypes.CDLL:
        """The process's one runtime library (and so its one worker pool).

        Kernel libraries resolve ``wd_cpu_barrier`` & co. against the first
        runtime loaded RTLD_GLOBAL, so a second copy would run blocks its
        kernels cannot call back into. Every backend shares the first; only
        AddressSanitizer needs a differently built runtime, and it cannot be
        mixed with the plain one in a process.
        """
        global _RUNTIME
        flavour = self.mode if self.mode in ("asan", "race") else "plain"
        if _RUNTIME is not None:
            if _RUNTIME[0] != flavour:
                raise RuntimeError(
                    f"the cpu runtime is already loaded in {_RUNTIME[0]} form; WARP_DRIVE_CPU_MODE=asan, =race and the "
                    "other modes cannot be mixed in one process (set the mode before the first use of the cpu backend)"
                )
            return _RUNTIME[1]
        # The runtime reads these two with atoi/atol: checked (EnvVarError naming them) before it loads.
        env_vars.check("WARP_DRIVE_CPU_THREADS", "WARP_DRIVE_CPU_STACK_KB")
        if flavour == "race":
            race.require_tsan_loaded()
        flags = COMMON_FLAGS + RUNTIME_FLAGS[flavour]
        key = build_cache.cache_key(RUNTIME_SOURCE.read_text(), _compiler_identity(self.cxx), " ".join(flags))
        target = build_cache.cache_dir("cpu") / f"wd_runtime_{key}.so"
        build_cache.build_atomically(
            target,
            lambda tmp: build_cache.run_compiler(
                [self.cxx, *flags, str(RUNTIME_SOURCE), "-o", str(tmp)], "building the cpu runtime"
            ),
        )
        _RUNTIME = (flavour, ctypes.CDLL(str(target), mode=ctypes.RTLD_GLOBAL))
        return _RUNTIME[1]

    @staticmethod
    def _open_race_log() -> "race.ReportLog":
        global _RACE_LOG
        if _RACE_LOG is None:
            _RACE_LOG = race.ReportLog(build_cache.cache_dir("cpu") / "race")
        return _RACE_LOG

    def set_shuffle(self, seed: int | None) -> None:
        """Run the threads of every block in an order drawn from ``seed`` (None: in order).
        Process-wide, as the worker pool is."""
        self._runtime.wd_cpu_set_shuffle.argtypes = [ctypes.c_int, ctypes.c_ulonglong]
        self._runtime.wd_cpu_set_shuffle(0 if seed is None else 1, 0 if seed is None else int(seed) & (2**64 - 1))
        self.shuffle_seed = seed

    @property
    def num_workers(self) -> int:
        return self._runtime.wd_cpu_num_workers()

    def set_num_workers(self, n: int) -> None:
        """Size of the thread pool that runs blocks (default: number of cores)."""
        self._runtime.wd_cpu_set_num_workers(int(n))

    def stats(self) -> dict[str, int]:
        """Counters since start: launches, blocks run with fibers, blocks run on the fast path."""
        out = (ctypes.c_ulonglong * 3)()
        self._runtime.wd_cpu_stats(out)
        return {"launches": out[0], "fiber_blocks": out[1], "plain_blocks": out[2]}

    def _launch(self, kernel: CpuKernel, argv_address: int, geometry) -> None:
        grid, block = geometry
        # ctypes releases the GIL for the call; a Ctrl-C reaches the runtime's
        # handler, and Python's own raises KeyboardInterrupt as the call returns.
        if self._race_log is not None:
            self._race_log.pass_on_unrelated()
        try:
            rc = self._launch_fn(kernel.name_bytes, kernel.thread_fn, kernel.threads_fn, argv_address,
                                 ctypes.addressof(grid), ctypes.addressof(block), ctypes.addressof(self._error),
                                 len(self._error))
        except BaseException as exc:
            self._interrupted(exc, argv_address)
            raise
        if self._race_log is not None:
            self._race_log.check_launch(kernel.name, self._arrays_of(kernel, argv_address))
        if rc != 0:
            self._launch_failed(rc, argv_address)

    def _arrays_of(self, kernel: CpuKernel, argv_address: int) -> dict[str, tuple[int, int, int]]:
        """The launch's array parameters: name -> (address, bytes, element size), to name raced memory."""
        packed = self._packed_by_address.get(argv_address)
        if packed is None:
            return {}
        params = kernel.signature.params
        return {params[index].name: (pointer, tensor.numel() * tensor.element_size(), tensor.element_size())
                for index, tensor, pointer, _ in packed._bound}

    def _interrupted(self, exc: BaseException, argv_address: int) -> None:
        """An exception (KeyboardInterrupt) raised as the launch returned: say
        which kernel it cut short, and keep the arguments of blocks that still run."""
        rc = self._runtime.wd_cpu_last_status()
        if rc in (_INTERRUPTED, _ABANDONED):
            if rc == _ABANDONED and argv_address in self._packed_by_address:
                _ABANDONED_ARGUMENTS.append(self._packed_by_address[argv_address])
            exc.add_note(self._error.value.decode(errors="replace"))

    def _launch_failed(self, rc: int, argv_address: int) -> None:
        message = _with_source_lines(self._error.value.decode(errors="replace"))
        if rc in (_INTERRUPTED, _ABANDONED):
            try:
                # Python's SIGINT handler, if it has not run yet (KeyboardInterrupt
                # by default; nothing on a thread other than the main one).
                ctypes.pythonapi.PyErr_CheckSignals()
            except BaseException as exc:
                self._interrupted(exc, argv_address)
                raise
            if rc == _ABANDONED and argv_address in self._packed_by_address:
                _ABANDONED_ARGUMENTS.append(self._packed_by_address[argv_address])
        raise KernelLaunchError(message)

    # ---------------------------------------------------------------- builds
    def build(self, sources, include_dirs=(), defines=None) -> CpuModule:
        paths = [Path(s).resolve() for s in sources]
        for path in paths:
            if not path.is_file():
                raise KernelBuildError(f"kernel source {path} does not exist")
        include_flags, define_flags = build_cache.include_and_define_flags(
            include_dirs, {**self.shape_defines, **(defines or {})})
        # One preprocessing with this build's own flags (-O, sanitizers and
        # coverage change what the headers expand to): its output is parsed
        # for the kernels' signatures, hashed, and compiled as it is.
        preprocessed = build_cache.preprocess_for_symbols(self.cxx, paths, include_flags, define_flags, self._flags)
        try:
            symbols = parse_symbols(preprocessed)
        except ValueError as exc:
            raise KernelBuildError(str(exc)) from None
        unit_text = _generated_unit(preprocessed, symbols)
        # Everything the library is built from: the unit compiled (the sources
        # and headers as preprocessed, and the generated tables), the runtime
        # ABI and the compiler with its flags.
        key = build_cache.cache_key(unit_text, self._identity, RUNTIME_SOURCE.read_text())
        self._signals = self._runtime.wd_cpu_install_signal_handlers()  # again: another may have taken over
        if key in self._modules:
            return self._modules[key]
        directory = build_cache.cache_dir("cpu")
        target = directory / f"module_{key}.so"

        def compile_to(tmp: Path) -> None:
            unit = directory / f"module_{key}.cpp"
            build_cache.write_atomically(unit, unit_text)
            build_cache.run_compiler(
                [self.cxx, *self._flags, *MARKER_DEFINES, "-x", "c++", str(unit), "-o", str(tmp)],
                f"compiling {', '.join(map(str, paths))}",
            )

        from_cache = build_cache.build_atomically(target, compile_to)
        module = CpuModule(self, target, symbols, paths, from_cache, include_dirs, defines)
        self._modules[key] = module
        return module

    def kernel_resources(self, module: CpuModule) -> dict[str, KernelResources]:
        """Fibers have no register file: a block may be as large as a launch asks."""
        limit = KernelResources(max_threads_per_block=self.limits.max_threads_per_block,
                                source="cpu executor: no per-kernel limit")
        return {name: limit for name in module.signatures}


class GpuShapedCpuBackend(CpuBackend):
    """The cpu executor shaped like a GPU (see the module docstring): the GPU's
    macros, block limits and launch geometry, so that CI executes every line a
    GPU executes. Results are the same bits as on the native shape."""

    name = "cpu-gpu"
    capabilities = Capabilities(serial_blocks=False, max_blocks_per_env=1, collective_backend="gloo", memory="host",
                                shares_host_cores=True)
    shape_defines = {"WD_EMULATE_GPU_MACROS": "1"}
    arch = DEFAULT_ARCH

    def __init__(self, mode: str | None = None, num_workers: int | None = None):
        super().__init__(mode, num_workers)
        self.limits = DeviceLimits(max_threads_per_block=MAX_THREADS_PER_BLOCK,
                                   max_dynamic_shared_bytes=DYNAMIC_SHARED_BYTES)

    def kernel_resources(self, module: CpuModule) -> dict[str, KernelResources]:
        """nvcc's resource report for the GPU build of the same sources; without
        nvcc, the device limit alone (registers unknown)."""
        if find_nvcc() is None:
            unknown = KernelResources(max_threads_per_block=MAX_THREADS_PER_BLOCK,
                                      source="nvcc not found: registers unknown, the device limit")
            return {name: unknown for name in module.signatures}
        return ptxas_resources(module.sources, module.include_dirs, module.defines, self.arch)

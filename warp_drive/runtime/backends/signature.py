"""Kernel signatures read from preprocessed CUDA C.

Both executors take their knowledge of a kernel's parameters from here: the
source is run through the host preprocessor with marker definitions of
``__global__`` / ``__constant__`` / ``__shared__`` (see the emulation header's
``WD_MARKER_PASS`` mode), and the markers are found in the output. So a launch
on the CPU and on the GPU is checked against the same C parameter list, and a
wrong argument count or dtype is an error naming the kernel and the parameter
instead of corrupted memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

GLOBAL_MARKER = "__wd_global__"
CONSTANT_MARKER = "__wd_constant__"
SHARED_MARKER = "__wd_shared__"

# C base type (after dropping qualifiers) -> numpy dtype of the element / scalar.
_C_TYPES = {
    "float": np.float32,
    "double": np.float64,
    "int": np.int32,
    "signed int": np.int32,
    "signed": np.int32,
    "int32_t": np.int32,
    "unsigned": np.uint32,
    "unsigned int": np.uint32,
    "uint32_t": np.uint32,
    "long long": np.int64,
    "long long int": np.int64,
    "long": np.int64,
    "long int": np.int64,
    "int64_t": np.int64,
    "unsigned long long": np.uint64,
    "unsigned long long int": np.uint64,
    "unsigned long": np.uint64,
    "uint64_t": np.uint64,
    "size_t": np.uint64,
    "short": np.int16,
    "int16_t": np.int16,
    "unsigned short": np.uint16,
    "uint16_t": np.uint16,
    "char": np.int8,
    "signed char": np.int8,
    "int8_t": np.int8,
    "unsigned char": np.uint8,
    "uint8_t": np.uint8,
    "bool": np.bool_,
    "void": None,
}

_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct)\b")


@dataclass(frozen=True)
class Param:
    """One kernel parameter: ``ctype`` as written (qualifiers dropped)."""

    name: str
    ctype: str
    pointer: bool
    dtype: np.dtype | None  # element dtype (pointer) or value dtype (scalar); None: void* / unknown
    # A pointer to const data (`const float*`, `float const*`; not `float* const`): the kernel does not
    # write through it. What the wrapper reads to know which arrays an env's reset kernel writes.
    read_only: bool = False

    def describe(self) -> str:
        return f"{self.ctype} {self.name}"


@dataclass(frozen=True)
class KernelSignature:
    name: str
    params: tuple[Param, ...]

    def describe(self) -> str:
        return f"{self.name}({', '.join(p.describe() for p in self.params)})"


@dataclass(frozen=True)
class ModuleSymbols:
    """What a translation unit declares that the runtime must know about."""

    kernels: dict[str, KernelSignature]
    constants: dict[str, str]  # __constant__ name -> declared C type (array bound included)
    dynamic_shared: dict[str, str]  # extern __shared__ name -> element C type


def _split_top_level(text: str, sep: str = ",") -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _strip_attributes(text: str) -> str:
    # __attribute__((...)) may nest parentheses; drop them with a small scanner.
    out, i = [], 0
    while i < len(text):
        if text.startswith("__attribute__", i):
            j = text.index("(", i)
            depth = 0
            while j < len(text):
                depth += text[j] == "("
                depth -= text[j] == ")"
                j += 1
                if depth == 0:
                    break
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def parse_param(text: str, kernel: str, index: int) -> Param:
    text = _strip_attributes(text)
    pointee = text.split("*")[0] if "*" in text else ""  # the qualifiers before the first '*' are the data's
    read_only = bool(re.search(r"\bconst\b", pointee))
    text = _QUALIFIERS.sub(" ", text)
    text = re.sub(r"\[\s*\]", "*", text)  # `float a[]` is a pointer parameter
    match = re.match(r"^(.*?)([A-Za-z_]\w*)\s*$", text.strip(), re.S)
    if not match or not match.group(1).strip():
        raise ValueError(f"kernel {kernel}: parameter {index} ({text.strip()!r}) needs a type and a name")
    type_text, name = match.group(1), match.group(2)
    pointer = type_text.count("*") + type_text.count("&")
    base = " ".join(type_text.replace("*", " ").replace("&", " ").split())
    dtype = _C_TYPES.get(base, "unknown")
    if pointer > 1 or (not pointer and dtype in (None, "unknown")):
        raise ValueError(
            f"kernel {kernel}: parameter {name!r} has type {type_text.strip()!r}; kernels take "
            "pointers to numeric types and numeric scalars only"
        )
    ctype = f"{base}{' *' if pointer else ''}"
    return Param(
        name=name,
        ctype=ctype,
        pointer=bool(pointer),
        dtype=None if dtype in (None, "unknown") else np.dtype(dtype),
        read_only=bool(pointer) and read_only,
    )


_KERNEL_RE = re.compile(
    GLOBAL_MARKER + r"\s+(?:[\w:<>]+\s+)*?void\s+(?:[\w()]+\s+)*?([A-Za-z_]\w*)\s*\((.*?)\)\s*([;{])",
    re.S,
)
_CONSTANT_RE = re.compile(CONSTANT_MARKER + r"\s+([^;=(){}]*?)\s*([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)\s*[;=]")
_DYN_SHARED_RE = re.compile(r"extern\s+" + SHARED_MARKER + r"\s+([^;]*?)\s*([A-Za-z_]\w*)\s*\[\s*\]\s*;")


def parse_symbols(preprocessed: str) -> ModuleSymbols:
    """Find kernels, ``__constant__`` symbols and dynamic shared arrays.

    A kernel may be declared before it is defined; the definition wins, and a
    declaration without parameter names is only used when no definition exists.
    """
    kernels: dict[str, KernelSignature] = {}
    for match in _KERNEL_RE.finditer(preprocessed):
        name, params_text, terminator = match.groups()
        params_text = params_text.strip()
        if params_text in ("", "void"):
            params = ()
        else:
            try:
                params = tuple(
                    parse_param(p, name, i) for i, p in enumerate(_split_top_level(params_text))
                )
            except ValueError:
                if terminator == ";":  # an unnamed forward declaration; the definition follows
                    continue
                raise
        if terminator == "{" or name not in kernels:
            kernels[name] = KernelSignature(name, params)
    constants = {m.group(2): (m.group(1).strip() + " " + m.group(3).strip()).strip()
                 for m in _CONSTANT_RE.finditer(preprocessed)}
    shared = {m.group(2): m.group(1).strip() for m in _DYN_SHARED_RE.finditer(preprocessed)}
    return ModuleSymbols(kernels=kernels, constants=constants, dynamic_shared=shared)

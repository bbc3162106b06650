"""What nvcc recorded in a cubin about each kernel's parameters, read without a driver.

A cubin is an ELF64 file. For every kernel nvcc writes a section
``.nv.info.<kernel>``: a list of attributes, each a format byte, an attribute
byte, and either a 16-bit value (formats 0x01-0x03) or a 16-bit length and a
payload (format 0x04). One ``EIATTR_KPARAM_INFO`` (0x17) attribute per
parameter holds: u32 index, u16 ordinal, u16 offset, and a u32 whose bits
18..31 are the size in bytes.

The pycuda executor compares this table with the kernel's signature as the
host preprocessor read it (:func:`warp_drive.runtime.backends.pycuda_backend.param_layout`)
before the first launch. Reading it from the file, rather than asking the
driver parameter by parameter, works with any driver, and asks nothing past a
kernel's last parameter (a question the driver answers with an error that
compute-sanitizer reports).
"""

from __future__ import annotations

import struct

EIATTR_KPARAM_INFO = 0x17
_FORMAT_WITH_PAYLOAD = 0x04
_FORMATS_WITH_VALUE = (0x01, 0x02, 0x03)


def elf_sections(data: bytes) -> dict[str, bytes]:
    """The named sections of an ELF64 file."""
    if data[:4] != b"\x7fELF" or len(data) < 0x40 or data[4] != 2:
        raise ValueError("not an ELF64 file (a cubin is one)")
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    names_header = headers[e_shstrndx]
    names = data[names_header[4]:names_header[4] + names_header[5]]
    sections = {}
    for name_offset, _type, _flags, _address, offset, size, *_ in headers:
        name = names[name_offset:names.index(b"\0", name_offset)].decode()
        sections[name] = data[offset:offset + size]
    return sections


def kernel_params(cubin: bytes | dict[str, bytes], kernel: str) -> list[tuple[int, int, int]] | None:
    """``(ordinal, offset, size)`` of each parameter of ``kernel`` in ordinal
    order, as compiled; None when the cubin has no ``.nv.info.<kernel>``
    section (a format this reader does not know: nothing to compare).

    ``cubin``: the file's bytes, or its :func:`elf_sections` (to parse once).
    """
    sections = elf_sections(cubin) if isinstance(cubin, (bytes, bytearray)) else cubin
    info = sections.get(f".nv.info.{kernel}")
    if info is None:
        return None
    params, position = [], 0
    while position + 4 <= len(info):
        fmt, attribute, value = struct.unpack_from("<BBH", info, position)
        position += 4
        if fmt == _FORMAT_WITH_PAYLOAD:
            payload = info[position:position + value]
            position += value
            if attribute == EIATTR_KPARAM_INFO and len(payload) >= 12:
                _index, ordinal, offset, flags = struct.unpack_from("<IHHI", payload)
                params.append((ordinal, offset, flags >> 18))
        elif fmt not in _FORMATS_WITH_VALUE:
            return None  # an attribute format this reader does not know: no claim about the table
    return sorted(params)

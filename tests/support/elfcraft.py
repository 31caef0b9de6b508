"""Hand-made ELF files for hostile-input tests: what no linker writes, but an attacker can.

``craft`` lays out one 64-bit little-endian x86-64 shared object: the ELF header, a PT_LOAD
covering the whole file (so addresses equal file offsets), a PT_DYNAMIC, the dynamic
entries and a string table. Each field a test wants to corrupt is a parameter.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

DT_NEEDED, DT_STRTAB, DT_SONAME, DT_STRSZ, DT_VERNEED = 1, 5, 14, 10, 0x6FFFFFFE
PT_LOAD, PT_DYNAMIC = 1, 2
_EHDR, _PHDR, _DYN = 64, 56, 16


def craft(out: Path, *, needed: Sequence[str] = (), needed_offsets: Sequence[int] = (),
          soname: str | None = None, phoff: int = _EHDR, extra: Sequence[tuple[int, int]] = (),
          blob: bytes = b"", blob_tags: Sequence[int] = ()) -> Path:
    """Write the object; ``needed_offsets`` are raw DT_NEEDED values (string offsets),
    ``blob`` is appended after the string table and each tag in ``blob_tags`` points at it."""
    strings = bytearray(b"\0")
    offsets: list[int] = []
    for name in [*needed, *([soname] if soname else [])]:
        offsets.append(len(strings))
        strings += name.encode("utf-8", "surrogateescape") + b"\0"
    tags: list[tuple[int, int]] = [(DT_NEEDED, o) for o in offsets[:len(needed)]]
    tags += [(DT_NEEDED, o) for o in needed_offsets]
    if soname:
        tags.append((DT_SONAME, offsets[-1]))
    tags += list(extra)
    dyn_at = _EHDR + 2 * _PHDR
    dyn_size = (len(tags) + len(blob_tags) + 3) * _DYN
    str_at = dyn_at + dyn_size
    blob_at = str_at + len(strings)
    tags += [(DT_STRTAB, str_at), (DT_STRSZ, len(strings))]
    tags += [(tag, blob_at) for tag in blob_tags]
    tags.append((0, 0))
    size = blob_at + len(blob)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, _EHDR, _PHDR, 2,
                                 64, 0, 0)
    phdrs = struct.pack("<IIQQQQQQ", PT_LOAD, 5, 0, 0, 0, size, size, 0x1000)
    phdrs += struct.pack("<IIQQQQQQ", PT_DYNAMIC, 6, dyn_at, dyn_at, dyn_at, dyn_size,
                         dyn_size, 8)
    dyn = b"".join(struct.pack("<qQ", t, v) for t, v in tags)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(header + phdrs + dyn + bytes(strings) + blob)
    return out


def verneed_bomb(needs: int, aux: int, name_offset: int = 1) -> bytes:
    """``needs`` Verneed entries (vn_next 16 apart), each pointing at one shared chain of
    ``aux`` Vernaux entries: needs * aux entries to walk in a few kilobytes."""
    aux_at = needs * 16
    out = bytearray()
    for i in range(needs):
        nxt = 16 if i < needs - 1 else 0
        out += struct.pack("<HHIII", 1, aux, name_offset, aux_at - i * 16, nxt)
    for i in range(aux):
        nxt = 16 if i < aux - 1 else 0
        out += struct.pack("<IHHII", 0, 0, 2, name_offset, nxt)
    return bytes(out)

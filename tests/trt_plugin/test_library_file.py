"""The library file's ELF contract: NEEDED has neither torch, TensorRT nor a shared cudart; NODELETE; only
getCreators and setLoggerFinder exported.
"""
from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from trt_plugin.harness import PLUGIN_PATH, needs_plugin


def _elf_dynamic(path: Path):
    """(NEEDED names, FLAGS_1, {defined exported symbol: type}, undefined symbol names) of an ELF64 LE library."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "expected a little-endian ELF64 file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def cstr(table_index, off):
        base = sections[table_index][4]
        end = data.index(b"\0", base + off)
        return data[base + off:end].decode()

    needed, flags1, defined, undefined = [], 0, {}, set()
    for _name, stype, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if stype == 6:  # SHT_DYNAMIC
            for k in range(size // 16):
                tag, val = struct.unpack_from("<qQ", data, offset + 16 * k)
                if tag == 1:  # DT_NEEDED
                    needed.append(cstr(link, val))
                elif tag == 0x6FFFFFFB:  # DT_FLAGS_1
                    flags1 = val
        elif stype == 11:  # SHT_DYNSYM
            for k in range(1, size // entsize):
                st_name, st_info, st_other, st_shndx, _v, _s = struct.unpack_from("<IBBHQQ", data, offset + k * entsize)
                name, bind, typ = cstr(link, st_name), st_info >> 4, st_info & 0xF
                if st_shndx == 0:
                    undefined.add(name)
                elif bind in (1, 2) and (st_other & 3) == 0 and typ in (1, 2):  # global/weak, default, obj/func
                    defined[name] = typ
    return needed, flags1, defined, undefined


@needs_plugin
def test_library_needs_neither_torch_tensorrt_nor_shared_cudart():
    needed, flags1, _, _ = _elf_dynamic(PLUGIN_PATH)
    forbidden = ("libtorch", "libc10", "libnvinfer", "libcudart", "libcuda.so", "libpython")
    assert not [n for n in needed if n.startswith(forbidden)], needed
    assert set(needed) <= {"libstdc++.so.6", "libgcc_s.so.1", "libc.so.6", "libm.so.6", "libdl.so.2",
                           "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}, needed
    assert flags1 & 0x8, "the library must be DF_1_NODELETE: a registry may hold its creator until exit"


@needs_plugin
def test_library_exports_only_the_plugin_entry_points():
    _, _, defined, undefined = _elf_dynamic(PLUGIN_PATH)
    assert defined == {"getCreators": 2, "setLoggerFinder": 2}  # STT_FUNC
    # TensorRT is found with dlsym at run time, never through a link-time reference
    assert not {s for s in undefined if "nvinfer" in s or s in ("getPluginRegistry", "getLogger")}
    assert not {s for s in undefined if s.startswith("cuda") or (s.startswith("cu") and s[2:3].isupper())}, \
        "the CUDA runtime must be linked statically (and the driver is reached through it, not linked)"


@needs_plugin
@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) is not installed")
def test_readelf_agrees_on_needed():
    out = subprocess.run(["readelf", "-d", str(PLUGIN_PATH)], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]
    assert needed == _elf_dynamic(PLUGIN_PATH)[0]
    assert "NODELETE" in out

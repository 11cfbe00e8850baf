"""The seccomp filter that guards the sealed timer's pages (integrity/seal.py): a classic-BPF
program that kills the process when a syscall would change, unmap, replace or move memory in
[start, end), or when it calls `ptrace` or `process_vm_writev`. x86_64 only; other architectures
pass through it unchecked (the seal says so)."""

from __future__ import annotations

import ctypes
import os
import struct
from typing import Any

# syscall numbers (x86_64)
SYS = {"mmap": 9, "mprotect": 10, "munmap": 11, "mremap": 25, "madvise": 28, "shmat": 30, "ptrace": 101,
       "remap_file_pages": 216, "process_vm_writev": 311, "pkey_mprotect": 329, "seccomp": 317, "mseal": 462}
AUDIT_ARCH_X86_64 = 0xC000003E
RET_KILL_PROCESS, RET_ALLOW = 0x80000000, 0x7FFF0000
MAP_FIXED, MREMAP_FIXED, SHM_REMAP = 0x10, 0x2, 0x4000

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _Program:
    """A classic-BPF program with symbolic jump targets (all forward), for the seccomp filter."""

    LD_W_ABS, LD_IMM, LD_MEM, LDX_MEM, ST, TAX = 0x20, 0x00, 0x60, 0x61, 0x02, 0x07
    ADD_X, JA, JEQ, JGT, JGE, JSET, RET = 0x0C, 0x05, 0x15, 0x25, 0x35, 0x45, 0x06

    def __init__(self) -> None:
        self.code: list[tuple[int, Any, Any, int]] = []
        self.labels: dict[str, int] = {}

    def op(self, code: int, k: int = 0, jt: Any = 0, jf: Any = 0) -> None:
        self.code.append((code, jt, jf, k & 0xFFFFFFFF))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def arg(self, index: int, high: bool) -> None:
        self.op(self.LD_W_ABS, 16 + 8 * index + (4 if high else 0))

    def _offset(self, target: Any, at: int) -> int:
        """A jump's target as the count of instructions it skips (classic BPF jumps forward only)."""
        if isinstance(target, int):
            return target
        offset = self.labels[target] - at - 1
        assert 0 <= offset < 256, target
        return offset

    def assemble(self) -> bytes:
        out = b""
        for at, (code, jt, jf, k) in enumerate(self.code):
            if code == self.JA:
                k, jt, jf = self._offset(jt, at), 0, 0
            out += struct.pack("<HBBI", code, self._offset(jt, at), self._offset(jf, at), k)
        return out

    def overlap(self, tag: str, addr: int, length: int, start: int, end: int, hit: str, clear: str) -> None:
        """Jump to `hit` when [arg addr, + arg length) meets [start, end), else to `clear` (64-bit
        arithmetic in 32-bit halves: a < end and a + length > start)."""
        e_hi, e_lo, s_hi, s_lo = end >> 32, end & 0xFFFFFFFF, start >> 32, start & 0xFFFFFFFF
        self.arg(addr, True)
        self.op(self.JGT, e_hi, clear, f"{tag}1")
        self.label(f"{tag}1")
        self.op(self.JEQ, e_hi, f"{tag}2", f"{tag}3")
        self.label(f"{tag}2")
        self.arg(addr, False)
        self.op(self.JGE, e_lo, clear, f"{tag}3")
        self.label(f"{tag}3")  # a < end: now a + length, low half and carry
        self.arg(addr, False)
        self.op(self.ST, 0)
        self.arg(length, False)
        self.op(self.TAX)
        self.op(self.LD_MEM, 0)
        self.op(self.ADD_X)
        self.op(self.ST, 1)
        self.op(self.LDX_MEM, 1)
        self.op(self.LD_MEM, 0)
        self.op(0x2D, 0, f"{tag}c1", f"{tag}c0")  # JGT X: a_lo > sum_lo means a carry
        self.label(f"{tag}c1")
        self.op(self.LD_IMM, 1)
        self.op(self.ST, 2)
        self.op(self.JA, 0, f"{tag}h")
        self.label(f"{tag}c0")
        self.op(self.LD_IMM, 0)
        self.op(self.ST, 2)
        self.label(f"{tag}h")
        self.arg(addr, True)
        self.op(self.TAX)
        self.arg(length, True)
        self.op(self.ADD_X)
        self.op(self.TAX)
        self.op(self.LD_MEM, 2)
        self.op(self.ADD_X)  # A = high half of a + length
        self.op(self.JGT, s_hi, hit, f"{tag}4")
        self.label(f"{tag}4")
        self.op(self.JEQ, s_hi, f"{tag}5", clear)
        self.label(f"{tag}5")
        self.op(self.LD_MEM, 1)
        self.op(self.JGT, s_lo, hit, clear)


def filter_program(start: int, end: int) -> bytes:
    """The seccomp filter protecting [start, end)."""
    p = _Program()
    p.op(p.LD_W_ABS, 4)  # arch
    p.op(p.JEQ, AUDIT_ARCH_X86_64, "x86", "allow")
    p.label("x86")
    p.op(p.LD_W_ABS, 0)  # syscall number
    for name in ("ptrace", "process_vm_writev"):
        p.op(p.JEQ, SYS[name], "kill", f"n_{name}")
        p.label(f"n_{name}")
    for name in ("mprotect", "pkey_mprotect", "munmap", "madvise", "remap_file_pages"):
        p.op(p.JEQ, SYS[name], "range01", f"n_{name}")
        p.label(f"n_{name}")
    p.op(p.JEQ, SYS["mremap"], "mremap", "n_mremap")
    p.label("n_mremap")
    p.op(p.JEQ, SYS["mmap"], "mmap", "n_mmap")
    p.label("n_mmap")
    p.op(p.JEQ, SYS["shmat"], "shmat", "allow")
    p.label("shmat")
    p.arg(2, False)
    p.op(p.JSET, SHM_REMAP, "kill", "allow")
    p.label("mmap")
    p.arg(3, False)
    p.op(p.JSET, MAP_FIXED, "range01", "allow")
    p.label("mremap")
    p.overlap("r", 0, 1, start, end, "kill", "mremap_new")
    p.label("mremap_new")
    p.arg(3, False)
    p.op(p.JSET, MREMAP_FIXED, "mremap_to", "allow")
    p.label("mremap_to")
    p.overlap("t", 4, 2, start, end, "kill", "allow")
    p.label("range01")
    p.overlap("a", 0, 1, start, end, "kill", "allow")
    p.label("kill")
    p.op(p.RET, RET_KILL_PROCESS)
    p.label("allow")
    p.op(p.RET, RET_ALLOW)
    return p.assemble()


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_filter(start: int, end: int) -> None:
    """The filter on every thread of this process (OSError: it could not be installed, and why)."""
    program = filter_program(start, end)
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    if _libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(f"no_new_privs failed: {os.strerror(ctypes.get_errno())}")
    rc = _libc.syscall(SYS["seccomp"], 1, 1, ctypes.byref(prog))  # SET_MODE_FILTER, FLAG_TSYNC
    if rc != 0:
        raise OSError(f"installing the seccomp filter failed: "
                        f"{os.strerror(ctypes.get_errno()) if rc < 0 else f'thread {rc} could not take it'}")

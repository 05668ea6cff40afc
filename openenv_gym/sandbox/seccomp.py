"""A seccomp filter on an episode's processes, made by libseccomp (the system's library, through ctypes): they may not
make user namespaces of their own, nor use the kernel's keyrings. In a user namespace of their own they would be
root, with more of the kernel in reach (mounting file systems, making network devices): the kernel bugs a sandbox
cannot stop are mostly there. Where libseccomp is missing, nothing is filtered (support.py says so).

libseccomp compiles the rules to a BPF program once per process (`compiled()`: the fork server does it before it
forks any program); each program only loads those bytes, with two prctl(2) calls."""

from __future__ import annotations

import ctypes
import errno
import functools
import os

from openenv_gym.runtime.lifetime import libc

CLONE_NEWUSER = 0x10000000
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
BPF_INSTRUCTION_BYTES = 8  # struct sock_filter


def _errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)  # SCMP_ACT_ERRNO


class _ArgumentTest(ctypes.Structure):  # struct scmp_arg_cmp
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


class _Program(ctypes.Structure):  # struct sock_fprog
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


@functools.cache
def libseccomp() -> ctypes.CDLL | None:
    try:  # (by its soname: find_library would run ldconfig)
        library = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return None
    library.seccomp_init.restype = ctypes.c_void_p
    library.seccomp_init.argtypes = [ctypes.c_uint32]
    library.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                               ctypes.POINTER(_ArgumentTest)]
    library.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    library.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    library.seccomp_release.argtypes = [ctypes.c_void_p]
    return library


@functools.cache
def compiled() -> bytes | None:
    """The filter as BPF instructions for this machine's architecture; None without libseccomp. unshare and clone
    asking for a new user namespace fail with EPERM; clone3, whose flags a filter cannot read, fails with ENOSYS
    (the C library then falls back to clone)."""
    library = libseccomp()
    if library is None:
        return None
    context = library.seccomp_init(SCMP_ACT_ALLOW)
    if not context:
        raise OSError("libseccomp could not make a filter")
    try:
        flags = (_ArgumentTest * 1)(_ArgumentTest(0, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
        rules = [("unshare", _errno(errno.EPERM), flags), ("clone", _errno(errno.EPERM), flags),
                 ("clone3", _errno(errno.ENOSYS), None),
                 # the kernel's keyrings, which outlive an episode in a sandbox renewed with the same uid (every
                 # episode of an ordinary user's server without subordinate uids): refused, as Docker refuses them
                 *((name, _errno(errno.EPERM), None) for name in ("add_key", "keyctl", "request_key"))]
        for name, action, tests in rules:
            number = library.seccomp_syscall_resolve_name(name.encode())
            if library.seccomp_rule_add_array(context, action, number, len(tests or ()), tests) != 0:
                raise OSError(f"libseccomp could not add its rule for {name}")
        exported = os.memfd_create("seccomp-filter")
        try:
            if library.seccomp_export_bpf(context, exported) != 0:
                raise OSError("libseccomp could not compile its filter")
            return os.pread(exported, os.fstat(exported).st_size, 0)
        finally:
            os.close(exported)
    finally:
        library.seccomp_release(context)


def forbid_user_namespaces() -> None:
    """Load the filter on this process (and so on everything it starts). Sets no_new_privs, as any unprivileged
    filter must."""
    instructions = compiled()
    if instructions is None:
        return
    buffer = ctypes.create_string_buffer(instructions, len(instructions))
    program = _Program(len(instructions) // BPF_INSTRUCTION_BYTES, ctypes.addressof(buffer))
    if libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 \
            or libc().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"cannot load the sandbox's seccomp filter: {os.strerror(error)}")

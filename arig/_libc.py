"""libc through ctypes: POSIX semaphores (which CUDA host functions post without Python or the
GIL) and the thread name.  Any thread may call these."""

from __future__ import annotations

import ctypes
from ctypes import c_int, c_uint, c_void_p

__all__ = ["libc", "Timespec", "SEM_POST", "new_semaphore", "sem_post", "sem_trywait", "sem_timedwait", "sem_destroy", "name_thread"]

libc = ctypes.CDLL(None, use_errno=True)
PR_SET_NAME = 15
#: Bytes per semaphore: sem_t is 32 on x86-64 glibc, with room to spare.
SEM_T = 64


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


libc.sem_init.argtypes = (c_void_p, c_int, c_uint)
libc.sem_post.argtypes = (c_void_p,)
libc.sem_trywait.argtypes = (c_void_p,)
libc.sem_timedwait.argtypes = (c_void_p, ctypes.POINTER(Timespec))
libc.sem_destroy.argtypes = (c_void_p,)
sem_post = libc.sem_post
sem_trywait = libc.sem_trywait
sem_timedwait = libc.sem_timedwait
sem_destroy = libc.sem_destroy
#: sem_post's address: the host function ``cuLaunchHostFunc(stream, SEM_POST, sem)`` enqueues.
SEM_POST = ctypes.cast(libc.sem_post, c_void_p).value


def new_semaphore() -> ctypes.Array[ctypes.c_char]:
    """A process-private semaphore at 0 (its buffer's address is the ``sem_t *``)."""
    sem = ctypes.create_string_buffer(SEM_T)
    if libc.sem_init(sem, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "sem_init")
    return sem


def name_thread(name: str) -> None:
    """The OS thread's name (``top -H``, /proc/self/task/*/comm), 15 bytes at most."""
    libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)

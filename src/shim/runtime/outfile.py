"""Opening a job's output file (``slurm-%j.out``, ``-o``/``-e``, srun's ``-o``) where another user
may have planted a name first (security review 3, F-27).

Slurm opens them with ``O_CREAT|O_TRUNC`` (or ``O_APPEND``) and follows links, and so does the shim
in a directory only the user (and root) can write. In a directory that group or others may write
(``/tmp``, sticky or not, a shared project directory), job ids being predictable, anyone can
put a link or a file of her own at the name before the job starts; with the kernel's
``fs.protected_symlinks``/``protected_regular`` off a root job would then write through it. There
the rules of those two settings apply whatever the kernel says: a link is followed only when it is
the user's or the directory owner's (else ``O_NOFOLLOW``: ELOOP, and the launch fails as Slurm's
does when it cannot open the file), and in a sticky one an existing regular file that belongs to
neither is not written, nor a hard link (EACCES). The file is truncated only once it is known to
be what may be written (``ftruncate`` after ``fstat``; a device such as /dev/null is never
truncated).

Imports only ``os`` and ``stat``: the job wrapper and the step launchers use it.
"""

from __future__ import annotations

import errno
import os
import stat


def _shared_dir(path: str) -> os.stat_result | None:
    """The stat of the directory ``path`` is made in, when group or others may write it."""
    try:
        st = os.stat(os.path.dirname(path) or ".")
    except OSError:
        return None
    return st if st.st_mode & 0o022 else None


def open_output(path: str, append: bool, mode: int = 0o644) -> int:
    """A descriptor for writing ``path`` as Slurm opens an output file (created with ``mode`` and
    the umask; truncated unless ``append``), refusing a name someone else planted in a directory
    others may write. OSError as os.open's."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0)
    uid = os.geteuid()
    d = _shared_dir(path)
    if d is not None:
        try:
            st = os.lstat(path)
        except OSError:
            st = None
        if st is None or not stat.S_ISLNK(st.st_mode) or st.st_uid not in (uid, d.st_uid):
            flags |= os.O_NOFOLLOW
    fd = os.open(path, flags, mode)
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            if d is not None and d.st_mode & stat.S_ISVTX and (st.st_uid not in (uid, d.st_uid) or st.st_nlink > 1):
                raise OSError(errno.EACCES, f"{os.strerror(errno.EACCES)}: another user's file (or a hard link) in "
                              "a shared directory", path)
            if not append:
                os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd

"""shim.slurm.users: the one reader of a user named by a name or a uid, and of the calling user (squeue,
scancel, sprio and sacct keep their own list grammars and messages: their tests pin those)."""

from __future__ import annotations

import os
import pwd

from shim.slurm import users


def test_a_user_is_named_by_name_or_uid():
    root = pwd.getpwuid(0).pw_name
    assert users.name_of("0") == root and users.name_of(root) == root
    assert users.name_of("nosuchuser_xyz") is None and users.name_of("") is None
    assert users.name_of("²") is None  # a digit Python's int() refuses: no user, not a traceback


def test_the_calling_user_is_the_uid_in_digits_without_a_passwd_entry(monkeypatch):
    assert users.current() == users.own_name() == pwd.getpwuid(os.getuid()).pw_name
    monkeypatch.setattr(os, "getuid", lambda: 4294967200)
    assert users.own_name() is None and users.current() == "4294967200"

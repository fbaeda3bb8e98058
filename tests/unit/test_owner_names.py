"""F-25 (security review 3): a user name is a name first, as Slurm's uid_from_string reads one
(src/common/uid.c: getpwnam, then digits as a uid only when no user has that name). A user
named "4000" is not uid 4000, whose directory would then speak for her jobs. (The live replay,
with real users, is tests/security/test_owner_and_bounds.py.)"""

from __future__ import annotations

import pwd

import pytest

from shim.store import state
from shim.slurm import users


class _Pw:
    def __init__(self, name: str, uid: int):
        self.pw_name, self.pw_uid, self.pw_gid = name, uid, uid


PASSWD = {"4000": 1005, "carol": 4000, "dave": 1007}  # a user named "4000" and one whose uid is 4000


@pytest.fixture(autouse=True)
def passwd(monkeypatch):
    def getpwnam(name):
        if name in PASSWD:
            return _Pw(name, PASSWD[name])
        raise KeyError(name)

    def getpwuid(uid):
        for n, u in PASSWD.items():
            if u == uid:
                return _Pw(n, u)
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwnam", getpwnam)
    monkeypatch.setattr(pwd, "getpwuid", getpwuid)
    monkeypatch.setattr(state, "_uids", {})


def test_a_digits_name_is_that_users_uid_not_the_number():
    assert state.uid_of("4000") == 1005
    assert state.uid_of("carol") == 4000


def test_digits_are_a_uid_only_when_no_user_has_that_name():
    assert state.uid_of("1007") == 1007   # nobody is named "1007": uid 1007 (dave)
    assert state.uid_of("31337") == 31337  # nobody at all: the number, as Slurm's ESLURM_USER_ID_UNKNOWN
    assert state.uid_of("99999999999") is None  # not a uid_t
    assert state.uid_of("nosuch") is None
    assert state.uid_of(12) == 12


def test_the_digits_users_directory_is_her_own(monkeypatch):
    looked: list[tuple[str, int]] = []
    monkeypatch.setattr(state, "_shared_parent", lambda path: True)
    monkeypatch.setattr(state, "_trusted_dir", lambda path, uid: looked.append((path, uid)) or True)
    assert state.user_dir("/st", "4000") == "/st/users/1005"
    assert looked == [("/st/users/1005", 1005)]


def test_squeue_and_sacct_user_words_read_a_name_first():
    assert users.name_of("4000") == "4000"   # the user named 4000, not carol (uid 4000)
    assert users.name_of("1007") == "dave"
    assert users.name_of("carol") == "carol"
    assert users.name_of("31337") is None
    assert users.name_of("nosuch") is None

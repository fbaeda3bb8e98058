"""Users as Slurm's commands name them: a user name or a numeric uid (``-u``), and the calling
user. The one reader of both; each command keeps its own list grammar and its own words for a user
it does not know. (``state.uid_of`` goes the other way: a name to its uid.) Only ``os`` and ``pwd``:
squeue resolves ``-u`` before it starts its qstat."""

from __future__ import annotations

import os


def name_of(word: str) -> str | None:
    """The name of the user ``word`` names: a name first, digits a uid only when no user has that
    name (Slurm's uid_from_string); None when there is none."""
    import pwd

    try:
        return pwd.getpwnam(word).pw_name
    except (KeyError, ValueError):
        pass
    try:
        return pwd.getpwuid(int(word)).pw_name if word.isascii() and word.isdigit() else None
    except (KeyError, ValueError, OverflowError):
        return None


def own_name() -> str | None:
    """The calling user's name; None without a passwd entry."""
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return None


def current() -> str:
    """The calling user's name, or the uid in digits without a passwd entry (``--me``)."""
    name = own_name()
    return str(os.getuid()) if name is None else name

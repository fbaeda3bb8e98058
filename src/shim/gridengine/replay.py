"""A transport that answers from recorded Grid Engine output, for unit tests.

It has every operation of ``engine.GridEngine`` (the argv builders and answer
parsers are the real ones); only ``run`` is replaced. Recordings are ``(tool, args) -> Result``;
every call is also kept in ``calls`` so tests can assert on the exact argv that would have been run.
"""

from __future__ import annotations

import json
import os
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence

from ..proc import Result
from .engine import GridEngine


class ReplayBackend(GridEngine):
    name = "replay"

    def __init__(self, answers: dict[tuple[str, ...], Result] | None = None, default: Result | None = None):
        self.answers = dict(answers or {})
        self.default = default
        self.calls: list[tuple[tuple[str, ...], bytes | str | None]] = []

    @classmethod
    def from_dir(cls, path: str) -> "ReplayBackend":
        """``answers.json``: a list of {"argv": [...], "rc": 0, "stdout": "...", "stderr": "..."};
        an "stdout_file" names a file beside it instead of inline stdout."""
        with open(os.path.join(path, "answers.json"), encoding="utf-8") as f:
            items = json.load(f)
        answers = {}
        for it in items:
            out = it.get("stdout", "")
            if "stdout_file" in it:
                with open(os.path.join(path, it["stdout_file"]), encoding="utf-8") as f:
                    out = f.read()
            answers[tuple(it["argv"])] = Result(tuple(it["argv"]), it.get("rc", 0), out, it.get("stderr", ""))
        return cls(answers)

    def add(self, tool: str, args: Sequence[str], stdout: str = "", rc: int = 0, stderr: str = "") -> None:
        key = (tool, *args)
        self.answers[key] = Result(key, rc, stdout, stderr)

    def argv(self, tool: str, args: Sequence[str]) -> list[str]:
        return [tool, *args]

    def run(self, tool: str, args: Sequence[str], *, input: str | bytes | None = None,
            timeout: float | None = None) -> Result:
        key = (tool, *args)
        self.calls.append((key, input))
        if key in self.answers:
            return self.answers[key]
        for k, r in self.answers.items():  # a recording for the tool alone matches any args
            if k == (tool,):
                return r
        if self.default is not None:
            return self.default
        raise KeyError(f"no recording for {' '.join(key)}")

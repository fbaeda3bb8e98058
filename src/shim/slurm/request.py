"""The job request and the submit record: the contract between the commands that submit (sbatch,
salloc, srun outside an allocation), the translator, the job wrapper and the readers of records.

``JobRequest`` is what the translator (``translate/qsub.build``) makes of the options: the
fields the job wrapper and the readers need, beside the qsub argv. ``SubmitRecord`` is that plus
the facts of one submission (who, when, from where, with which environment); it is what the job
script carries and, with the secrets left out (``public``), the record in the user's ``jobs/``
directory that squeue, sacct and scontrol read.

Both are frozen classes with ``__slots__``, written by hand: ``dataclasses`` costs ~8 ms of every
sbatch's start. A field that a command does not set is absent from the JSON form (salloc's record
has no ``get_user_env``), so a record is key for key what the command wrote before these classes
existed; records carry ``version`` (absent in older records, which have the same layout: version 1).

The readers of a stored record (squeue, sacct, scontrol, srun, the job wrapper) take it typed too,
but not as a SubmitRecord: that file is its writer's free text, so ``records.Submitted`` (a Frozen
too) holds only what passes ``records.SUBMIT_TYPES``' checks, MISSING for the rest.
``SubmitRecord.from_json`` reads the JSON as written, unchecked.
"""

from __future__ import annotations

KILL_WAIT = 30  # Slurm's default KillWait: seconds between SIGTERM and SIGKILL at the time limit
VERSION = 1


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING = _Missing()  # a field this submission does not set: left out of the JSON form


class Frozen:
    """A frozen record with named fields (``FIELDS``, in JSON order)."""

    __slots__ = ()
    FIELDS: tuple = ()

    def __init__(self, **values) -> None:
        set_ = object.__setattr__
        for name in self.FIELDS:
            set_(self, name, values.pop(name, MISSING))
        if values:
            raise TypeError(f"{type(self).__name__}: no field {', '.join(sorted(values))}")

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: use replace({name}=...)")

    __delattr__ = __setattr__

    def replace(self, **changes):
        """A copy with some fields changed."""
        values = {k: getattr(self, k) for k in self.FIELDS}
        values.update(changes)
        return type(self)(**values)

    def get(self, name: str, default=None):
        """The field, or default when it is not set (the readers' dict idiom)."""
        v = getattr(self, name, MISSING)
        return default if v is MISSING else v

    def to_dict(self) -> dict:
        """The set fields, in field order."""
        return {k: v for k in self.FIELDS if (v := getattr(self, k)) is not MISSING}

    @classmethod
    def from_dict(cls, data: dict):
        """Fields by name; keys that are not fields (``t``, which state adds) are left out."""
        return cls(**{k: data[k] for k in cls.FIELDS if k in data})

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and all(getattr(self, k) == getattr(other, k) for k in self.FIELDS)

    __hash__ = None  # type: ignore[assignment]  (the values are lists and dicts)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())})"


# The translator's fields: what the options say the job is (translate/qsub.build).
REQUEST_FIELDS = (
    "name", "partition", "workdir", "submit_dir", "submit_host", "stdout", "stderr", "stdin", "open_mode",
    "ntasks", "ntasks_set", "cpus_per_task", "cpus_per_task_set", "ntasks_per_node", "nodes", "tasks_per_node",
    "mem_mb", "mem_per_cpu_mb", "mem_per_gpu_mb", "default_mem_per_cpu", "gpus", "gpus_per_task", "gpus_opt",
    "gpus_per_node_opt", "distribution", "hint", "time", "kill_wait", "signal", "account", "qos", "comment",
    "dependency", "dep_checks", "array", "throttle", "cluster", "state_dir", "licenses", "gres", "requeue", "nice",
    "begin", "asked", "array_step",
)


class JobRequest(Frozen):
    """What a Slurm job asks for, as the translator read the options (times in minutes, memory in
    MB, ``array`` Slurm's index list, ``asked`` which resources were requested)."""

    __slots__ = REQUEST_FIELDS
    FIELDS = REQUEST_FIELDS


# What only the job may read: the script, its arguments, the environment and --export's values.
PRIVATE = ("script", "args", "environ", "env_file", "env_hash")
# what goes to the job's private file (Grid Engine's spool of the job script is world-readable)
SECRET = ("environ", "export", "export_raw", "export_file", "script", "args")
SUBMIT_FIELDS = (
    "script", "args", "environ", "env_file", "get_user_env", "umask", "user", "uid", "submit_time", "command",
    "sub", "export", "export_raw", "export_file", "interactive", "version", "ar", "env_hash", "submit_line",
)


class SubmitRecord(Frozen):
    """A JobRequest and the facts of its submission: ``script`` (base64), ``args``, ``environ``
    (or ``env_file``, the private file that holds it), ``export`` ({"all": bool, "vars": {...}}),
    ``export_raw`` (--export's text), ``export_file`` (--export-file's variables), who submitted
    (``user``, ``uid``, ``umask``), when (``submit_time``; ``sub`` ties the job's records to this
    Grid Engine job), ``command`` and ``interactive`` (salloc, srun), and ``ar``: the advance
    reservation it was submitted into (``-ar``'s id, "" for none; submit.reservation_flags).
    ``submit_line``: the command line as Slurm keeps it (``submit_line``)."""

    __slots__ = REQUEST_FIELDS + SUBMIT_FIELDS
    FIELDS = REQUEST_FIELDS + SUBMIT_FIELDS

    @classmethod
    def of(cls, request: JobRequest, **facts) -> "SubmitRecord":
        return cls(**request.to_dict(), version=VERSION, **facts)

    @property
    def request(self) -> JobRequest:
        return JobRequest(**{k: getattr(self, k) for k in REQUEST_FIELDS})

    def public(self) -> "SubmitRecord":
        """The record other users may read (squeue, sacct): no script, arguments or environment,
        and of --export and --export-file only the variable names."""
        changes: dict = {k: MISSING for k in PRIVATE}
        if self.export is not MISSING:
            mode = self.export or {}
            changes["export"] = {"all": bool(mode.get("all", True)), "vars": sorted(mode.get("vars") or {})}
        if self.export_raw is not MISSING:
            changes["export_raw"] = names_only(self.export_raw)
        if self.export_file is not MISSING:
            ef = self.export_file
            changes["export_file"] = sorted(ef) if isinstance(ef, dict) else None
        return self.replace(**changes)

    def secrets(self) -> dict:
        """What the job's private file holds: the environment, --export's values, the script and
        its arguments."""
        return {k: self.get(k) for k in SECRET}

    def without_secrets(self, env_file: str, env_hash: str | None = None) -> "SubmitRecord":
        """The form the job script carries when the secrets are in ``env_file`` (whose bytes have
        the SHA-256 ``env_hash``): no script, arguments, environment or --export values."""
        mode = self.export or {}
        return self.replace(environ=MISSING, env_file=env_file, script=MISSING, args=MISSING,
                            env_hash=MISSING if env_hash is None else env_hash,
                            export={"all": bool(mode.get("all", True)), "vars": {}},
                            export_raw=names_only(self.export_raw),
                            export_file=None if self.export_file is not MISSING else MISSING)

    def to_json(self) -> str:
        import json

        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> "SubmitRecord":
        import json

        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("a submit record is a JSON object")
        data.setdefault("version", 1)
        return cls.from_dict(data)


def names_only(raw: str | None) -> str | None:
    """--export's text with the values left out: "ALL,TOKEN=x,HOME" -> "ALL,TOKEN,HOME"."""
    if raw is None or raw is MISSING:
        return raw
    return ",".join(item.partition("=")[0] for item in raw.split(","))


def submit_line(prog: str, argv: list[str], script_args: int = 0) -> str:
    """The job's SubmitLine (scontrol show job on 26.05, sacct's SubmitLine, the JSON's
    submit_line): the command's name and its arguments joined by single spaces, unquoted, as Slurm
    joins its argv (``sbatch --parsable -J failer --wrap``). Unlike Slurm, the record that holds
    the line is one other users may read, and what the shim keeps private stays out of it (README,
    Security model): the values of --export (and its abbreviations) as ``names_only`` leaves them,
    --wrap's text (the batch script) and the script's arguments (the last ``script_args`` words).
    The name is the command's own (Slurm prints its argv[0], ``sbatch`` when typed as such)."""
    words = list(argv[:len(argv) - script_args] if script_args > 0 else argv)
    out = [prog]
    export_next = wrap_next = False
    for word in words:
        if export_next:
            out.append(names_only(word))
            export_next = False
            continue
        if wrap_next:  # (--wrap TEXT: the text is the script)
            wrap_next = False
            continue
        if word.startswith("--") and len(word) > 3:
            name, eq, value = word[2:].partition("=")
            if len(name) >= 3 and "export".startswith(name):  # --exp, ... --export (not --export-file)
                if eq:
                    word = f"--{name}={names_only(value)}"
                else:
                    export_next = True
            elif len(name) >= 2 and "wrap".startswith(name):  # --wr, --wra, --wrap: getopt_long's prefixes
                word, wrap_next = f"--{name}", not eq
        out.append(word)
    return " ".join(out)

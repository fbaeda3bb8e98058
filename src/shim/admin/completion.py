"""Bash and zsh completion for every command, generated from the commands' own option tables.

Like Slurm's ``slurm_completion.sh``, one script completes all the commands: their options (the
option table of sbatch/srun/salloc, the other commands' option rows), and their values where they
are known: partitions (the site config, through ``slurm-shim completion partitions``: no Grid
Engine call), the user's job ids (one ``squeue --me -h -o %i``), ``--format``/``-O`` field names,
job states (``squeue -t``, ``sacct -s``), node states (``sinfo -t``), mail types, dependency
kinds and the job ids after them, signals, users, files and directories. ``slurm-shim`` itself completes through click.

``bash()`` is the script. The installed copy (``completion/``, shipped as
``share/bash-completion/completions/<command>``, where bash-completion looks beside a command's
``bin/``) is this output, checked by tests/unit/test_package.py::test_shipped_completion_is_current.
zsh's are ``_<command>`` functions (``zsh_files()``: an ``_arguments`` call per command from the same
rows, one helper for the values), shipped from ``completion/_*`` as ``share/zsh/site-functions``;
``zsh()`` is them as one script. Regenerate: ``PYTHONPATH=src python -m shim.admin.completion write``.

Not on any hot path: the Slurm commands never import this module.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

COMMANDS = ("sbatch", "srun", "salloc", "squeue", "scancel", "scontrol", "sacct", "sinfo", "sprio", "sshare",
            "sacctmgr", "sreport")
PLUS_MODE = ("sbatch", "srun", "salloc")  # options end at the script or command (getopt's '+')

# scontrol's subcommands and what follows them (cli/scontrol.py run_command and show)
SCONTROL_COMMANDS = ("help", "hold", "ping", "release", "requeue", "requeuehold", "resume", "show", "suspend",
                     "uhold", "update", "version")
SCONTROL_JOB_COMMANDS = ("hold", "release", "requeue", "requeuehold", "resume", "suspend", "uhold")
SCONTROL_SHOW = ("config", "daemons", "hostlist", "hostlistsorted", "hostnames", "job", "licenses", "node",
                 "partition", "step")
SIGNALS = ("HUP", "INT", "QUIT", "KILL", "USR1", "USR2", "TERM", "CONT", "STOP", "TSTP")
# the policy commands' words (cli/sacctmgr.py ENTITIES, cli/sreport.py's reports)
SACCTMGR_VERBS = ("show", "list")
SACCTMGR_ENTITIES = ("account", "association", "qos", "user")
SREPORT_GROUPS = ("cluster", "user")
SREPORT_CLUSTER = ("AccountUtilizationByUser", "UserUtilizationByAccount")
SREPORT_USER = ("TopUsage",)


def partitions() -> list[str]:
    """The site config's partition names, the default first (what ``-p`` completes to)."""
    from .. import siteconf

    cfg = siteconf.get()
    names = list(cfg.partitions)
    default = next((n for n, p in cfg.partitions.items() if p.get("default")), None)
    return ([default] if default else []) + [n for n in names if n != default]


def _specs(cmd: str) -> list:
    if cmd in PLUS_MODE:
        from ..slurm.options.table import every_table  # (every release's options: the files are built once)

        return list(every_table(cmd).specs)
    return list(importlib.import_module(f"shim.cli.{cmd}").OPTIONS)


def _choices() -> dict[str, tuple[str, ...]]:
    """Fixed value lists, named for the bash variable that holds each."""
    from ..slurm.model import SLURM_STATES, state_list
    from ..slurm.options import values
    from ..slurm.render import sacct as sacct_view
    from ..slurm.render import sinfo as sinfo_view
    from ..slurm.render import squeue as squeue_view

    def fields(registry) -> tuple[str, ...]:
        names: list[str] = []
        for f in registry.fields:
            for n in (f.name, *f.aliases):
                if n and n not in names:
                    names.append(n)
        return tuple(names)

    sacct_states = tuple(s.long for s in SLURM_STATES)  # sacct -s takes every state squeue -t does
    return {
        "squeue_states": (*state_list().split(","), "all"),
        "sacct_states": sacct_states,
        "sinfo_states": tuple(sorted({name for pair in sinfo_view.STATE_NAMES.values() for name in pair})),
        "squeue_fields": fields(squeue_view.REGISTRY),
        "sacct_fields": tuple(sacct_view.FIELD_NAMES),
        "sinfo_fields": fields(sinfo_view.REGISTRY),
        "mail_types": ("NONE", "ALL", *values.MAIL_TYPES),
        "dependency": (*(k + ":" for k in values.DEPENDENCY_KINDS), "singleton"),
        "open_mode": ("append", "truncate"),
        "export": ("ALL", "NONE"),
        "signals": SIGNALS,
    }


def _value_kind(cmd: str, key: str) -> str | None:
    """What the value of option ``key`` (the spec's request key) of ``cmd`` completes to, for
    either shell: partitions, jobs, users, groups, dirs, files, or ``list:<name>`` (a _choices list)."""
    if key in ("partition", "partitions"):
        return "partitions"
    if key in ("jobs", "jobid") or (cmd == "squeue" and key == "steps"):
        return "jobs"
    if key in ("user", "users", "uid"):
        return "users"
    if key in ("group", "gid"):
        return "groups"
    if key == "chdir":
        return "dirs"
    if key in ("output", "error", "input", "export_file", "nodefile", "file"):
        return "files"
    lists = {
        ("squeue", "states"): "squeue_states", ("scancel", "states"): "squeue_states",
        ("sacct", "state"): "sacct_states", ("sinfo", "states"): "sinfo_states",
        ("squeue", "format_long"): "squeue_fields", ("sacct", "format"): "sacct_fields",
        ("sinfo", "format_long"): "sinfo_fields", ("scancel", "signal"): "signals",
    }
    if (cmd, key) in lists:
        return f"list:{lists[cmd, key]}"
    if cmd in PLUS_MODE:
        words = {"mail_type": "mail_types", "dependency": "dependency", "open_mode": "open_mode",
                 "export": "export", "signal": "signals"}
        if key in words:
            return f"list:{words[key]}"
    return None


def _policy_words() -> dict[str, tuple[str, ...]]:
    """The words after the policy commands' options, named for the variable that holds each."""
    return {"sacctmgr_verbs": SACCTMGR_VERBS, "sacctmgr_entities": SACCTMGR_ENTITIES,
            "sreport_groups": SREPORT_GROUPS, "sreport_cluster": SREPORT_CLUSTER, "sreport_user": SREPORT_USER}


def _kind(cmd: str, key: str) -> str | None:
    """The bash function call that completes the value of option ``key`` of ``cmd``."""
    kind = _value_kind(cmd, key)
    if kind is None:
        return None
    if kind.startswith("list:"):
        return f"_slurm_shim_list \"$_slurm_shim_{kind[5:]}\""
    return f"_slurm_shim_{kind}"


def _command_block(cmd: str) -> list[str]:
    from ..slurm.options.spec import Arity

    specs = _specs(cmd)
    words: list[str] = []
    takes: list[str] = []
    cases: dict[str, list[str]] = {}
    for s in specs:
        spelled = ([f"--{s.long}"] if s.long else []) + ([f"-{s.short}"] if s.short else [])
        words += spelled
        kind = _kind(cmd, s.key)
        if s.arity is Arity.REQUIRED or (s.arity is Arity.OPTIONAL and kind is not None):
            takes += spelled
        if kind is not None and s.arity is not Arity.NONE:
            cases.setdefault(kind, []).extend(spelled)
    words = list(dict.fromkeys(words))  # one word for two rows (sprio -M: --cluster and --clusters)
    longs = sorted(w for w in words if w.startswith("--"))
    shorts = sorted((w for w in words if not w.startswith("--")), key=lambda w: (w.lower(), w))
    out = [f"_slurm_shim_{cmd}_opts='{' '.join(longs + shorts)}'",
           f"_slurm_shim_{cmd}_takes=' {' '.join(sorted(set(takes)))} '",
           f"_slurm_shim_{cmd}_value() {{  # $1: an option of {cmd}; completes its value",
           "    case $1 in"]
    for kind, spelled in sorted(cases.items(), key=lambda kv: sorted(kv[1])[0]):
        out.append(f"        {'|'.join(sorted(set(spelled)))}) {kind} ;;")
    out += ["        *) return 1 ;;", "    esac", "}"]
    return out


HEAD = """\
# bash completion for slurm-shim: sbatch srun salloc squeue scancel scontrol sacct sinfo sprio sshare
# sacctmgr sreport slurm-shim
# Generated by `slurm-shim completion bash` (src/shim/completion.py) from the commands' option
# tables: do not edit. Load it with `source <(slurm-shim completion bash)`, or let bash-completion
# find it in <prefix>/share/bash-completion/completions beside <prefix>/bin.
"""

FUNCTIONS = r"""
# the program beside the command being completed (the same installation), else the one on PATH
_slurm_shim_tool() {
    local exe
    exe=$(type -P -- "$_slurm_shim_cmd" 2>/dev/null)
    if [[ -n $exe && -x ${exe%/*}/$1 ]]; then
        printf '%s\n' "${exe%/*}/$1"
    else
        printf '%s\n' "$1"
    fi
}

_slurm_shim_long() {  # $1: an option as typed, $2: the command's options; a unique prefix -> the option
    local w found= n=0
    if [[ $1 == --?* && " $2 " != *" $1 "* ]]; then
        for w in $2; do
            [[ $w == "$1"* ]] && found=$w && ((n++))
        done
        ((n == 1)) && printf '%s\n' "$found" && return 0
    fi
    printf '%s\n' "$1"
}

# The candidates are matched here, not by compgen -W, which would expand them ($(...), globs): a
# partition name or a program's output is only ever compared and copied.
_slurm_shim_match() {  # $1: words, $2: prefix to keep, $3: what was typed of the word
    local IFS=$' \t\n' w
    local -a all=()
    read -r -d '' -a all <<<"$1"
    COMPREPLY=()
    for w in "${all[@]}"; do
        [[ $w == "$3"* ]] && COMPREPLY+=("$2$w")
    done
    return 0
}

_slurm_shim_words() {  # $1: words; completes the current word from them
    _slurm_shim_match "$1" "" "$_slurm_shim_cur"
}

_slurm_shim_list() {  # $1: words; completes the last item of a comma separated list
    local head= last=$_slurm_shim_cur
    if [[ $last == *,* ]]; then
        head=${last%,*},
        last=${last##*,}
    fi
    _slurm_shim_match "$1" "$head" "$last"
    [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *: ]] && compopt -o nospace 2>/dev/null
    return 0
}

_slurm_shim_partitions() {
    _slurm_shim_list "$("$(_slurm_shim_tool slurm-shim)" completion partitions 2>/dev/null)"
}

_slurm_shim_jobs() {  # the user's own jobs: one squeue call
    _slurm_shim_list "$("$(_slurm_shim_tool squeue)" --me -h -o %i 2>/dev/null)"
}

_slurm_shim_users() {
    mapfile -t COMPREPLY < <(compgen -u -- "$_slurm_shim_cur")
}

_slurm_shim_groups() {
    mapfile -t COMPREPLY < <(compgen -g -- "$_slurm_shim_cur")
}

_slurm_shim_files() {
    compopt -o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen -f -- "$_slurm_shim_cur")
}

_slurm_shim_dirs() {
    compopt -o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen -d -- "$_slurm_shim_cur")
}

_slurm_shim_commands() {
    compopt -o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen -c -- "$_slurm_shim_cur")
}

# the words after the options: $1 = how many came before the current one, the rest are they
_slurm_shim_positional() {
    local n=$1
    shift
    case $_slurm_shim_name in
        sbatch) _slurm_shim_files ;;
        srun | salloc) if ((n == 0)); then _slurm_shim_commands; else _slurm_shim_files; fi ;;
        scancel | sprio) _slurm_shim_jobs ;;
        sacctmgr)
            if ((n == 0)); then
                _slurm_shim_words "$_slurm_shim_sacctmgr_verbs"
            elif ((n == 1)); then
                _slurm_shim_words "$_slurm_shim_sacctmgr_entities"
            fi
            ;;
        sreport)
            if ((n == 0)); then
                _slurm_shim_words "$_slurm_shim_sreport_groups"
            elif ((n == 1)) && [[ $1 == cluster ]]; then
                _slurm_shim_words "$_slurm_shim_sreport_cluster"
            elif ((n == 1)) && [[ $1 == user ]]; then
                _slurm_shim_words "$_slurm_shim_sreport_user"
            fi
            ;;
        scontrol)
            if ((n == 0)); then
                _slurm_shim_words "$_slurm_shim_scontrol_commands"
            elif [[ $1 == show ]]; then
                if ((n == 1)); then
                    _slurm_shim_words "$_slurm_shim_scontrol_show"
                elif [[ $2 == job* || $2 == step* ]]; then
                    _slurm_shim_jobs
                elif [[ $2 == part* ]]; then
                    _slurm_shim_partitions
                fi
            elif [[ " $_slurm_shim_scontrol_job_commands " == *" $1 "* ]]; then
                _slurm_shim_jobs
            elif [[ $1 == update ]]; then
                if [[ -n $_slurm_shim_key ]]; then  # JobId=<TAB>: '=' is a word break
                    [[ ${_slurm_shim_key,,} == jobid ]] && _slurm_shim_jobs
                elif [[ $_slurm_shim_cur == [Jj]ob[Ii]d=* ]]; then  # '=' is no word break
                    local head=${_slurm_shim_cur%%=*}=
                    _slurm_shim_cur=${_slurm_shim_cur#*=}
                    _slurm_shim_jobs
                    COMPREPLY=("${COMPREPLY[@]/#/$head}")
                else
                    compopt -o nospace 2>/dev/null
                    _slurm_shim_words "JobId="
                fi
            fi
            ;;
    esac
    return 0
}

_slurm_shim_complete() {
    local _slurm_shim_cmd=$1 _slurm_shim_name=${1##*/}
    local _slurm_shim_cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} opt=
    local opts takes
    COMPREPLY=()
    opts=_slurm_shim_${_slurm_shim_name}_opts takes=_slurm_shim_${_slurm_shim_name}_takes
    [[ -n ${!opts+set} ]] || return 0
    # the value of an option: --opt=value (split at '=' by COMP_WORDBREAKS), --opt value, -o value
    if [[ $_slurm_shim_cur == = && $prev == -* ]]; then
        opt=$prev _slurm_shim_cur=
    elif [[ $prev == = ]] && ((COMP_CWORD >= 2)) && [[ ${COMP_WORDS[COMP_CWORD - 2]} == -* ]]; then
        opt=${COMP_WORDS[COMP_CWORD - 2]}
    elif [[ $_slurm_shim_cur == --*=* ]]; then  # '=' not a word break
        opt=${_slurm_shim_cur%%=*} _slurm_shim_cur=${_slurm_shim_cur#*=}
    elif [[ ${!takes} == *" $(_slurm_shim_long "$prev" "${!opts}") "* ]]; then
        opt=$prev
    fi
    if [[ -n $opt ]]; then
        "_slurm_shim_${_slurm_shim_name}_value" "$(_slurm_shim_long "$opt" "${!opts}")"
        return 0
    fi
    # --dependency=afterok:<TAB>: ':' is a word break too; the job ids of the user follow it
    if [[ -n ${!takes} && ( $_slurm_shim_cur == : || $prev == : ) ]]; then
        local j=$((COMP_CWORD - 1)) dep=
        [[ $_slurm_shim_cur == : ]] || ((j--))
        while ((j > 1)) && [[ ${COMP_WORDS[j]} != -* && ${COMP_WORDS[j]} =~ ^[[:alnum:]_,+?:=]*$ ]]; do ((j--)); done
        [[ ${COMP_WORDS[j]} == -d || $(_slurm_shim_long "${COMP_WORDS[j]}" "${!opts}") == --dependency ]] && dep=1
        if [[ -n $dep && " $_slurm_shim_plus " == *" $_slurm_shim_name "* ]]; then
            [[ $_slurm_shim_cur == : ]] && _slurm_shim_cur=
            _slurm_shim_jobs
            return 0
        fi
    fi
    # key=value words (scontrol update JobId=...): bash splits them at '=' too
    local _slurm_shim_key= end=$COMP_CWORD
    if [[ $_slurm_shim_cur == = ]] && ((COMP_CWORD >= 2)); then
        _slurm_shim_key=$prev _slurm_shim_cur= end=$((COMP_CWORD - 1))
    elif [[ $prev == = ]] && ((COMP_CWORD >= 3)); then
        _slurm_shim_key=${COMP_WORDS[COMP_CWORD - 2]} end=$((COMP_CWORD - 2))
    fi
    # the words before this one: options (with their values) up to the first other word
    local i=1 w plus= pos=()
    [[ " $_slurm_shim_plus " == *" $_slurm_shim_name "* ]] && plus=1
    while ((i < end)); do
        w=${COMP_WORDS[i]}
        if [[ $w == -* && ${COMP_WORDS[i + 1]} == = ]] && ((i + 2 < end)); then
            ((i += 3))
        elif [[ $w == -- ]]; then
            ((i++))
            plus=1 pos=("${COMP_WORDS[@]:i:end-i}")
            break
        elif [[ $w == -?* ]]; then
            if [[ ${!takes} == *" $(_slurm_shim_long "$w" "${!opts}") "* ]]; then ((i += 2)); else ((i++)); fi
        elif [[ -n $plus ]]; then
            pos=("${COMP_WORDS[@]:i:end-i}")
            break
        else
            pos+=("$w")
            ((i++))
        fi
    done
    if [[ $_slurm_shim_cur == -* ]] && ! [[ -n $plus && ${#pos[@]} -gt 0 ]]; then
        _slurm_shim_words "${!opts}"
        return 0
    fi
    _slurm_shim_positional "${#pos[@]}" "${pos[@]}"
}
"""


def bash() -> str:
    """The whole completion script."""
    lines = [HEAD]
    lines.append(f"_slurm_shim_plus='{' '.join(PLUS_MODE)}'")
    for name, words in _choices().items():
        lines.append(f"_slurm_shim_{name}='{' '.join(words)}'")
    lines.append(f"_slurm_shim_scontrol_commands='{' '.join(SCONTROL_COMMANDS)}'")
    lines.append(f"_slurm_shim_scontrol_job_commands='{' '.join(SCONTROL_JOB_COMMANDS)}'")
    lines.append(f"_slurm_shim_scontrol_show='{' '.join(SCONTROL_SHOW)}'")
    for name, words in _policy_words().items():
        lines.append(f"_slurm_shim_{name}='{' '.join(words)}'")
    for cmd in COMMANDS:
        lines.append("")
        lines += _command_block(cmd)
    lines.append(FUNCTIONS)
    lines.append(f"complete -F _slurm_shim_complete {' '.join(COMMANDS)}")
    lines.append(ADMIN)
    return "\n".join(lines) + "\n"


# slurm-shim's own words come from click (its completion protocol: "type,value" lines), so this file
# does not change with click's version
ADMIN = r"""
_slurm_shim_admin() {
    local line type value
    COMPREPLY=()
    while IFS= read -r line; do
        type=${line%%,*} value=${line#*,}
        case $type in
            plain) COMPREPLY+=("$value") ;;
            dir) compopt -o dirnames 2>/dev/null ;;
            file) compopt -o default 2>/dev/null ;;
        esac
    done < <(COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD=$COMP_CWORD _SLURM_SHIM_COMPLETE=bash_complete "$1" 2>/dev/null)
    return 0
}
complete -o nosort -F _slurm_shim_admin slurm-shim"""


# --- zsh ------------------------------------------------------------------------------------------
# One file per command, ``_<cmd>`` (``#compdef <cmd>``: an _arguments call generated from the same
# option rows as bash's), and ``_slurm_shim_values`` (``#autoload``), which completes the values the
# shell cannot know: partitions, the user's job ids, the fixed lists, the words after the options.
# Shipped as <prefix>/share/zsh/site-functions/_<cmd>; ``slurm-shim completion zsh`` prints them as
# one script for ``source <(slurm-shim completion zsh)``. Candidates are only ever given to compadd as
# words (quoted on insertion), never evaluated.

ZSH_HELPER = "_slurm_shim_values"
ZSH_HEAD = "# generated by src/shim/completion.py from the commands' option tables: do not edit"


def _zq(text: str) -> str:
    """One zsh single-quoted word."""
    return "'" + text.replace("'", "'\\''") + "'"


def _zsh_action(kind: str | None) -> tuple[str, str]:
    """(message, action) of an _arguments value spec."""
    if kind is None:
        return "value", ""
    if kind.startswith("list:"):
        name = kind[5:]
        if name == "dependency":
            return "dependency", f"{ZSH_HELPER} dependency"
        return name.replace("_", " ").rstrip("s"), f"{ZSH_HELPER} list.{name}"  # (a ':' would end the action)
    return {"partitions": ("partition", f"{ZSH_HELPER} partitions"), "jobs": ("job id", f"{ZSH_HELPER} jobs"),
            "users": ("user", "_sequence _users"), "groups": ("group", "_sequence _groups"), "dirs": ("directory", "_directories"),
            "files": ("file", "_files")}[kind]


def _zsh_option_specs(cmd: str) -> list[str]:
    """The _arguments specs of every option of ``cmd``: --long=, -s+ (a value in the same word or the
    next), --long=-/-s- with :: (an optional value: the same word only), as getopt_long takes them."""
    from ..slurm.options.spec import Arity

    seen: set[str] = set()
    out: list[str] = []
    for s in _specs(cmd):
        spelled = [(form, word) for form, word in (("long", f"--{s.long}" if s.long else ""),
                                                    ("short", f"-{s.short}" if s.short else ""))
                   if word and word not in seen]
        if not spelled:
            continue
        seen.update(word for _form, word in spelled)
        help_text = s.help.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
        descr = f"[{help_text}]" if help_text else ""
        excl = f"({' '.join(w for _f, w in spelled)})" if len(spelled) > 1 and not s.count else ""
        star = "*" if s.count else ""
        message, action = _zsh_action(_value_kind(cmd, s.key)) if s.arity is not Arity.NONE else ("", "")
        for form, word in spelled:
            if s.arity is Arity.NONE:
                tail = ""
            elif s.arity is Arity.REQUIRED:
                tail = ("=" if form == "long" else "+") + f"{descr}:{message}:{action}"
                out.append(_zq(f"{excl}{star}{word}{tail}"))
                continue
            else:
                tail = ("=-" if form == "long" else "-") + f"{descr}::{message}:{action}"
                out.append(_zq(f"{excl}{star}{word}{tail}"))
                continue
            out.append(_zq(f"{excl}{star}{word}{descr}"))
    return out


ZSH_POSITIONAL = {
    "sbatch": ["'1:script:_files'", "'*:script argument:_files'"],
    "srun": ["'1:command:_command_names -e'", "'*::command argument:_normal'"],
    "salloc": ["'1:command:_command_names -e'", "'*::command argument:_normal'"],
    "scancel": [f"'*:job id:{ZSH_HELPER} jobs'"],
    "sprio": [f"'*:job id:{ZSH_HELPER} jobs'"],
    "scontrol": [f"'*::scontrol command:{ZSH_HELPER} scontrol'"],
    "sacctmgr": [f"'1:command:({' '.join(SACCTMGR_VERBS)})'", f"'2:entity:({' '.join(SACCTMGR_ENTITIES)})'"],
    "sreport": [f"'*::report:{ZSH_HELPER} sreport'"],
}


def zsh_function(cmd: str) -> str:
    """The file ``_<cmd>``: its first line is compinit's tag, the rest the function's body."""
    flags = "-s -S -A '-*'" if cmd in PLUS_MODE else "-s -S"
    specs = _zsh_option_specs(cmd) + ZSH_POSITIONAL.get(cmd, [])
    body = f"_arguments {flags} : \\\n" + " \\\n".join(f"    {spec}" for spec in specs) + "\n"
    return f"#compdef {cmd}\n# zsh completion for {cmd}, {ZSH_HEAD[2:]}\n{body}"


def _zsh_words(name: str, words: tuple[str, ...]) -> str:
    return f"        {name}) vals=({' '.join(_zq(w) for w in words)}) ;;"


def zsh_helper() -> str:
    """The file ``_slurm_shim_values``: compadd's options, then the kind of value (partitions, jobs,
    list.NAME, dependency, scontrol, sreport)."""
    lists = "\n".join(_zsh_words(name, words) for name, words in _choices().items() if name != "dependency")
    kinds = " ".join(_zq(k) for k in _choices()["dependency"] if k.endswith(":"))
    return ZSH_HELPER_TEXT.format(
        head=ZSH_HEAD[2:], helper=ZSH_HELPER, lists=lists, kinds=kinds, commands=" ".join(SCONTROL_COMMANDS),
        show=" ".join(SCONTROL_SHOW), job_commands=" ".join(SCONTROL_JOB_COMMANDS),
        groups=" ".join(SREPORT_GROUPS), cluster=" ".join(SREPORT_CLUSTER), user=" ".join(SREPORT_USER))


ZSH_HELPER_TEXT = r"""#autoload
# the values of slurm-shim's commands' options and words, {head}
# $@: _arguments' compadd options (group, explanation), then the kind of value: partitions, jobs,
# list.NAME, dependency, scontrol, sreport
local kind=${{@[-1]}} exe=${{commands[$service]-}} dir= tool
local -a vals copts=("${{@[1,-2]}}")
[[ $exe == /* ]] && dir=${{exe:h}}  # the programs beside the command being completed, else PATH's
case $kind in
    partitions | jobs)
        compset -P '*[,:]'
        if [[ $kind == partitions ]]; then
            tool=slurm-shim
            [[ -n $dir && -x $dir/slurm-shim ]] && tool=$dir/slurm-shim
            vals=(${{(f)"$("$tool" completion partitions 2>/dev/null)"}})
        else
            tool=squeue
            [[ -n $dir && -x $dir/squeue ]] && tool=$dir/squeue
            vals=(${{(f)"$("$tool" --me -h -o %i 2>/dev/null)"}})
        fi
        compadd "${{copts[@]}}" -a vals
        ;;
    list.*)
        case ${{kind#list.}} in
{lists}
        esac
        compset -P '*,'
        compadd "${{copts[@]}}" -a vals
        ;;
    dependency)  # afterok:<job>[:<job>...][,|?...]; singleton
        compset -P '*[,?]'
        if compset -P '*:'; then
            {helper} "${{copts[@]}}" jobs
        else
            vals=({kinds})
            compadd "${{copts[@]}}" -S '' -a vals
            compadd "${{copts[@]}}" singleton
        fi
        ;;
    scontrol)  # the words after scontrol's options (words and CURRENT count only those)
        if ((CURRENT == 1)); then
            compadd "${{copts[@]}}" {commands}
        elif [[ $words[1] == show ]]; then
            if ((CURRENT == 2)); then
                compadd "${{copts[@]}}" {show}
            elif [[ $words[2] == (job|step)* ]]; then
                {helper} "${{copts[@]}}" jobs
            elif [[ $words[2] == part* ]]; then
                {helper} "${{copts[@]}}" partitions
            fi
        elif [[ " {job_commands} " == *" $words[1] "* ]]; then
            {helper} "${{copts[@]}}" jobs
        elif [[ $words[1] == update ]]; then
            if compset -P '(#i)jobid='; then
                {helper} "${{copts[@]}}" jobs
            else
                compadd "${{copts[@]}}" -S '' JobId=
            fi
        fi
        ;;
    sreport)
        if ((CURRENT == 1)); then
            compadd "${{copts[@]}}" {groups}
        elif ((CURRENT == 2)) && [[ $words[1] == cluster ]]; then
            compadd "${{copts[@]}}" {cluster}
        elif ((CURRENT == 2)) && [[ $words[1] == user ]]; then
            compadd "${{copts[@]}}" {user}
        fi
        ;;
esac
"""

# slurm-shim's own words come from click (its zsh protocol: type, value, help lines)
ZSH_ADMIN = r"""#compdef slurm-shim
# zsh completion for slurm-shim, through click's completion protocol (type, value and help lines)
local -a lines plain
local i
lines=("${(@f)$(COMP_WORDS="${words[*]}" COMP_CWORD=$((CURRENT - 1)) _SLURM_SHIM_COMPLETE=zsh_complete "$words[1]" 2>/dev/null)}")
for ((i = 1; i + 1 <= $#lines; i += 3)); do
    case $lines[i] in
        plain) plain+=("${lines[i + 1]//\:/:}") ;;
        dir) _path_files -/ ;;
        file) _path_files -f ;;
    esac
done
(($#plain)) && compadd -a plain
return 0
"""


def zsh_files() -> dict[str, str]:
    """The zsh completion files: name -> text (shipped as share/zsh/site-functions/<name>)."""
    return {ZSH_HELPER: zsh_helper(), **{f"_{cmd}": zsh_function(cmd) for cmd in COMMANDS}, "_slurm-shim": ZSH_ADMIN}


def zsh() -> str:
    """All of them as one script, for ``source <(slurm-shim completion zsh)`` (runs compinit if the
    shell has not)."""
    out = ["# zsh completion for slurm-shim: " + " ".join(COMMANDS) + " slurm-shim",
           ZSH_HEAD + ". Load it with",
           "# `source <(slurm-shim completion zsh)`, or put <prefix>/share/zsh/site-functions on fpath.",
           "(($+functions[compdef])) || { autoload -Uz compinit && compinit; }"]
    for name, text in zsh_files().items():
        body = text.split("\n", 1)[1]
        out += [f"{name}() {{", body.rstrip("\n"), "}"]
    for cmd in (*COMMANDS, "slurm-shim"):
        out.append(f"compdef _{cmd} {cmd}")
    return "\n".join(out) + "\n"


def stub(cmd: str) -> str:
    """The file bash-completion loads for ``cmd``: it sources the one script beside it."""
    return (f"# bash completion for {cmd}: slurm-shim's one script, beside this file "
            "(generated by src/shim/completion.py)\n"
            '. "${BASH_SOURCE[0]%/*}/slurm-shim"\n')


def files() -> dict[str, str]:
    """The shipped completion files: name -> text (``completion/`` in the source tree): bash's
    (``slurm-shim`` and a stub per command), then zsh's (``_<cmd>`` and ``_slurm_shim_values``)."""
    return {"slurm-shim": bash(), **{cmd: stub(cmd) for cmd in COMMANDS}, **zsh_files()}


def write(directory: Path) -> None:
    directory.mkdir(exist_ok=True)
    for name, text in files().items():
        (directory / name).write_text(text)


if __name__ == "__main__":
    if sys.argv[1:] == ["write"]:
        write(Path(__file__).resolve().parents[3] / "completion")
    else:
        sys.stdout.write(zsh() if sys.argv[1:] == ["zsh"] else bash())

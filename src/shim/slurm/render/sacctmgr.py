"""sacctmgr's output fields: Slurm 22.05's format names, the shortest prefix each accepts, the
header printed and the width (src/sacctmgr/common.c, _get_print_field), and the default field
lists of ``show association|account|user|qos`` (association_functions.c, account_functions.c,
user_functions.c, qos_functions.c). Reads nothing."""

from __future__ import annotations

from .report import Column

# (accepted spelling, shortest prefix), header, width, printer kind ("str", "uint")
_F = tuple[tuple[tuple[str, int], ...], str, int, str]
FIELDS: tuple[_F, ...] = (
    ((("Account", 3), ("Acct", 4)), "Account", 10, "str"),
    ((("AdminLevel", 2),), "Admin", 9, "str"),
    ((("Clusters", 2),), "Cluster", 10, "str"),
    ((("Coordinators", 2),), "Coord Accounts", 20, "str"),
    ((("DefaultAccount", 8),), "Def Acct", 10, "str"),
    ((("DefaultQOS", 8),), "Def QOS", 9, "str"),
    ((("DefaultWCKey", 8),), "Def WCKey", 10, "str"),
    ((("Description", 3),), "Descr", 20, "str"),
    ((("Flags", 2),), "Flags", 20, "str"),
    ((("GraceTime", 3),), "GraceTime", 10, "str"),
    ((("GrpTRES", 7),), "GrpTRES", 13, "str"),
    ((("GrpTRESMins", 7),), "GrpTRESMins", 13, "str"),
    ((("GrpTRESRunMins", 7),), "GrpTRESRunMins", 13, "str"),
    ((("GrpJobs", 4),), "GrpJobs", 7, "uint"),
    ((("GrpSubmitJobs", 4),), "GrpSubmit", 9, "uint"),
    ((("GrpWall", 4),), "GrpWall", 11, "str"),
    ((("ID", 2),), "ID", 6, "uint"),
    ((("LFT", 1),), "LFT", 6, "uint"),
    ((("MaxTRES", 7), ("MaxTRESPerJob", 11)), "MaxTRES", 13, "str"),
    ((("MaxTRESPerNode", 11),), "MaxTRESPerNode", 14, "str"),
    ((("MaxTRESMinsPerJob", 8),), "MaxTRESMins", 13, "str"),
    ((("MaxTRESPerAccount", 11), ("MaxTRESPerAcct", 11), ("MaxTRESPA", 9)), "MaxTRESPA", 13, "str"),
    ((("MaxTRESPerUser", 11), ("MaxTRESPU", 9)), "MaxTRESPU", 13, "str"),
    ((("MaxJobs", 4),), "MaxJobs", 7, "uint"),
    ((("MaxJobsPerAccount", 11), ("MaxJobsPerAcct", 11), ("MaxJobsPA", 9)), "MaxJobsPA", 9, "uint"),
    ((("MaxJobsPerUser", 11), ("MaxJobsPU", 9)), "MaxJobsPU", 9, "uint"),
    ((("MaxSubmitJobs", 4),), "MaxSubmit", 9, "uint"),
    ((("MaxSubmitJobsPerAccount", 17), ("MaxSubmitJobsPerAcct", 17), ("MaxSubmitJobsPA", 15),
      ("MaxSubmitPA", 11)), "MaxSubmitPA", 11, "uint"),
    ((("MaxSubmitJobsPerUser", 10), ("MaxSubmitJobsPU", 10), ("MaxSubmitPU", 6)), "MaxSubmitPU", 11, "uint"),
    ((("MaxWallDurationPerJob", 4),), "MaxWall", 11, "str"),
    ((("MinTRESPerJob", 7),), "MinTRES", 13, "str"),
    ((("Name", 2),), "Name", 10, "str"),
    ((("Organization", 1),), "Org", 20, "str"),
    ((("ParentID", 7),), "ParentID", 8, "uint"),
    ((("ParentName", 7),), "ParentName", 10, "str"),
    ((("Partition", 4),), "Partition", 10, "str"),
    ((("PreemptMode", 8),), "PreemptMode", 11, "str"),
    ((("Preempt", 7),), "Preempt", 10, "str"),
    ((("PreemptExemptTime", 8),), "PreemptExemptTime", 19, "str"),
    ((("Priority", 3),), "Priority", 10, "uint"),
    ((("QOSLevel", 3),), "QOS", 20, "str"),
    ((("RGT", 1),), "RGT", 6, "uint"),
    ((("Share", 1), ("FairShare", 2)), "Share", 9, "uint"),
    ((("UsageFactor", 6),), "UsageFactor", 11, "str"),
    ((("UsageThreshold", 6),), "UsageThres", 10, "str"),
    ((("User", 1),), "User", 10, "str"),
    ((("WCKeys", 2),), "WCKeys", 20, "str"),
)

ASSOC = ("Cluster,Account,User,Part,Share,Priority,GrpJ,GrpTRES,GrpS,GrpWall,GrpTRESMins,MaxJ,MaxTRES,"
         "MaxTRESPerN,MaxS,MaxW,MaxTRESMins,QOS,DefaultQOS,GrpTRESRunMins")
ACCOUNT = "Acc,Des,O"
USER = "U,DefaultA,Ad"
QOS = ("Name,Prio,GraceT,Preempt,PreemptE,PreemptM,Flags%40,UsageThres,UsageFactor,GrpTRES,GrpTRESMins,"
       "GrpTRESRunMins,GrpJ,GrpS,GrpW,MaxTRES,MaxTRESPerN,MaxTRESMins,MaxW,MaxTRESPerUser,MaxJobsPerUser,"
       "MaxSubmitJobsPerUser,MaxTRESPerAcct,MaxJobsPerAcct,MaxSubmitJobsPerAcct,MinTRES")


class FieldError(ValueError):
    pass


def field(item: str) -> Column:
    """One ``name[%width]``: the first field (in Slurm's alphabetical order) whose spelling the
    name is a case-insensitive prefix of, with at least that spelling's shortest length."""
    name, _, width = item.partition("%")
    low = name.lower()
    for spellings, header, n, kind in FIELDS:
        if any(sp.lower().startswith(low) and len(low) >= k for sp, k in spellings):
            w = int(width) if width.lstrip("-").isdigit() and int(width) else n
            return Column(header, w, kind)
    raise FieldError(name)


def fields(spec: str) -> list[Column]:
    return [field(x) for x in spec.split(",") if x]

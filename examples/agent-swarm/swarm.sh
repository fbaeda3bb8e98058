#!/bin/bash
# The agent-swarm use case, in Slurm's words, on the local cluster of `slurm-shim cluster up`.
#
# Two teams run swarms of short agent jobs; each agent holds one model-API seat. The script
# configures a small version of the site's policies on Grid Engine:
#   - a seat consumable, swarm_api=5 (the small sister of anthropic_api=96), as a Slurm license;
#   - a resource quota: each team's project may hold at most 2 seats at a time;
#   - a two-team share tree (team_a 70 shares, team_b 30) with the share-tree policy on;
# submits the swarm with `sbatch -A team -L swarm_api:1`, one urgent job and one evaluation job
# that needs two seats at once (account evals, no quota), and then shows,
# with the Slurm commands only: jobs waiting for seats and for the quota with their reasons,
# sprio and sshare splitting the work between the teams, the urgent job starting first, and
# sreport's bill per team. Everything it changed is put back when it exits (even on Ctrl-C).
#
# Run as root after `slurm-shim cluster up`:  examples/agent-swarm/swarm.sh
# AGENTS=N sets the agents per team (default 6; CI runs 4). SLURM_SHIM_BIN picks the commands.
set -euo pipefail

AGENTS=${AGENTS:-6}
SEATS=5
TEAM_CAP=2
BIN=${SLURM_SHIM_BIN:-$(command -v sbatch >/dev/null 2>&1 && dirname "$(command -v sbatch)" || echo /opt/slurm-shim/bin)}
export PATH="$BIN:$PATH"
export SGE_ROOT=${SGE_ROOT:-/var/lib/gridengine} SGE_CELL=${SGE_CELL:-default}
QCONF=${QCONF:-/usr/lib/gridengine/qconf}
QALTER=${QALTER:-/usr/lib/gridengine/qalter}
QDEL=${QDEL:-/usr/lib/gridengine/qdel}
QSTAT=${QSTAT:-/usr/lib/gridengine/qstat}

[ "$(id -u)" = 0 ] || { echo "swarm.sh: run as root (it configures Grid Engine's policies)" >&2; exit 1; }
work=$(mktemp -d /tmp/agent-swarm.XXXXXX)
chmod 755 "$work"
ids=()
changed=()

restore() {
    set +e
    if [ ${#ids[@]} -gt 0 ]; then
        "$QDEL" "${ids[@]}" >/dev/null 2>&1
        for _ in $(seq 60); do
            left=$("$QSTAT" -u '*' | awk 'NR>2{print $1}' | grep -cxF -f <(printf '%s\n' "${ids[@]}"))
            [ "$left" = 0 ] && break
            sleep 1
        done
    fi
    for ((i=${#changed[@]}-1; i>=0; i--)); do
        case ${changed[$i]} in
            rqs) "$QCONF" -drqs swarm_quota >/dev/null 2>&1 ;;
            stree) "$QCONF" -dstree >/dev/null 2>&1 ;;
            sconf) "$QCONF" -Msconf "$work/sconf.orig" >/dev/null 2>&1 ;;
            projects) for p in team_a team_b evals; do "$QCONF" -dprj $p >/dev/null 2>&1; done ;;
            seats) "$QCONF" -dattr exechost complex_values swarm_api global >/dev/null 2>&1 ;;
            complex) "$QCONF" -Mc "$work/complexes.orig" >/dev/null 2>&1 ;;
        esac
    done
    rm -rf "$work"
}
trap restore EXIT
trap 'exit 130' INT TERM

say() { printf '\n$ %s\n' "$*"; "$@"; }
qc() {  # qconf, quiet unless it fails
    "$QCONF" "$@" >"$work/qconf.out" 2>&1 || { cat "$work/qconf.out" >&2; return 1; }
}

# --- the policies ------------------------------------------------------------------------------
if "$QCONF" -sstree >/dev/null 2>&1; then
    echo "swarm.sh: this cell already has a share tree; not replacing it" >&2; exit 1
fi
"$QCONF" -sc > "$work/complexes.orig"
{ cat "$work/complexes.orig"; echo "swarm_api           swarm_api        INT       <=      YES         JOB        0        0"; } \
    > "$work/complexes"
qc -Mc "$work/complexes"; changed+=(complex)
qc -aattr exechost complex_values "swarm_api=$SEATS" global; changed+=(seats)
for t in team_a team_b evals; do
    printf 'name %s\noticket 0\nfshare 0\nacl NONE\nxacl NONE\n' "$t" > "$work/$t"
    qc -Aprj "$work/$t"
done
changed+=(projects)
printf '{\n name swarm_quota\n description "each team holds at most %s seats"\n enabled TRUE\n limit projects {team_a,team_b} to swarm_api=%s\n}\n' \
    "$TEAM_CAP" "$TEAM_CAP" > "$work/rqs"
qc -Arqs "$work/rqs"; changed+=(rqs)
printf 'id=0\nname=Root\ntype=0\nshares=1\nchildnodes=1,2\nid=1\nname=team_a\ntype=0\nshares=70\nchildnodes=NONE\nid=2\nname=team_b\ntype=0\nshares=30\nchildnodes=NONE\n' \
    > "$work/stree"
qc -Astree "$work/stree"; changed+=(stree)
"$QCONF" -ssconf > "$work/sconf.orig"
# the share tree gets tickets to split, and tickets outweigh urgency: Grid Engine normalizes each
# part of a job's priority over the pending jobs, so with the cell's equal weights (0.5 and 0.5) a
# second less of waiting time (urgency 0 against 1 for the agents submitted a second earlier)
# cancels an operator's override tickets (ntckts 1 against 0.02)
sed -e 's/^weight_tickets_share .*/weight_tickets_share              10000/' \
    -e 's/^weight_ticket .*/weight_ticket                     1.000000/' \
    -e 's/^weight_urgency .*/weight_urgency                    0.010000/' "$work/sconf.orig" > "$work/sconf"
qc -Msconf "$work/sconf"; changed+=(sconf)

# the shim's site config, plus: accounts are Grid Engine projects, swarm_api is a license
conf=${SLURM_SHIM_CONFIG:-/etc/slurm-shim/config.toml}
sed 's/^\[cluster\]$/[cluster]\nproject_from = "account"/' "$conf" > "$work/config.toml"
printf '\n[licenses.swarm_api]\ncomplex = "swarm_api"\nscope = "job"\n' >> "$work/config.toml"
export SLURM_SHIM_CONFIG="$work/config.toml"

echo "Policies: $SEATS swarm_api seats, at most $TEAM_CAP per team (quota swarm_quota), shares team_a 70 / team_b 30"
echo "Accounts team_a, team_b and evals are Grid Engine projects; each agent holds one seat, the evaluation two"

# --- the swarm ---------------------------------------------------------------------------------
# An agent: 2 s of CPU, then waiting on the API: in this demo the API answers once the queue's
# snapshot below is taken (the file $work/api, at most 60 s), and 3 s later the agent ends. So the
# first wave cannot end before the scheduler has counted the operator's tickets for the urgent job
# (at its next scheduling pass, which on a loaded machine may be late), and every run shows the
# same moment.
AGENT="timeout 2 sh -c 'while :; do :; done'; for _ in \$(seq 300); do [ -e $work/api ] && break; sleep 0.2; done; sleep 3"
cd "$work"
t0=$(date +%s.%N)
for i in $(seq "$AGENTS"); do
    for t in team_a team_b; do
        ids+=("$(sbatch --parsable -A "$t" -L swarm_api:1 -J "agent-${t#team_}$i" -o /dev/null --wrap "$AGENT")")
    done
done
urgent=$(sbatch --parsable -A team_b -L swarm_api:1 -J urgent -o /dev/null --wrap "$AGENT")
ids+=("$urgent")
ids+=("$(sbatch --parsable -A evals -L swarm_api:2 -J eval -o /dev/null --wrap "$AGENT")")
t1=$(date +%s.%N)
awk -v n="${#ids[@]}" -v a="$t0" -v b="$t1" 'BEGIN { printf "Submitted %d jobs in %.2f s\n", n, b - a }'
# the operator marks the urgent job (Grid Engine's lever: override tickets)
"$QALTER" -ot 100000 "$urgent" >"$work/qalter.out" 2>&1 || {
    echo "swarm.sh: $QALTER -ot 100000 $urgent failed:" >&2; cat "$work/qalter.out" >&2; exit 1; }
# The queue and the priorities are shown as they are at one moment of the first wave (its agents
# wait for the API): the first moment the quota holds a team's agent, the seats hold the evaluation
# and the scheduler has counted the urgent job's tickets (it leads sprio, ahead of team_a's waiting
# agents and their 70 shares, or it already runs). Then the API answers and the first wave ends.
# Should the tickets not be counted within 60 s, the last moment the reasons were seen is shown.
Q=(squeue -A team_a,team_b,evals -o "%.7i %.9a %.10j %.2t %.6M %r")
P=(sprio -o "%.7i %.9o %.10Y %.10F %.10A %.10J" -S -Y)
queue="" prio=""
for _ in $(seq 120); do
    q=$("${Q[@]}") p=$("${P[@]}")
    r=$(awk '$4 == "PD" {print $2, $6}' <<<"$q")
    if grep -q "^team_.* AssocGrp" <<<"$r" && grep -q "^evals Licenses" <<<"$r"; then
        queue=$q prio=$p
        ! grep -q "^ *$urgent .* PD " <<<"$q" || [ "$(awk 'NR == 2 {print $1}' <<<"$p")" = "$urgent" ] && break
    elif [ -n "$queue" ] || [ -z "$r" ]; then
        break  # the first wave is over (or nothing waits): keep the last moment seen
    fi
    sleep 0.5
done
[ -n "$queue" ] || { queue=$("${Q[@]}"); prio=$("${P[@]}"); }
touch "$work/api"  # the API answers: the first wave's agents end 3 s later
printf '\n$ %s\n%s\n' "${Q[*]}" "$queue"
printf '\n$ %s\n%s\n' "${P[*]}" "$prio"
say sshare -a

for _ in $(seq 300); do [ "$(squeue -h -A team_a,team_b,evals | wc -l)" -gt 0 ] || break; sleep 2; done
# the job that started first after the swarm's first wave
say sacct -X -A team_a,team_b,evals -o JobID,JobName,Account,Start,End,State -S "$(date -d @"${t0%.*}" +%Y-%m-%dT%H:%M:%S)"
say sshare -a -o Account,User,RawShares,NormShares,RawUsage,EffectvUsage
start=$(date -d "@$(( ${t0%.*} - 3600 ))" +%Y-%m-%dT%H:%M:%S)
end=$(date -d "@$(( $(date +%s) + 3600 ))" +%Y-%m-%dT%H:%M:%S)
say sreport -t seconds cluster AccountUtilizationByUser start="$start" end="$end" accounts=team_a,team_b,evals

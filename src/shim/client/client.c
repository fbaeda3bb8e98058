/* slurm-shim's thin client: hands this process's argv, environment, working directory, umask,
 * signal state and open descriptors to the user's warm service (src/shim/service/server.py, whose
 * docstring and docs/service.md describe the protocol) and exits as the command run there does.
 * Whenever the request was not handed over it runs the command itself: it execs the Python
 * command (SHIM_FALLBACK/<command>), starting a service first when there is none.
 *
 *   cc -O2 -DSHIM_FALLBACK='"/opt/slurm-shim/libexec/slurm-shim"' \
 *      -DSHIM_PYTHON='"/opt/slurm-shim/bin/python3"' -o squeue client.c
 *
 * Installed once per served command (the name of the file is the command). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SHIM_FALLBACK
#define SHIM_FALLBACK "/opt/slurm-shim/libexec/slurm-shim"
#endif
#ifndef SHIM_PYTHON
#define SHIM_PYTHON "/opt/slurm-shim/bin/python3"
#endif

#define MAX_BODY (8u << 20)
#define MAX_FDS 250
#define NLIMITS 16
#define STARTING_FRESH 10

static const char *const served[] = {"sbatch", "squeue", "scancel", "sacct", "sinfo", "scontrol",
                                     "sprio", "sshare", "sacctmgr", "sreport", NULL};

struct header { /* service.HEADER: "=4sIIIIIIIIIQQ" */
    char magic[4];
    uint32_t len, argc, envc, nfds, ngroups, umask, uid, gid, flags;
    uint64_t ignored, blocked;
} __attribute__((packed));

struct record { uint32_t kind; int32_t value; } __attribute__((packed));

static char cmd[64];
static char **args;
static int sock = -1;

static void fallback(void) {
    char path[PATH_MAX];
    if (sock >= 0) close(sock);
    snprintf(path, sizeof path, "%s/%s", SHIM_FALLBACK, cmd);
    execv(path, args);
    fprintf(stderr, "%s: error: cannot run %s: %s\n", cmd, path, strerror(errno));
    _exit(1);
}

static int off(const char *v) {
    return v && (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "false"));
}

/* agent.agent_dir's rules: the user's own directory, mode 0700 (no group/other bits), not a link */
static int private_dir(const char *path) {
    struct stat st;
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return 0;
    if (lstat(path, &st) != 0) return 0;
    return S_ISDIR(st.st_mode) && st.st_uid == getuid() && !(st.st_mode & 077);
}

/* service.cell_name's subdirectory for $SLURM_SHIM_CONFIG (none when it is unset): one service per
   site config. FNV-1a 64 of the path. */
static int cell_dir(char *out, size_t n) {
    const char *conf = getenv("SLURM_SHIM_CONFIG");
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t len = strlen(out);
    if (!conf || !*conf) return 1;
    for (const unsigned char *p = (const unsigned char *)conf; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    if ((size_t)snprintf(out + len, n - len, "/cell-%016llx", (unsigned long long)h) >= n - len) return 0;
    return private_dir(out);
}

/* service._owned: a directory of the user's that nobody else may write to (follow: the home) */
static int owned_dir(const char *path, int follow) {
    struct stat st;
    if ((follow ? stat(path, &st) : lstat(path, &st)) != 0) return 0;
    return S_ISDIR(st.st_mode) && st.st_uid == getuid() && !(st.st_mode & 022);
}

/* service._fallback_base: someone else holds /tmp/slurm-shim-<uid> (out), so /run/user/<uid>/slurm-shim
   when /run/user/<uid> is the user's, else $HOME/.cache/slurm-shim/run when it fits a socket path */
static int fallback_base(char *out, size_t n) {
    const char *home = getenv("HOME");
    char cache[PATH_MAX];
    size_t len;
    if (getenv("SLURM_SHIM_DEBUG"))
        fprintf(stderr, "slurm-shim: service: %s is not your own private directory (someone else made it?): "
                        "using another one\n", out);
    if ((size_t)snprintf(out, n, "/run/user/%u", (unsigned)getuid()) < n && owned_dir(out, 0) &&
        (size_t)snprintf(out, n, "/run/user/%u/slurm-shim", (unsigned)getuid()) < n && private_dir(out))
        return 1;
    if (!home || home[0] != '/' || !owned_dir(home, 1)) return 0;
    len = strlen(home);
    while (len > 0 && home[len - 1] == '/') len--;
    if ((size_t)snprintf(cache, sizeof cache, "%.*s/.cache", (int)len, home) >= sizeof cache) return 0;
    mkdir(cache, 0700); /* (as store/rundir.py: whatever is there is judged below) */
    if ((size_t)snprintf(out, n, "%s/slurm-shim/run", cache) >= n) return 0;
    if (strlen(out) + sizeof "/cell-0123456789abcdef/service.sock" - 1 >= 108 || !owned_dir(cache, 0)) return 0;
    if ((size_t)snprintf(out, n, "%s/slurm-shim", cache) >= n || !private_dir(out)) return 0;
    if ((size_t)snprintf(out, n, "%s/slurm-shim/run", cache) >= n) return 0;
    return private_dir(out);
}

static int service_dir(char *out, size_t n) {
    const char *d = getenv("SLURM_SHIM_AGENT_DIR"), *rt = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    if (d && *d) {
        if (strlen(d) >= n) return 0;
        strcpy(out, d);
        return private_dir(out);
    }
    if (rt && *rt && stat(rt, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid()) {
        if ((size_t)snprintf(out, n, "%s/slurm-shim", rt) < n && private_dir(out)) return cell_dir(out, n);
    }
    if ((size_t)snprintf(out, n, "/tmp/slurm-shim-%u", (unsigned)getuid()) >= n) return 0;
    if (private_dir(out)) return cell_dir(out, n);
    return fallback_base(out, n) && cell_dir(out, n);
}

/* service.START_ENV: what a service keeps of its first caller's environment (never LD_PRELOAD,
   LD_LIBRARY_PATH, PYTHON*: the one process every later request forks from). */
static int start_env_kept(const char *e) {
    static const char *const names[] = {"PATH", "HOME", "USER", "LOGNAME", "TZ", "LANG", "LANGUAGE", "SGE_ROOT",
                                        "SGE_CELL", "SGE_QMASTER_PORT", "SGE_EXECD_PORT", NULL};
    const char *eq = strchr(e, '=');
    if (!eq) return 0;
    size_t n = (size_t)(eq - e);
    if (!strncmp(e, "LC_", 3) || !strncmp(e, "SLURM_SHIM_", 11)) return 1;
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == n && !strncmp(e, names[i], n)) return 1;
    return 0;
}

/* No service: start one, detached (never from inside a Grid Engine job), as service.start does. */
static void start_service(const char *dir) {
    char marker[PATH_MAX], log[PATH_MAX], loc[1024];
    const char *job = getenv("JOB_ID"), *envn = getenv("ENVIRONMENT");
    struct stat st;
    int fd, i;
    if (job && envn && !strcmp(envn, "BATCH")) return;
    snprintf(marker, sizeof marker, "%s/service.starting", dir);
    for (i = 0; i < 2; i++) {
        fd = open(marker, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        if (fd >= 0) { close(fd); break; }
        if (errno != EEXIST) return;
        if (stat(marker, &st) == 0 && time(NULL) - st.st_mtime < STARTING_FRESH) return;
        unlink(marker);
    }
    if (i == 2) return;
    snprintf(log, sizeof log, "%s/service.log", dir);
    {
        const char *a = getenv("LC_ALL"), *c = getenv("LC_CTYPE"), *l = getenv("LANG");
        snprintf(loc, sizeof loc, "%s\x1f%s\x1f%s", a ? a : "", c ? c : "", l ? l : "");
    }
    pid_t pid = fork();
    if (pid < 0) { unlink(marker); return; }
    if (pid == 0) {
        if (fork() != 0) _exit(0); /* the service is nobody's child: init reaps it */
        setsid();
        if (chdir("/") != 0) _exit(1);
        int nul = open("/dev/null", O_RDONLY), lg = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (nul < 0 || lg < 0) { unlink(marker); _exit(1); }
        dup2(nul, 0); dup2(lg, 1); dup2(lg, 2);
        closefrom(3);
        setenv("SLURM_SHIM_AGENT_DIR", dir, 1);
        setenv("SLURM_SHIM_SERVICE_LOCALE", loc, 1);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
        extern char **environ;
        static char *kept[512];
        int k = 0;
        for (char **e = environ; *e && k < 511; e++)
            if (start_env_kept(*e)) kept[k++] = *e;
        kept[k] = NULL;
        execle(SHIM_PYTHON, SHIM_PYTHON, "-I", "-c",
               "import sys; from shim.service import main; sys.exit(main(['serve']))", (char *)NULL, kept);
        unlink(marker);
        _exit(127);
    }
    waitpid(pid, NULL, 0);
}

static const char *prefix(void) { /* backends._prefix */
    if (!strcmp(cmd, "sbatch")) return "sbatch: error: Batch job submission failed: ";
    if (!strcmp(cmd, "sinfo")) return "slurm_load_partitions: ";
    return "slurm_load_jobs error: ";
}

static void lost(void) {
    fprintf(stderr, "%sUnable to contact slurm controller (connect failure)\n", prefix());
    _exit(1);
}

static int send_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k < 0) { if (errno == EINTR) continue; return -1; }
        c += k; n -= (size_t)k;
    }
    return 0;
}

static int recv_record(int fd, struct record *r) {
    char *c = (char *)r;
    size_t n = sizeof *r;
    while (n) {
        ssize_t k = recv(fd, c, n, 0);
        if (k < 0) { if (errno == EINTR) continue; return -1; }
        if (k == 0) return -1;
        c += k; n -= (size_t)k;
    }
    return 0;
}

/* After the go: signals this process gets go to the command. */
static void relay(int sig) {
    int saved = errno;
    struct record r = {'S', sig};
    if (sig == SIGTSTP) r.value = SIGSTOP; /* the command's group is orphaned: TSTP would be dropped */
    send(sock, &r, sizeof r, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sig == SIGTSTP) raise(SIGSTOP);
    errno = saved;
}

struct buf { char *p; size_t n, cap; };

static int put(struct buf *b, const void *data, size_t n) {
    if (b->n + n > MAX_BODY) return -1;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->n + n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p; b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    return 0;
}

int main(int argc, char **argv) {
    extern char **environ;
    char exe[PATH_MAX], dir[PATH_MAX - 32];
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    args = argv;

    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *base = argv[0] ? argv[0] : "";
    if (k > 0) { exe[k] = 0; base = exe; }
    const char *slash = strrchr(base, '/');
    const char *name = slash ? slash + 1 : base;
    if (strlen(name) < sizeof cmd) memcpy(cmd, name, strlen(name) + 1); /* longer: no command of ours */
    int known = 0;
    for (int i = 0; served[i]; i++) known |= !strcmp(cmd, served[i]);
    if (!known || off(getenv("SLURM_SHIM_SERVICE")) || !service_dir(dir, sizeof dir)) fallback();
    if (strlen(dir) + 14 > sizeof addr.sun_path) fallback();
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s/service.sock", dir);

    sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0) fallback();
    struct timeval tv = {5, 0};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(sock, (struct sockaddr *)&addr, sizeof addr) != 0) {
        if (errno == ENOENT || errno == ECONNREFUSED) start_service(dir);
        fallback();
    }
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.uid != getuid()) fallback();

    /* In the background of its terminal's session (job control applies: SIGTTIN, TOSTOP), the
       command runs here, where the terminal driver sees it as the caller it is. */
    for (int fd = 0; fd < 3; fd++) {
        pid_t fg = isatty(fd) ? tcgetpgrp(fd) : -1;
        if (fg != -1 && fg != getpgrp()) fallback();
    }
    int cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cwd < 0) fallback();

    /* every open descriptor but ours goes, each to be put at its number */
    int fds[MAX_FDS + 1], nfds = 0;
    fds[nfds++] = cwd;
    int32_t targets[MAX_FDS];
    DIR *dp = opendir("/proc/self/fd");
    if (!dp) fallback();
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
        int fd = atoi(de->d_name);
        if (fd == dirfd(dp) || fd == sock || fd == cwd) continue;
        int fl = fcntl(fd, F_GETFD);
        if (fl < 0 || (fl & FD_CLOEXEC)) continue;
        if (nfds > MAX_FDS) { closedir(dp); fallback(); }
        targets[nfds - 1] = fd;
        fds[nfds++] = fd;
    }
    closedir(dp);

    struct buf b = {0};
    gid_t groups[65536];
    int ng = getgroups(65536, groups);
    if (ng < 0) fallback();
    uint32_t g32[ng > 0 ? ng : 1];
    for (int i = 0; i < ng; i++) g32[i] = groups[i];
    uint64_t lim[2 * NLIMITS];
    for (int i = 0; i < NLIMITS; i++) {
        struct rlimit rl;
        if (getrlimit(i, &rl) != 0) rl.rlim_cur = rl.rlim_max = 0;
        lim[2 * i] = rl.rlim_cur; lim[2 * i + 1] = rl.rlim_max;
    }
    char ns[128 + sizeof SHIM_PYTHON + 1] = "";
    k = readlink("/proc/self/ns/mnt", ns, 127);
    ns[k > 0 ? k : 0] = 0;
    strcat(ns, "\n" SHIM_PYTHON); /* and the installation: a service of another prefix refuses (service._mntns) */
    uint32_t envc = 0;
    if (put(&b, targets, 4u * (nfds - 1)) || put(&b, g32, 4u * ng) || put(&b, lim, sizeof lim)
        || put(&b, cmd, strlen(cmd) + 1)) fallback();
    for (int i = 0; i < argc; i++) if (put(&b, argv[i], strlen(argv[i]) + 1)) fallback();
    for (char **e = environ; *e; e++, envc++) if (put(&b, *e, strlen(*e) + 1)) fallback();
    if (put(&b, ns, strlen(ns) + 1)) fallback();

    struct header h = {{'S', 'H', 'M', '1'}, (uint32_t)b.n, (uint32_t)argc, envc, (uint32_t)(nfds - 1),
                       (uint32_t)ng, 0, getuid(), getgid(), 0, 0, 0};
    mode_t um = umask(0);
    umask(um);
    h.umask = um;
    sigset_t mask;
    sigprocmask(SIG_BLOCK, NULL, &mask);
    for (int s = 1; s < 65 && s < NSIG; s++) {
        struct sigaction sa;
        if (sigismember(&mask, s) == 1) h.blocked |= 1ull << (s - 1);
        if (sigaction(s, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN) h.ignored |= 1ull << (s - 1);
    }

    char cbuf[CMSG_SPACE(sizeof(int) * (MAX_FDS + 1))];
    memset(cbuf, 0, sizeof cbuf);
    struct iovec iov[2] = {{&h, sizeof h}, {b.p, b.n}}; /* one write: the service reads it at once */
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2, .msg_control = cbuf,
                         .msg_controllen = CMSG_SPACE(sizeof(int) * nfds)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
    ssize_t sent;
    do sent = sendmsg(sock, &msg, MSG_NOSIGNAL); while (sent < 0 && errno == EINTR);
    if (sent < 0) fallback();
    if ((size_t)sent < sizeof h) {
        if (send_all(sock, (char *)&h + sent, sizeof h - (size_t)sent) || send_all(sock, b.p, b.n)) fallback();
    } else if (send_all(sock, b.p + ((size_t)sent - sizeof h), b.n - ((size_t)sent - sizeof h))) fallback();
    close(cwd);
    free(b.p);
    struct record r;
    if (recv_record(sock, &r) || r.kind != 'O') fallback(); /* refused, or no answer: ours to run */

    /* the go: from here on the command is the service's, and runs once. The signals to forward
       wait (blocked) until their relay is in place. */
    int forward[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT, SIGTSTP, SIGWINCH};
    size_t nforward = sizeof forward / sizeof *forward;
    sigset_t hold, before;
    sigemptyset(&hold);
    for (size_t i = 0; i < nforward; i++) sigaddset(&hold, forward[i]);
    sigprocmask(SIG_BLOCK, &hold, &before);
    struct record go = {'G', 0};
    if (send_all(sock, &go, sizeof go)) fallback(); /* not sent: the service never forks */
    struct sigaction sa = {0};
    sa.sa_handler = relay;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < nforward; i++) {
        struct sigaction old;
        if (sigaction(forward[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(forward[i], &sa, NULL);
    }
    sigprocmask(SIG_SETMASK, &before, NULL);
    struct timeval forever = {0, 0};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof forever);
    for (;;) {
        if (recv_record(sock, &r)) lost();
        if (r.kind == 'X') _exit(r.value & 0xff);
        if (r.kind == 'K') { /* the command died of a signal: so does this process */
            struct sigaction dfl = {0};
            dfl.sa_handler = SIG_DFL;
            sigaction(r.value, &dfl, NULL);
            struct rlimit no = {0, 0};
            setrlimit(RLIMIT_CORE, &no); /* the command's core, if any, is the service's child's */
            sigset_t one;
            sigemptyset(&one);
            sigaddset(&one, r.value);
            sigprocmask(SIG_UNBLOCK, &one, NULL);
            raise(r.value);
            _exit(128 + r.value);
        }
    }
}

"""srun's PMI service: the process-management interface MPI libraries use to find their peers.

Slurm's ``--mpi=pmi2`` plugin serves both wire protocols on each task's ``PMI_FD``; so does this
module, in srun's own process, for every task of the step on every host:

* **PMI-1 "simple"** (MPICH, Intel MPI, MVAPICH built with the simple PMI): newline-terminated
  lines of blank-separated ``key=value`` words, ``cmd=init`` / ``get_maxes`` / ``get_appnum`` /
  ``get_my_kvsname`` / ``get_universe_size`` / ``put`` / ``get`` / ``barrier_in`` (answered with
  ``barrier_out`` once every rank is in) / ``finalize`` / ``abort``, and ``initack`` for clients that
  connect through ``PMI_PORT`` with a ``PMI_ID``.
* **PMI-2**: a client opens with PMI-1's ``cmd=init pmi_version=2``, then every message is a
  6-character decimal length (left-justified, blank padded) and a body of ``key=value;`` pairs
  (``;`` inside a value doubled): ``fullinit`` / ``job-getid`` / ``kvs-put`` / ``kvs-get`` /
  ``kvs-fence`` / ``info-getjobattr`` (``PMI_process_mapping``, ``universeSize``) /
  ``info-putnodeattr`` / ``info-getnodeattr`` (``wait=TRUE`` blocks until a task of the node puts
  it) / ``ring`` (Slurm's PMIX_Ring extension of its libpmi2: each rank's neighbours' values, in
  the order of Slurm's tree of step daemons) / ``finalize`` / ``abort`` (the step ends only for
  ``isworld=TRUE``, as under Slurm). A message without a length (a second PMI2_Init's ``cmd=init``
  line) gets ``finalize-response`` and the connection is closed, as slurmstepd does.

Where Slurm's server answers, this one answers the same: ``appnum`` is -1 in both protocols (so
MPICH sets no MPI_APPNUM attribute, as under Slurm). Not served: the name service, spawn and
job-connect (an error answer each, where Slurm's slurmstepd would leave job-connect unanswered),
and the job attributes ``PMI_netinfo_of_task`` and ``mpi_reserved_ports`` (found=FALSE).
Checked against Slurm's own PMI-2 client library (Debian's libpmi2, tests/integration/test_pmi2_live.py).

Every task gets a socketpair end as ``PMI_FD`` (with ``PMI_RANK``, ``PMI_SIZE``, ``PMI_JOBID``, as
Slurm's plugin sets them). Tasks on srun's host are served directly. On another host, the host
launcher (``Relay``) gives its tasks their ``PMI_FD`` and carries each one's bytes over one TCP
connection to srun's listener, which it opens with the step's secret (``shimpmi <token> <rank>``,
the token travelling in the launcher's private launch file, never in an environment or on a
command line); a connection without it is closed unread. So no other user can join a step's key
exchange, which a bare ``PMI_PORT`` would allow.

Nobody can keep the relays out either (security review 3, F-23). The listener is bound to the
one address srun's host uses toward the step's hosts (``listen(toward)``; a second address only
when another host is reached through it), never to every address. It answers a relay's token
line with ``shimpmi ok`` and closes once every rank of the step is connected. A connection that
has not sent a valid token line within ``AUTH_DEADLINE`` seconds is closed; strangers are
counted per peer address, and past ``MAX_PER_PEER`` of one address (or ``MAX_UNAUTHED`` of
all) the oldest is closed to make room, never the newcomer: a relay sends its token as soon as
it is connected, and one whose connection was closed before the ``ok`` connects again.

Standard library only; no thread per task: one selector thread serves the whole step.
"""

from __future__ import annotations

import os
import selectors
import socket
import threading
import time
from typing import Callable, Sequence

MAXKVSNAME, MAXKEYLEN, MAXVALLEN = 256, 64, 1024  # what get_maxes answers (Slurm's values)
AUTH = b"shimpmi "
AUTH_OK = b"shimpmi ok\n"  # the listener's answer to a relay's valid token line
AUTH_DEADLINE = 3.0  # seconds a connection may take to send its token line
MAX_PER_PEER = 32  # connections of one peer address at once that have not sent it (then its oldest goes)
MAX_UNAUTHED = 512  # ... and of all peers (then the oldest of the peer that has most goes)
RELAY_TRIES = 20  # a relay connects again when its connection is closed before the ok
TYPES = ("none", "pmi2", "pmix")  # Slurm's plugin names --mpi accepts here ("openmpi" means none)
RING_WIDTH = 16  # Slurm's stepd tree width for PMIX_Ring (SLURM_PMIX_RING_WIDTH overrides it, >= 2)


def process_mapping(node_of: Sequence[int]) -> str:
    """MPICH's ``PMI_process_mapping`` for ranks on nodes: ``(vector,(start,nodes,per_node),...)``,
    each triple ``per_node`` consecutive ranks on each of ``nodes`` consecutive nodes from
    ``start`` (block over two nodes: ``(vector,(0,2,2))``; cyclic: ``(vector,(0,2,1))``)."""
    runs: list[list[int]] = []  # [node, count] of consecutive ranks
    for n in node_of:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    triples: list[list[int]] = []  # [start, nodes, per_node]
    for n, c in runs:
        last = triples[-1] if triples else None
        if last and last[2] == c and last[0] + last[1] == n:
            last[1] += 1
        else:
            triples.append([n, 1, c])
    if len(triples) > 1 and triples[0][0] == 0 and all(t == triples[0] for t in triples):
        triples = triples[:1]  # a pattern that repeats from node 0 (cyclic) is written once, as Slurm does
    return "(vector," + ",".join(f"({a},{b},{c})" for a, b, c in triples) + ")"


def ring_order(node_of: Sequence[int], width: int = RING_WIDTH) -> list[int]:
    """The ranks in PMIX_Ring's order, as Slurm's tree of step daemons gives it: the nodes in a
    depth-first walk of the ``width``-ary tree (node ``n``'s children ``n*width+1 ..
    n*width+width``), each node's ranks in rank order. Up to ``width + 1`` nodes that is plain
    node order."""
    ranks_of: dict[int, list[int]] = {}
    for rank, node in enumerate(node_of):
        ranks_of.setdefault(node, []).append(rank)
    nodes = max(node_of, default=-1) + 1
    out: list[int] = []
    stack = [0] if nodes else []
    while stack:
        n = stack.pop()
        out += ranks_of.get(n, [])
        stack += reversed(range(n * width + 1, min(n * width + width, nodes - 1) + 1))
    return out


# ---------------------------------------------------------------------------------------------
# Wire formats


def parse1(line: str) -> dict[str, str]:
    """A PMI-1 line: blank-separated ``key=value`` words (a value holds no blank)."""
    out: dict[str, str] = {}
    for word in line.split():
        key, eq, value = word.partition("=")
        if eq:
            out.setdefault(key, value)
    return out


def parse2(body: str) -> dict[str, str]:
    """A PMI-2 body: ``key=value;`` pairs, ``;;`` a literal ``;`` inside a value."""
    out: dict[str, str] = {}
    i, n = 0, len(body)
    while i < n:
        eq = body.find("=", i)
        if eq < 0:
            break
        key = body[i:eq]
        j = eq + 1
        value = []
        while j < n:
            if body[j] == ";":
                if j + 1 < n and body[j + 1] == ";":
                    value.append(";")
                    j += 2
                    continue
                break
            value.append(body[j])
            j += 1
        out.setdefault(key, "".join(value))
        i = j + 1
    return out


def frame2(*pairs: tuple[str, str]) -> bytes:
    """A PMI-2 message: the length field and ``key=value;`` pairs (``;`` doubled in values)."""
    body = "".join(f"{k}={str(v).replace(';', ';;')};" for k, v in pairs).encode()
    return f"{len(body):<6d}".encode() + body


def _same(a: bytes, b: bytes) -> bool:
    """Constant-time equality of two tokens."""
    if len(a) != len(b):
        return False
    diff = 0
    for x, y in zip(a, b):
        diff |= x ^ y
    return diff == 0


# ---------------------------------------------------------------------------------------------
# The server


class _Conn:
    __slots__ = ("sock", "rank", "buf", "out", "version", "authed", "finalized", "spawn", "peer", "since")

    def __init__(self, sock: socket.socket, rank: int | None, authed: bool, peer: str = "", since: float = 0.0):
        self.sock, self.rank, self.authed = sock, rank, authed
        self.peer, self.since = peer, since  # a stranger's address and when it was accepted
        self.buf = b""
        self.out = b""
        self.version = 1
        self.finalized = False
        self.spawn: list[str] | None = None  # PMI-1 mcmd=spawn lines until endcmd


class Server:
    """One step's PMI service (PMI-1 and PMI-2 on the same sockets).

    ``size`` ranks; ``node_of[rank]`` the node index of each rank; ``jobid`` the step's name
    (``<job>.<step>``, PMI_JOBID and the KVS name); ``on_abort(rank, code, message)`` is called
    (from the server's thread) when a task calls PMI_Abort."""

    def __init__(self, size: int, node_of: Sequence[int], jobid: str, *,
                 on_abort: Callable[[int | None, int, str], None] | None = None, appnum: int = -1):
        self.size, self.node_of, self.jobid = size, list(node_of), jobid
        self.on_abort, self.appnum = on_abort, appnum
        self.token = os.urandom(16).hex()  # (not secrets: its hmac/hashlib imports cost 3 ms a step)
        self.mapping = process_mapping(self.node_of)
        self.kvs: dict[str, str] = {}
        self.node_attrs: dict[int, dict[str, str]] = {}
        self.attr_waiters: list[tuple[_Conn, int, str]] = []
        self.in_barrier: list[_Conn] = []
        self.ring: dict[int, tuple[_Conn, int, str | None, str | None]] = {}  # rank: (conn, count, left, right)
        self.sel = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.listeners: dict[str, socket.socket] = {}  # bound address -> listening socket
        self.port = 0
        self.connected: set[int] = set()  # ranks with a connection (a task fd, or a relay's)
        self.strangers: dict[_Conn, None] = {}  # not yet authenticated, oldest first
        self.thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self.sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._stop = False
        self.aborted: tuple[int | None, int, str] | None = None

    # -- what tasks get
    def task_fd(self, rank: int) -> int:
        """A new socketpair for task ``rank``: the task's end (inheritable, to pass as PMI_FD);
        srun keeps the other. Close the returned fd in srun once the task is started."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with self.lock:
            self.connected.add(rank)
        self._add(mine, rank, True)  # (the loop sees then whether every rank is connected)
        fd = theirs.detach()
        os.set_inheritable(fd, True)
        return fd

    def task_env(self, rank: int, fd: int) -> dict[str, str]:
        return task_env(rank, fd, self.size, self.jobid)

    def listen(self, toward: str) -> tuple[str, int]:
        """Accept the relays of host ``toward``: on the address this host uses toward it (the
        kernel's route, source_address), on a free port (the same port for each address where
        it is free). Returns (address, port) for that host's relay to connect to."""
        addr = source_address(toward)
        if addr is None:  # the name does not resolve here: our own name's, as the relay would
            addr = source_address(os.uname().nodename) or "127.0.0.1"
        if addr not in self.listeners:
            family = socket.AF_INET6 if ":" in addr else socket.AF_INET
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((addr, self.port))
            except OSError:
                s.bind((addr, 0))
            s.listen(128)
            s.setblocking(False)
            self.listeners[addr] = s
            self.port = self.port or s.getsockname()[1]
            with self.lock:
                self.sel.register(s, selectors.EVENT_READ, "listen")
            self._wake()
        return addr, self.listeners[addr].getsockname()[1]

    def start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, name="pmi", daemon=True)
            self.thread.start()

    def close(self) -> None:
        self._stop = True
        self._wake()
        if self.thread is not None:
            self.thread.join(2.0)
        for key in list(self.sel.get_map().values()):
            obj = key.fileobj
            if isinstance(obj, socket.socket):
                obj.close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self.sel.close()

    # -- the loop
    def _add(self, sock: socket.socket, rank: int | None, authed: bool) -> None:
        sock.setblocking(False)
        with self.lock:
            self.sel.register(sock, selectors.EVENT_READ, _Conn(sock, rank, authed))
        self._wake()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def _loop(self) -> None:
        while not self._stop:
            timeout = None
            if self.strangers:
                first = next(iter(self.strangers))
                timeout = max(0.0, first.since + AUTH_DEADLINE - time.monotonic())
            try:
                events = self.sel.select(timeout)
            except (OSError, ValueError):
                return
            for key, mask in events:
                if key.data is None:
                    try:
                        os.read(self._wake_r, 4096)
                    except OSError:
                        pass
                elif key.data == "listen":
                    self._accept(key.fileobj)  # type: ignore[arg-type]
                else:
                    conn = key.data
                    if mask & selectors.EVENT_READ and conn.sock.fileno() >= 0:
                        self._read(conn)
                    if mask & selectors.EVENT_WRITE and conn.sock.fileno() >= 0:
                        self._flush(conn)
            if self.listeners and len(self.connected) >= self.size:
                self._all_connected()
            now = time.monotonic()
            while self.strangers:  # (after the reads: a token already here is never too late)
                first = next(iter(self.strangers))
                if first.since + AUTH_DEADLINE > now:
                    break
                self._drop(first)

    def _accept(self, listener: socket.socket) -> None:
        try:
            sock, peer = listener.accept()
        except OSError:
            return
        conn = _Conn(sock, None, False, str(peer[0]), time.monotonic())
        mine = [c for c in self.strangers if c.peer == conn.peer]
        if len(mine) >= MAX_PER_PEER:  # room is made by the oldest, never refused to a newcomer
            self._drop(mine[0])
        elif len(self.strangers) >= MAX_UNAUTHED:
            count: dict[str, int] = {}
            for c in self.strangers:
                count[c.peer] = count.get(c.peer, 0) + 1
            most = max(count, key=lambda p: count[p])
            self._drop(next(c for c in self.strangers if c.peer == most))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        self.strangers[conn] = None
        with self.lock:
            self.sel.register(sock, selectors.EVENT_READ, conn)
        self._read(conn)  # a relay's token line is usually here already

    def _all_connected(self) -> None:
        """Every rank has its connection: nobody else is waited for, the listeners close."""
        with self.lock:
            listeners, self.listeners = list(self.listeners.values()), {}
            for s in listeners:
                try:
                    self.sel.unregister(s)
                except (KeyError, ValueError):
                    pass
        for s in listeners:
            s.close()

    def _drop(self, conn: _Conn) -> None:
        self.strangers.pop(conn, None)
        with self.lock:
            try:
                self.sel.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
        conn.sock.close()
        self.in_barrier = [c for c in self.in_barrier if c is not conn]
        self.attr_waiters = [w for w in self.attr_waiters if w[0] is not conn]

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(65536 if conn.authed else 257)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        conn.buf += data
        if len(conn.buf) > 1 << 20:  # no PMI message is this long
            self._drop(conn)
            return
        while conn.sock.fileno() >= 0:
            if not conn.authed:
                nl = conn.buf.find(b"\n")
                if nl < 0:
                    if len(conn.buf) > 256:
                        self._drop(conn)
                    return
                line, conn.buf = conn.buf[:nl], conn.buf[nl + 1:]
                words = line.split()
                if (len(words) != 3 or words[0] != AUTH.strip() or not _same(words[1], self.token.encode())
                        or not words[2].isdigit() or len(words[2]) > 9 or int(words[2]) >= self.size
                        or int(words[2]) in self.connected):
                    self._drop(conn)  # not this step's relay (or that rank's is here): closed unread
                    return
                self.strangers.pop(conn, None)
                conn.authed, conn.rank = True, int(words[2])
                with self.lock:
                    self.connected.add(conn.rank)
                self._send(conn, AUTH_OK)
                continue
            if conn.version == 2:
                if len(conn.buf) < 6:
                    return
                try:
                    length = int(conn.buf[:6].decode("ascii").strip())
                except ValueError:
                    length = 0
                if length <= 0:  # (slurmstepd: most likely a second PMI2_Init's cmd=init line)
                    self._send(conn, frame2(("cmd", "finalize-response"), ("rc", "0")))
                    self._drop(conn)
                    return
                if len(conn.buf) < 6 + length:
                    return
                body, conn.buf = conn.buf[6:6 + length], conn.buf[6 + length:]
                self._pmi2(conn, parse2(body.decode("utf-8", "replace")))
            else:
                nl = conn.buf.find(b"\n")
                if nl < 0:
                    return
                line, conn.buf = conn.buf[:nl], conn.buf[nl + 1:]
                self._pmi1(conn, line.decode("utf-8", "replace"))

    def _send(self, conn: _Conn, data: bytes) -> None:
        conn.out += data
        self._flush(conn)

    def _flush(self, conn: _Conn) -> None:
        if conn.sock.fileno() < 0:
            return
        try:
            while conn.out:
                n = conn.sock.send(conn.out)
                conn.out = conn.out[n:]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._drop(conn)
            return
        with self.lock:
            try:
                self.sel.modify(conn.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.out else 0), conn)
            except (KeyError, ValueError):
                pass

    def _line(self, conn: _Conn, text: str) -> None:
        self._send(conn, (text + "\n").encode())

    # -- barriers (PMI-1 barrier_in and PMI-2 kvs-fence are the same step-wide barrier)
    def _barrier(self, conn: _Conn) -> None:
        self.in_barrier.append(conn)
        if len(self.in_barrier) >= self.size:
            waiting, self.in_barrier = self.in_barrier, []
            for c in waiting:
                if c.version == 2:
                    self._send(c, frame2(("cmd", "kvs-fence-response"), ("rc", "0")))
                else:
                    self._line(c, "cmd=barrier_out rc=0")

    def _abort(self, conn: _Conn, code: int, message: str) -> None:
        self.aborted = (conn.rank, code, message)
        if self.on_abort is not None:
            self.on_abort(conn.rank, code, message)

    # -- PMI-1
    def _pmi1(self, conn: _Conn, line: str) -> None:
        if conn.spawn is not None:  # mcmd=spawn ... endcmd: not supported (no MPI_Comm_spawn)
            if line.strip() == "endcmd":
                conn.spawn = None
                self._line(conn, "cmd=spawn_result rc=-1 errmsg=spawn_not_supported")
            return
        req = parse1(line)
        if "mcmd" in req:
            conn.spawn = []
            return
        cmd = req.get("cmd", "")
        if cmd == "init":
            version = req.get("pmi_version", "1")
            if version == "2":
                self._line(conn, "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0")
                conn.version = 2
            elif version == "1":
                self._line(conn, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
            else:
                self._line(conn, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1")
        elif cmd == "initack":  # PMI_PORT with PMI_ID: the client learns its rank from us
            pmiid = req.get("pmiid", "")
            if pmiid.isdigit() and int(pmiid) < self.size:
                conn.rank = int(pmiid)
            rank = conn.rank if conn.rank is not None else 0
            self._send(conn, f"cmd=initack rc=0\ncmd=set size={self.size}\ncmd=set rank={rank}\n"
                             f"cmd=set debug=0\n".encode())
        elif cmd == "get_maxes":
            self._line(conn, f"cmd=maxes rc=0 kvsname_max={MAXKVSNAME} keylen_max={MAXKEYLEN} "
                             f"vallen_max={MAXVALLEN}")
        elif cmd == "get_universe_size":
            self._line(conn, f"cmd=universe_size rc=0 size={self.size}")
        elif cmd == "get_appnum":
            self._line(conn, f"cmd=appnum rc=0 appnum={self.appnum}")
        elif cmd == "get_my_kvsname":
            self._line(conn, f"cmd=my_kvsname rc=0 kvsname={self.jobid}")
        elif cmd == "put":
            key, value = req.get("key", ""), req.get("value", "")
            if not key or len(key) > MAXKEYLEN or len(value) > MAXVALLEN:
                self._line(conn, "cmd=put_result rc=-1 msg=invalid_key_or_value")
            else:
                self.kvs[key] = value
                self._line(conn, "cmd=put_result rc=0")
        elif cmd == "get":
            key = req.get("key", "")
            value = self._job_value(key)
            if value is None:
                self._line(conn, f"cmd=get_result rc=-1 msg=key_{key}_not_found")
            else:
                self._line(conn, f"cmd=get_result rc=0 value={value}")
        elif cmd == "barrier_in":
            self._barrier(conn)
        elif cmd == "finalize":
            conn.finalized = True
            self._line(conn, "cmd=finalize_ack rc=0")
        elif cmd == "abort":
            code = req.get("exitcode", "1")
            self._abort(conn, int(code) if code.lstrip("-").isdigit() else 1, "")
        elif cmd in ("publish_name", "unpublish_name", "lookup_name"):
            result = {"publish_name": "publish_result", "unpublish_name": "unpublish_result",
                      "lookup_name": "lookup_result"}[cmd]
            self._line(conn, f"cmd={result} rc=-1 msg=name_service_not_supported")
        else:
            self._line(conn, f"cmd={cmd or 'unknown'}_result rc=-1 msg=unknown_command")

    def _job_value(self, key: str) -> str | None:
        if key in self.kvs:
            return self.kvs[key]
        if key == "PMI_process_mapping":
            return self.mapping
        return None

    # -- PMI-2
    def _pmi2(self, conn: _Conn, req: dict[str, str]) -> None:
        cmd = req.get("cmd", "")
        reply = lambda *pairs: self._send(conn, frame2(*pairs))  # noqa: E731
        if cmd == "fullinit":
            rank = req.get("pmirank", "")
            if rank.isdigit() and int(rank) < self.size and conn.rank is None:
                conn.rank = int(rank)
            r = conn.rank if conn.rank is not None else 0
            reply(("cmd", "fullinit-response"), ("rc", "0"), ("pmi-version", "2"), ("pmi-subversion", "0"),
                  ("rank", str(r)), ("size", str(self.size)), ("appnum", str(self.appnum)),
                  ("debugged", "FALSE"), ("pmiverbose", "FALSE"))
        elif cmd == "job-getid":
            reply(("cmd", "job-getid-response"), ("rc", "0"), ("jobid", self.jobid))
        elif cmd == "kvs-put":
            key, value = req.get("key", ""), req.get("value", "")
            if not key:
                reply(("cmd", "kvs-put-response"), ("rc", "1"), ("errmsg", "no key"))
            else:
                self.kvs[key] = value
                reply(("cmd", "kvs-put-response"), ("rc", "0"))
        elif cmd == "kvs-fence":
            self._barrier(conn)
        elif cmd == "kvs-get":
            value = self.kvs.get(req.get("key", ""))
            if value is None:
                reply(("cmd", "kvs-get-response"), ("rc", "0"), ("found", "FALSE"))
            else:
                reply(("cmd", "kvs-get-response"), ("rc", "0"), ("found", "TRUE"), ("value", value))
        elif cmd == "info-getjobattr":
            key = req.get("key", "")
            value = self.mapping if key == "PMI_process_mapping" else str(self.size) if key == "universeSize" else None
            if value is None:
                reply(("cmd", "info-getjobattr-response"), ("rc", "0"), ("found", "FALSE"))
            else:
                reply(("cmd", "info-getjobattr-response"), ("rc", "0"), ("found", "TRUE"), ("value", value))
        elif cmd == "info-putnodeattr":
            node = self._node(conn)
            key, value = req.get("key", ""), req.get("value", "")
            self.node_attrs.setdefault(node, {})[key] = value
            reply(("cmd", "info-putnodeattr-response"), ("rc", "0"))
            still = []
            for c, n, k in self.attr_waiters:
                if n == node and k == key:
                    self._send(c, frame2(("cmd", "info-getnodeattr-response"), ("rc", "0"), ("found", "TRUE"),
                                         ("value", value)))
                else:
                    still.append((c, n, k))
            self.attr_waiters = still
        elif cmd == "info-getnodeattr":
            node = self._node(conn)
            key = req.get("key", "")
            value = self.node_attrs.get(node, {}).get(key)
            if value is not None:
                reply(("cmd", "info-getnodeattr-response"), ("rc", "0"), ("found", "TRUE"), ("value", value))
            elif req.get("wait", "FALSE").upper() == "TRUE":
                self.attr_waiters.append((conn, node, key))
            else:
                reply(("cmd", "info-getnodeattr-response"), ("rc", "0"), ("found", "FALSE"))
        elif cmd == "finalize":
            conn.finalized = True
            reply(("cmd", "finalize-response"), ("rc", "0"))
        elif cmd == "abort":  # no answer; the step ends for isworld=TRUE only (the task exits itself)
            if req.get("isworld", "FALSE").upper() == "TRUE":
                self._abort(conn, 1, req.get("msg", ""))
        elif cmd == "ring":
            count = req.get("ring-count", "0")
            self.ring[conn.rank if conn.rank is not None else -1] = (
                conn, int(count) if count.isdigit() else 0, req.get("ring-left"), req.get("ring-right"))
            if len(self.ring) >= self.size:
                self._ring_out()
        elif cmd in ("name-publish", "name-unpublish", "name-lookup", "spawn", "job-connect", "job-disconnect"):
            reply(("cmd", f"{cmd}-response"), ("rc", "1"), ("errmsg", "not supported"))
        else:
            reply(("cmd", f"{cmd or 'unknown'}-response"), ("rc", "1"), ("errmsg", "unknown command"))

    def _ring_out(self) -> None:
        """Every rank is in PMIX_Ring: each gets its position (the counts before it), the right
        value of the rank before it and the left value of the rank after it, around the ring."""
        width = os.environ.get("SLURM_PMIX_RING_WIDTH", "")
        order = ring_order(self.node_of, int(width) if width.isdigit() and int(width) >= 2 else RING_WIDTH)
        msgs = [self.ring[r] for r in order if r in self.ring]
        self.ring = {}
        if not msgs:
            return
        out = [[0, "", ""] for _ in msgs]
        count, left, right = 0, msgs[-1][3], msgs[0][2]
        for i, (_, n, _, r) in enumerate(msgs):
            out[i][0], out[i][1] = count, left or ""
            count += n
            left = r if r is not None else left
        for i in range(len(msgs) - 1, -1, -1):
            out[i][2] = right or ""
            right = msgs[i][2] if msgs[i][2] is not None else right
        for (conn, _, _, _), (pos, lval, rval) in zip(msgs, out):
            self._send(conn, frame2(("cmd", "ring-response"), ("rc", "0"), ("ring-count", str(pos)),
                                    ("ring-left", lval), ("ring-right", rval)))

    def _node(self, conn: _Conn) -> int:
        if conn.rank is not None and conn.rank < len(self.node_of):
            return self.node_of[conn.rank]
        return -1


def source_address(host: str) -> str | None:
    """The address this host sends from toward ``host`` (the kernel's route for its first
    address: a UDP socket's connect sends nothing); None when ``host`` does not resolve."""
    try:
        infos = socket.getaddrinfo(host, 9, type=socket.SOCK_DGRAM)
    except (OSError, UnicodeError):
        return None
    for family, _, _, _, sockaddr in infos:
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as u:
                u.connect(sockaddr)
                return str(u.getsockname()[0])
        except OSError:
            continue
    return None


def task_env(rank: int, fd: int, size: int, jobid: str) -> dict[str, str]:
    """What Slurm's pmi2 plugin gives each task."""
    return {"PMI_FD": str(fd), "PMI_RANK": str(rank), "PMI_SIZE": str(size), "PMI_JOBID": jobid}


# ---------------------------------------------------------------------------------------------
# The relay on the other hosts


class Relay:
    """A host launcher's side of the PMI service: each of its tasks gets a socketpair end as
    PMI_FD, whose bytes go both ways over a TCP connection to srun's listener, opened with the
    step's token and the task's rank. One thread copies for all tasks."""

    def __init__(self, host: str, port: int, token: str, size: int, jobid: str):
        self.addr = (host, int(port))
        self.token, self.size, self.jobid = token, int(size), jobid
        self.sel = selectors.DefaultSelector()
        self.peer: dict[socket.socket, socket.socket] = {}
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def task_fd(self, rank: int) -> int:
        """The task's PMI_FD (inheritable); OSError when srun cannot be reached."""
        remote = self._connect(rank)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        remote.setblocking(True)
        mine.setblocking(True)
        with self.lock:
            self.peer[mine], self.peer[remote] = remote, mine
            self.sel.register(mine, selectors.EVENT_READ)
            self.sel.register(remote, selectors.EVENT_READ)
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, name="pmi-relay", daemon=True)
            self.thread.start()
        fd = theirs.detach()
        os.set_inheritable(fd, True)
        return fd

    def task_env(self, rank: int, fd: int) -> dict[str, str]:
        return task_env(rank, fd, self.size, self.jobid)

    def _connect(self, rank: int) -> socket.socket:
        """A connection to srun's listener that has said ``shimpmi ok`` to this rank's token line.
        One closed before that (strangers crowding the listener had it closed) is made again, up
        to RELAY_TRIES times within 30 s; OSError when srun cannot be reached."""
        deadline = time.monotonic() + 30
        for attempt in range(RELAY_TRIES):
            remote = socket.create_connection(self.addr, timeout=max(1.0, deadline - time.monotonic()))
            try:
                remote.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                remote.sendall(AUTH + f"{self.token} {rank}\n".encode())
                got = b""
                while len(got) < len(AUTH_OK):
                    data = remote.recv(len(AUTH_OK) - len(got))
                    if not data:
                        break
                    got += data
                if got == AUTH_OK:
                    return remote
            except OSError:
                pass
            remote.close()
            if time.monotonic() >= deadline:
                break
            time.sleep(min(0.05 * (attempt + 1), 0.5))
        raise OSError(f"srun's PMI listener at {self.addr[0]}:{self.addr[1]} did not accept rank {rank}")

    def _loop(self) -> None:
        while True:
            with self.lock:
                if not self.peer:
                    self.thread = None
                    return
            try:
                events = self.sel.select(timeout=0.5)
            except (OSError, ValueError):
                return
            for key, _ in events:
                src = key.fileobj
                dst = self.peer.get(src)  # type: ignore[arg-type]
                if dst is None:
                    continue
                try:
                    data = src.recv(65536)  # type: ignore[union-attr]
                    if data:
                        dst.sendall(data)
                        continue
                except OSError:
                    pass
                with self.lock:  # one side closed: both go
                    for s in (src, dst):
                        self.peer.pop(s, None)  # type: ignore[arg-type]
                        try:
                            self.sel.unregister(s)
                        except (KeyError, ValueError):
                            pass
                        s.close()  # type: ignore[union-attr]

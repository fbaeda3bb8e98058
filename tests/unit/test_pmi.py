"""srun's PMI service (shim.runtime.pmi) driven by a tiny protocol client, PMI-1 and PMI-2, over
task fds and through the other hosts' relay, as MPICH's simple PMI clients speak them."""

from __future__ import annotations

import socket
import threading

import pytest

from conftest import wait_until
from shim.runtime import pmi

TIMEOUT = 10


class Client:
    """A PMI client on an fd the server handed out (what a task gets as PMI_FD)."""

    def __init__(self, fd: int):
        self.sock = socket.socket(fileno=fd)
        self.sock.settimeout(TIMEOUT)
        self.buf = b""

    def send1(self, line: str) -> None:
        self.sock.sendall((line + "\n").encode())

    def line(self) -> str:
        while b"\n" not in self.buf:
            data = self.sock.recv(4096)
            if not data:
                raise EOFError
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode()

    def ask1(self, line: str) -> dict[str, str]:
        self.send1(line)
        return pmi.parse1(self.line())

    def send2(self, *pairs: tuple[str, str]) -> None:
        self.sock.sendall(pmi.frame2(*pairs))

    def msg2(self) -> dict[str, str]:
        while len(self.buf) < 6 or len(self.buf) < 6 + int(self.buf[:6]):
            data = self.sock.recv(4096)
            if not data:
                raise EOFError
            self.buf += data
        n = int(self.buf[:6])
        body, self.buf = self.buf[6:6 + n], self.buf[6 + n:]
        return pmi.parse2(body.decode())

    def ask2(self, *pairs: tuple[str, str]) -> dict[str, str]:
        self.send2(*pairs)
        return self.msg2()

    def closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except OSError:
            return True


@pytest.fixture
def server():
    made = []

    def make(size, node_of=None, **kw):
        s = pmi.Server(size, node_of or [0] * size, "42.0", **kw)
        s.start()
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def test_process_mapping():
    assert pmi.process_mapping([0, 0, 1, 1]) == "(vector,(0,2,2))"
    assert pmi.process_mapping([0, 1, 0, 1]) == "(vector,(0,2,1))"
    assert pmi.process_mapping([0, 0, 0, 1]) == "(vector,(0,1,3),(1,1,1))"
    assert pmi.process_mapping([0] * 16) == "(vector,(0,1,16))"


def test_wire_formats_escape_semicolons():
    framed = pmi.frame2(("cmd", "kvs-put"), ("key", "a"), ("value", "x;y"))
    assert framed[:6] == b"29    " and framed[6:] == b"cmd=kvs-put;key=a;value=x;;y;"
    assert pmi.parse2(framed[6:].decode()) == {"cmd": "kvs-put", "key": "a", "value": "x;y"}
    assert pmi.parse1("cmd=put kvsname=k key=a value=b") == {"cmd": "put", "kvsname": "k", "key": "a", "value": "b"}


def test_pmi1_exchange_and_barrier(server):
    s = server(3, [0, 0, 1])
    clients = [Client(s.task_fd(r)) for r in range(3)]
    for r, c in enumerate(clients):
        assert c.ask1("cmd=init pmi_version=1 pmi_subversion=1") == {
            "cmd": "response_to_init", "pmi_version": "1", "pmi_subversion": "1", "rc": "0"}
        maxes = c.ask1("cmd=get_maxes")
        assert maxes["cmd"] == "maxes" and maxes["rc"] == "0" and int(maxes["vallen_max"]) >= 256
        assert c.ask1("cmd=get_my_kvsname")["kvsname"] == "42.0"
        assert c.ask1("cmd=get_universe_size")["size"] == "3"
        assert c.ask1("cmd=get_appnum")["appnum"] == "-1"  # as Slurm's server answers
        assert c.ask1(f"cmd=put kvsname=42.0 key=card{r} value=addr-{r}") == {"cmd": "put_result", "rc": "0"}
    clients[0].send1("cmd=barrier_in")
    clients[1].send1("cmd=barrier_in")
    clients[0].sock.settimeout(0.3)
    with pytest.raises(socket.timeout):  # not out before the last rank is in
        clients[0].line()
    clients[0].sock.settimeout(TIMEOUT)
    clients[2].send1("cmd=barrier_in")
    for c in clients:
        assert c.line() == "cmd=barrier_out rc=0"
    assert clients[2].ask1("cmd=get kvsname=42.0 key=card0") == {"cmd": "get_result", "rc": "0", "value": "addr-0"}
    assert clients[0].ask1("cmd=get kvsname=42.0 key=PMI_process_mapping")["value"] == "(vector,(0,1,2),(1,1,1))"
    missing = clients[1].ask1("cmd=get kvsname=42.0 key=nope")
    assert missing["cmd"] == "get_result" and missing["rc"] != "0"
    for c in clients:
        assert c.ask1("cmd=finalize") == {"cmd": "finalize_ack", "rc": "0"}


def test_pmi1_initack_gives_rank_and_size(server):
    s = server(2)
    c = Client(s.task_fd(1))
    c.send1("cmd=initack pmiid=1")
    assert [c.line() for _ in range(4)] == ["cmd=initack rc=0", "cmd=set size=2", "cmd=set rank=1", "cmd=set debug=0"]


def test_pmi2_exchange_fence_and_node_attributes(server):
    s = server(2, [0, 1])
    a, b = Client(s.task_fd(0)), Client(s.task_fd(1))
    for rank, c in enumerate((a, b)):
        assert c.ask1("cmd=init pmi_version=2 pmi_subversion=0")["pmi_version"] == "2"
        got = c.ask2(("cmd", "fullinit"), ("pmirank", str(rank)), ("threaded", "FALSE"))
        assert got["cmd"] == "fullinit-response" and got["rc"] == "0"
        assert (got["rank"], got["size"], got["pmi-version"], got["appnum"]) == (str(rank), "2", "2", "-1")
        assert "spawner-jobid" not in got
    assert a.ask2(("cmd", "job-getid"))["jobid"] == "42.0"
    assert a.ask2(("cmd", "kvs-put"), ("key", "k0"), ("value", "v;0")) == {"cmd": "kvs-put-response", "rc": "0"}
    a.send2(("cmd", "kvs-fence"))
    b.send2(("cmd", "kvs-fence"))
    assert a.msg2()["cmd"] == "kvs-fence-response" and b.msg2()["cmd"] == "kvs-fence-response"
    got = b.ask2(("cmd", "kvs-get"), ("jobid", "42.0"), ("srcid", "0"), ("key", "k0"))
    assert (got["found"], got["value"]) == ("TRUE", "v;0")
    assert b.ask2(("cmd", "kvs-get"), ("key", "none"))["found"] == "FALSE"
    got = a.ask2(("cmd", "info-getjobattr"), ("key", "PMI_process_mapping"))
    assert (got["found"], got["value"]) == ("TRUE", "(vector,(0,2,1))")
    # node attributes are per node: rank 1 (node 1) does not see rank 0's
    assert a.ask2(("cmd", "info-putnodeattr"), ("key", "shm"), ("value", "seg0"))["rc"] == "0"
    assert b.ask2(("cmd", "info-getnodeattr"), ("key", "shm"), ("wait", "FALSE"))["found"] == "FALSE"
    b.send2(("cmd", "info-getnodeattr"), ("key", "late"), ("wait", "TRUE"))
    c2 = Client(s.task_fd(1))  # another task on node 1 puts it later (ranks join their node's table)
    c2.send1("cmd=init pmi_version=2 pmi_subversion=0")
    c2.line()
    c2.ask2(("cmd", "fullinit"), ("pmirank", "1"))
    c2.ask2(("cmd", "info-putnodeattr"), ("key", "late"), ("value", "here"))
    assert b.msg2() == {"cmd": "info-getnodeattr-response", "rc": "0", "found": "TRUE", "value": "here"}
    assert a.ask2(("cmd", "finalize")) == {"cmd": "finalize-response", "rc": "0"}


def test_ring_order_follows_slurms_step_daemon_tree():
    assert pmi.ring_order([0, 1, 0, 1]) == [0, 2, 1, 3]  # cyclic: node by node
    assert pmi.ring_order([0, 0, 1, 1]) == [0, 1, 2, 3]
    # a depth-first walk of the width-ary tree: node 1's children (3, 4) before node 2
    assert pmi.ring_order([0, 1, 2, 3, 4], width=2) == [0, 1, 3, 4, 2]
    assert pmi.ring_order(list(range(18))) == [0, 1, 17] + list(range(2, 17))
    assert pmi.ring_order([]) == []


def pmi2_clients(s, n):
    clients = [Client(s.task_fd(r)) for r in range(n)]
    for rank, c in enumerate(clients):
        c.ask1("cmd=init pmi_version=2 pmi_subversion=0")
        got = c.ask2(("cmd", "fullinit"), ("pmijobid", "42.0"), ("pmirank", str(rank)), ("threaded", "FALSE"))
        assert got["rc"] == "0" and got["rank"] == str(rank)
    return clients


def test_pmi2_ring_exchange(server):
    """Slurm's PMIX_Ring (libpmi2's extension, what MVAPICH uses): once every rank is in, each
    gets its place in the ring (node by node: ranks 0, 2, 1 here) and its neighbours' values."""
    s = server(3, [0, 1, 0])
    clients = pmi2_clients(s, 3)
    clients[0].send2(("cmd", "ring"), ("ring-count", "1"), ("ring-left", "v0"), ("ring-right", "v0"))
    clients[1].send2(("cmd", "ring"), ("ring-count", "1"), ("ring-left", "v1"), ("ring-right", "v1"))
    clients[0].sock.settimeout(0.3)
    with pytest.raises(socket.timeout):  # no answer before the last rank is in
        clients[0].msg2()
    clients[0].sock.settimeout(TIMEOUT)
    clients[2].send2(("cmd", "ring"), ("ring-count", "1"), ("ring-left", "v;2"), ("ring-right", "v;2"))
    got = [c.msg2() for c in clients]
    assert got[0] == {"cmd": "ring-response", "rc": "0", "ring-count": "0", "ring-left": "v1", "ring-right": "v;2"}
    assert got[2] == {"cmd": "ring-response", "rc": "0", "ring-count": "1", "ring-left": "v0", "ring-right": "v1"}
    assert got[1] == {"cmd": "ring-response", "rc": "0", "ring-count": "2", "ring-left": "v;2", "ring-right": "v0"}
    # a second ring starts afresh
    for r, c in enumerate(clients):
        c.send2(("cmd", "ring"), ("ring-count", "1"), ("ring-left", f"w{r}"), ("ring-right", f"w{r}"))
    assert [c.msg2()["ring-count"] for c in clients] == ["0", "2", "1"]


def test_pmi2_abort_ends_the_step_for_isworld_only(server):
    seen = []
    done = threading.Event()
    s = server(2, on_abort=lambda rank, code, msg: (seen.append((rank, code, msg)), done.set()))
    a, b = pmi2_clients(s, 2)
    a.send2(("cmd", "abort"), ("isworld", "FALSE"), ("msg", "mine only"))
    assert a.ask2(("cmd", "job-getid"))["jobid"] == "42.0"  # served on; no answer to the abort
    assert not done.is_set()
    b.send2(("cmd", "abort"), ("isworld", "TRUE"), ("msg", "all of us"))
    assert done.wait(TIMEOUT) and seen == [(1, 1, "all of us")]


def test_pmi2_message_without_a_length_gets_finalize_and_close(server):
    """A second PMI2_Init sends PMI-1's init line on a PMI-2 connection: slurmstepd answers
    finalize-response and closes the connection, which makes the client fail as it should."""
    s = server(1)
    (c,) = pmi2_clients(s, 1)
    c.send1("cmd=init pmi_version=2 pmi_subversion=0")
    assert c.msg2() == {"cmd": "finalize-response", "rc": "0"}
    assert c.closed()


def test_abort_reaches_the_step(server):
    seen = []
    done = threading.Event()
    s = server(2, on_abort=lambda rank, code, msg: (seen.append((rank, code)), done.set()))
    c = Client(s.task_fd(1))
    c.send1("cmd=abort exitcode=7")
    assert done.wait(TIMEOUT) and seen == [(1, 7)]


def test_relay_needs_the_steps_token(server):
    s = server(2, [0, 1])
    addr, port = s.listen("127.0.0.1")
    assert addr == "127.0.0.1"
    stranger = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    stranger.sendall(b"cmd=init pmi_version=1 pmi_subversion=1\n")  # no token: closed unread
    assert stranger.recv(100) == b""
    wrong = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    wrong.sendall(pmi.AUTH + b"0" * 32 + b" 1\ncmd=get_maxes\n")
    assert wrong.recv(100) == b""
    relay = pmi.Relay("127.0.0.1", port, s.token, 2, s.jobid)
    local, remote = Client(s.task_fd(0)), Client(relay.task_fd(1))
    assert relay.task_env(1, 9) == {"PMI_FD": "9", "PMI_RANK": "1", "PMI_SIZE": "2", "PMI_JOBID": "42.0"}
    assert remote.ask1("cmd=init pmi_version=1 pmi_subversion=1")["rc"] == "0"
    remote.ask1("cmd=put kvsname=42.0 key=far value=node1")
    local.send1("cmd=barrier_in")
    remote.send1("cmd=barrier_in")
    assert local.line() == remote.line() == "cmd=barrier_out rc=0"
    assert local.ask1("cmd=get kvsname=42.0 key=far")["value"] == "node1"
    # the relayed connection knows its rank (from the token line): node attributes are node 1's
    remote.send1("cmd=init pmi_version=2 pmi_subversion=0")
    remote.line()
    remote.ask2(("cmd", "info-putnodeattr"), ("key", "x"), ("value", "1"))
    assert local.ask1("cmd=init pmi_version=2 pmi_subversion=0")["rc"] == "0"
    assert local.ask2(("cmd", "info-getnodeattr"), ("key", "x"))["found"] == "FALSE"


# --- F-23 (security review 3): strangers cannot keep the relays out --------------------------------


def _strangers(port: int, n: int, source: str = "127.0.0.1") -> list[socket.socket]:
    """n idle connections from ``source`` that never send a byte (the review's watcher)."""
    out = []
    for _ in range(n):
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c.bind((source, 0))
        c.connect(("127.0.0.1", port))
        out.append(c)
    return out


def _closed_now(c: socket.socket) -> bool:
    """The server has closed ``c`` (its FIN is here: recv gives b"" at once), without waiting."""
    import select

    if not select.select([c], [], [], 0)[0]:
        return False
    try:
        return c.recv(1) == b""
    except OSError:
        return True


def test_an_idle_stranger_is_closed_at_its_deadline(server, monkeypatch):
    monkeypatch.setattr(pmi, "AUTH_DEADLINE", 0.5)
    s = server(2, [0, 1])
    _, port = s.listen("127.0.0.1")
    idle = _strangers(port, 3)
    for c in idle:
        c.settimeout(TIMEOUT)  # a bound on the test, not the deadline under test
        assert c.recv(1) == b""  # closed by the server, having sent nothing
    assert not s.strangers


def test_strangers_are_counted_per_peer_and_the_oldest_make_room(server, monkeypatch):
    """The review: 64 idle strangers kept every relay out. Now 10 from one address and 100 from
    another (the relay's own, as a user on the relay's host would): the relay still gets in, the
    other address's 10 are untouched, and of the crowd no more than MAX_PER_PEER stay."""
    monkeypatch.setattr(pmi, "AUTH_DEADLINE", 3600.0)  # only the counting is under test here
    s = server(3, [0, 1, 1])
    _, port = s.listen("127.0.0.1")
    others = _strangers(port, 10, "127.0.0.2")
    crowd = _strangers(port, 100)
    relay = pmi.Relay("127.0.0.1", port, s.token, 3, s.jobid)
    far = Client(relay.task_fd(1))  # accepted after every stranger before it (the kernel's queue)
    assert far.ask1("cmd=get_maxes")["rc"] == "0"
    assert not [c for c in others if _closed_now(c)]
    left = [c for c in crowd if not _closed_now(c)]
    assert len(left) == pmi.MAX_PER_PEER - 1 and left == crowd[-len(left):]  # the newest stay
    assert sorted(c.peer for c in s.strangers) == ["127.0.0.1"] * len(left) + ["127.0.0.2"] * 10
    for c in others + crowd:
        c.close()


def test_the_listener_is_bound_toward_the_steps_hosts_and_closes_once_every_rank_is_in(server):
    s = server(3, [0, 1, 1])
    addr, port = s.listen("localhost")
    assert addr == pmi.source_address("localhost") and addr != "0.0.0.0"
    assert [x.getsockname()[0] for x in s.listeners.values()] == [addr]  # not every address
    relay = pmi.Relay(addr, port, s.token, 3, s.jobid)
    a, b = Client(relay.task_fd(1)), Client(relay.task_fd(2))
    dup = socket.create_connection((addr, port), timeout=TIMEOUT)  # rank 1's token again: refused
    dup.sendall(pmi.AUTH + f"{s.token} 1\n".encode())
    assert dup.recv(100) == b""
    assert s.listeners  # rank 0 is not connected yet
    local = Client(s.task_fd(0))
    wait_until(lambda: not s.listeners, TIMEOUT, "the listener to close")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((addr, port), timeout=TIMEOUT)
    for c in (local, a, b):
        c.send1("cmd=barrier_in")
    assert local.line() == a.line() == b.line() == "cmd=barrier_out rc=0"

"""Calls routed between programs on one SQLite file, over a Unix socket per runtime: what
is particular to that transport (its directory and sockets, a stale socket, another
user's connection, frames that are not of this protocol). The behaviour every routing
store shares is checked on SQLite by test_routing.py and test_routed_streams.py."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import struct
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import trio
from proc_helpers import store_programs
from test_routing import CHILD, start_owner

import agentrt
from agentrt import AgentNotFound, AgentStopped, RoutingError, StoreError
from agentrt._stores import _sqlite_router
from agentrt._stores._route_codec import PROTOCOL, decode_answer, encode_call
from agentrt._stores._sqlite_router import CHECK_EVERY, routes_directory, socket_name
from agentrt.store import LeaseOwner
from agentrt.testing import ScriptedBackend, reply

BOUND = 60
SYSTEM_PYTHON = "/usr/bin/python3"


def store_at(tmp_path: Path) -> Path:
    return tmp_path / "shared.sqlite3"


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def call_frame(name: str, call: str, arguments: bytes) -> bytes:
    return frame(msgspec.msgpack.encode(["a-caller", name, call, arguments]))


def newer(row: bytes) -> bytes:
    """``row`` as a later agentrt would write it: in the next routing protocol."""
    envelope = msgspec.msgpack.decode(row)
    envelope["protocol"] = PROTOCOL + 1
    return msgspec.msgpack.encode(envelope)


@contextlib.contextmanager
def reached(path: Path) -> Iterator[str]:
    """The address of the socket file ``path`` through its opened directory: a test's
    temporary directory is too deep for a socket address (107 bytes)."""
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{directory}/{path.name}"
    finally:
        os.close(directory)


async def exchange(path: Path, data: bytes, *, end: bool = False) -> bytes:
    """Send ``data`` on a new connection to the socket at ``path`` (then ``end`` the
    sending: a caller that goes); all it answered."""
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with sock, reached(path) as address:
        await sock.connect(address)
        await sock.send(data)
        if end:
            sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := await sock.recv(65536):
            received += chunk
    return received


def answer_of(call: str, received: bytes) -> object:
    (length,) = struct.unpack(">I", received[:4])
    assert len(received) == 4 + length
    return decode_answer(call, received[4:])


async def owning(rt: agentrt.Runtime) -> Path:
    """The socket of ``rt``, which owns agent "x"."""
    backend = ScriptedBackend(default=lambda call: reply(f"heard: {call.prompt}"))
    await rt.start_agent(agentrt.Agent, name="x", backend=backend)
    store = rt.store
    assert isinstance(store, agentrt.SQLiteStore)
    return routes_directory(store.path.resolve()) / socket_name(rt.runtime_id)


async def test_the_sockets_are_this_users_only_and_gone_when_their_runtime_closes(
    tmp_path: Path,
) -> None:
    path = store_at(tmp_path)
    async with agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as rt:
        mine = await owning(rt)
        directory = os.stat(mine.parent)
        assert mine.parent == tmp_path / "shared.sqlite3-routes"
        assert stat.S_IMODE(directory.st_mode) == 0o700 and directory.st_uid == os.getuid()
        found = os.stat(mine)
        assert stat.S_ISSOCK(found.st_mode) and stat.S_IMODE(found.st_mode) == 0o600
        # The name is a hash of the runtime id: nothing of the runtime's in it.
        assert rt.runtime_id not in mine.name and os.listdir(mine.parent) == [mine.name]
    assert os.listdir(mine.parent) == []


async def test_a_routes_directory_others_may_enter_is_refused_naming_the_fix(
    tmp_path: Path,
) -> None:
    path = store_at(tmp_path)
    directory = routes_directory(path)
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)  # not the umask's
    with pytest.raises(StoreError, match=r"mode\s+0700.*drwxr-xr-x.*chmod 700"):
        async with agentrt.open_runtime(store=agentrt.SQLiteStore(path)):
            pass


async def test_a_store_path_too_long_for_a_socket_address_routes_all_the_same(
    tmp_path: Path,
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "shared.sqlite3"
    assert len(str(routes_directory(path) / socket_name("r"))) > 108  # over sun_path's size
    async with (
        agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as owner,
        agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as caller,
    ):
        await owning(owner)
        with trio.fail_after(BOUND):
            assert (await caller.ask("x", "hi")).text == "heard: hi"


async def test_a_killed_owners_socket_stops_its_callers_at_once_and_is_removed_later(
    tmp_path: Path,
) -> None:
    """SIGKILLed, the owner leaves its socket file and its lease (for lease_ttl): a call
    to it raises AgentStopped at once, not at the lease's expiry; the next runtime to start
    on the store removes the stale file."""
    path = store_at(tmp_path)
    async with store_programs(CHILD, str(path)) as start_program:
        program = await start_owner(start_program, "node-a", 600)
        stale = routes_directory(path) / socket_name(program.runtime_id)
        assert stale.exists()
        await program.kill()
        assert stale.exists()  # nobody removed it
        async with agentrt.open_runtime(store=agentrt.SQLiteStore(path), node="node-a") as rt:
            with trio.fail_after(10):  # far below the lease's 600 s
                with pytest.raises(AgentStopped, match=rf"pid {program.pid}.*routed status"):
                    await rt.status("x")
            assert not stale.exists()
            with pytest.raises(AgentNotFound):  # nobody has a lease of it
                await rt.ask("nobody", "hi")


async def test_a_call_to_a_frozen_owner_stops_once_its_lease_has_expired(tmp_path: Path) -> None:
    """SIGSTOPped, the owner's socket still accepts (the kernel queues the connection) but
    nothing answers: the caller's look at the lease ends the call once it has expired."""
    ttl = 3.0
    path = store_at(tmp_path)
    async with store_programs(CHILD, str(path)) as start_program:
        program = await start_owner(start_program, "node-a", ttl)
        async with agentrt.open_runtime(store=agentrt.SQLiteStore(path), node="node-b") as rt:
            with trio.fail_after(BOUND):
                assert (await rt.status("x")).state == "idle"
            program.program.process.send_signal(signal.SIGSTOP)
            stopped = trio.current_time()
            with trio.fail_after(ttl + CHECK_EVERY + 30):  # generous: a loaded machine
                with pytest.raises(AgentStopped, match=rf"pid {program.pid}.*routed status"):
                    await rt.status("x")
            assert trio.current_time() - stopped >= ttl * 0.5  # not before the lease could go
            await program.kill()


async def test_a_call_in_another_protocol_or_no_call_at_all_is_refused_and_serving_goes_on(
    tmp_path: Path,
) -> None:
    path = store_at(tmp_path)
    async with agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as rt:
        mine = await owning(rt)
        with trio.fail_after(BOUND):
            later = newer(encode_call("ask", ("hi", None)))
            with pytest.raises(RoutingError) as caught:
                answer_of("ask", await exchange(mine, call_frame("x", "ask", later)))
            why = caught.value.why
            assert f"routing protocol {PROTOCOL + 1}" in why
            assert f"speaks routing protocol {PROTOCOL}" in why
            with pytest.raises(RoutingError, match="not a routed call of any protocol"):
                answer_of("ask", await exchange(mine, frame(b"\xc1 not msgpack")))
            with pytest.raises(RoutingError, match="over the 67108864 a frame may have"):
                answer_of("ask", await exchange(mine, struct.pack(">I", 2**31)))
            assert await exchange(mine, b"\x00\x00", end=True) == b""  # no whole frame: no answer
            # The owner serves on, and an honest frame is answered.
            honest = call_frame("x", "ask", encode_call("ask", ("hi", None)))
            answer = answer_of("ask", await exchange(mine, honest))
            assert isinstance(answer, agentrt.Response) and answer.text == "heard: hi"


async def test_an_answer_in_another_protocol_raises_a_routing_error_naming_both(
    tmp_path: Path,
) -> None:
    """An owner of a later agentrt (here a socket this test serves under a lease it took)
    answers in its protocol: the caller refuses the answer with a RoutingError."""
    path = store_at(tmp_path)
    async with (
        agentrt.SQLiteStore(path) as store,
        agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as rt,
    ):
        later = LeaseOwner(node="n", pid=os.getpid(), start_time=0, runtime_id="a-later-one")
        await store.acquire_lease("x", later, ttl=600)
        listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with listener, reached(routes_directory(path) / socket_name("a-later-one")) as address:
            await listener.bind(address)
            listener.listen()

            async def answer_in_a_later_protocol() -> None:
                conn, _ = await listener.accept()
                with conn:
                    await conn.recv(65536)
                    await conn.send(frame(newer(encode_call("ask", ("hi", None)))))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer_in_a_later_protocol)
                with trio.fail_after(BOUND), pytest.raises(RoutingError) as caught:
                    await rt.status("x")
        assert "its answer was refused" in caught.value.why
        assert f"routing protocol {PROTOCOL + 1}" in caught.value.why


@pytest.mark.skipif(os.getuid() != 0, reason="connecting as another user needs root")
@pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason=f"no {SYSTEM_PYTHON}")
async def test_a_connection_of_another_user_is_refused_unanswered(tmp_path: Path) -> None:
    """The directory keeps other users out; opened up here, the owner still refuses a peer
    whose uid (SO_PEERCRED) is not its own, and runs nothing for it."""
    path = store_at(tmp_path)
    async with agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as rt:
        mine = await owning(rt)
        os.chmod(mine.parent, 0o755)
        os.chmod(mine, 0o777)
        honest = call_frame("x", "ask", encode_call("ask", ("from nobody", None)))
        # The other user reaches the directory through a descriptor it inherits, past the
        # test's private temporary directories.
        script = (
            "import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "s.connect(sys.argv[1])\n"
            "try:\n"
            "    s.sendall(sys.stdin.buffer.read())\n"
            "    print(len(s.recv(65536)))\n"
            "except (ConnectionResetError, BrokenPipeError):\n"
            "    print(0)\n"
        )
        with reached(mine) as address:
            directory = int(address.split("/")[4])
            # The system's python: the other user may not enter the project's checkout.
            argv = [SYSTEM_PYTHON, "-c", script, address]
            with trio.fail_after(BOUND):
                run = await trio.run_process(
                    argv, stdin=honest, capture_stdout=True, user=65534, pass_fds=(directory,)
                )
        assert run.stdout.strip() == b"0"  # closed, with no answer
        with trio.fail_after(BOUND):
            assert (await rt.status("x")).turns == 0  # the ask never ran
            answer = answer_of("ask", await exchange(mine, honest))  # this user's is served
        assert isinstance(answer, agentrt.Response) and answer.text == "heard: from nobody"


async def test_a_call_over_the_frame_bound_is_refused_unsent_and_its_owner_serves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A routed tell whose prompt makes a frame over the bound raises `RoutingError` saying
    so, not `AgentStopped` (its owner lives: the call was never taken), and stores nothing;
    the owner answers the next call."""
    bound = 1 << 20
    monkeypatch.setattr(_sqlite_router, "MAX_FRAME", bound)
    path = store_at(tmp_path)
    async with (
        agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as owner,
        agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as caller,
    ):
        await owning(owner)
        with trio.fail_after(BOUND), pytest.raises(RoutingError, match=f"over the {bound}"):
            await caller.tell("x", "p" * (2 * bound), key="big")
        assert await caller.request("x", "big") is None
        with trio.fail_after(BOUND):
            assert (await caller.ask("x", "small")).text == "heard: small"


class _LoadHeld(agentrt.SQLiteStore):
    """Holds an agent's start where it has its lease and reads its record (and fails it
    there if ``fail``)."""

    def __init__(self, path: Path, *, fail: bool) -> None:
        super().__init__(path)
        self.fail = fail
        self.leased = trio.Event()
        self.go_on = trio.Event()

    async def load(self, name: str) -> agentrt.store.SessionRecord | None:
        self.leased.set()
        await self.go_on.wait()
        if self.fail:
            raise StoreError(str(self.path), "made to fail by the test")
        return await super().load(name)


@pytest.mark.parametrize("failed", [False, True])
async def test_a_call_to_an_agent_its_owner_is_starting_waits_for_the_start(
    tmp_path: Path, failed: bool
) -> None:
    # The lease says which runtime owns the name from the first step of its start: a call
    # routed there meanwhile is answered once the start has ended, not `AgentNotFound`
    # (which it is if the start fails).
    held = _LoadHeld(store_at(tmp_path), fail=failed)
    backend = ScriptedBackend(default=lambda call: reply(f"heard: {call.prompt}"))
    async with (
        agentrt.open_runtime(store=held) as owner,
        agentrt.open_runtime(store=agentrt.SQLiteStore(store_at(tmp_path))) as caller,
        trio.open_nursery() as nursery,
    ):

        async def start() -> None:
            with contextlib.suppress(StoreError):
                await owner.start_agent(agentrt.Agent, name="x", backend=backend)

        nursery.start_soon(start)
        with trio.fail_after(BOUND):
            await held.leased.wait()
        answered: list[object] = []
        done = trio.Event()

        async def ask() -> None:
            try:
                answered.append(await caller.ask("x", "hello"))
            except AgentNotFound as exc:
                answered.append(exc)
            done.set()

        nursery.start_soon(ask)
        await trio.sleep(0.5)  # time for the routed call to reach the owner, which waits
        assert answered == []
        held.go_on.set()
        with trio.fail_after(BOUND):
            await done.wait()
    if failed:
        assert isinstance(answered[0], AgentNotFound), answered
    else:
        assert isinstance(answered[0], agentrt.Response) and answered[0].text == "heard: hello"

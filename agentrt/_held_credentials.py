"""A credential's park and halt kept in the store (`CredentialStore`), so they outlive the
program that saw them: a program that opens the store later, or another one on it, holds
the credential's agents too. The store is read at an agent's turn start (each one while
it shares a credential group, the first one of its instance otherwise, so a restart finds
what an earlier program stored) and written when a turn parks, halts or renews one. While
its login's expiry halts an agent, the store is read again now and then: a halt cleared
there (``agentrt unhalt``, or another program's agent answered on the login) lets it go
on. And how an agent waits while its credential holds its turns (`wait_for_admission`)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import attrs
import trio

from ._credentials import CredentialGroup
from ._errors import StoreError
from ._logs import log_error
from ._recovery import alone
from ._slot import Slot
from ._stores._protocols import CredentialStore


async def take_stored(slot: Slot, kept: CredentialStore, *, halts: bool, parks: bool) -> None:
    """Before a turn of ``slot``'s agent: hold its credential's group as the store says
    (another program's usage limit or expired login, or an earlier program's). A store
    that fails is logged: the turn goes on with what this program knows."""
    group = slot.credential
    key = group.identity.key if group is not None else CredentialGroup.own_key(slot.name)
    try:
        stored = await kept.credential(key)
        if stored is None or not (stored.parked_at(time.time()) or stored.halt_reason):
            return
        group = group or alone(slot, halts=halts, parks=parks)
        if group.halt_is_stale(stored):
            await kept.save_credential(attrs.evolve(stored, halt_reason=None, halted_since=None))
            stored = attrs.evolve(stored, halt_reason=None, halted_since=None)
        if group.adopt(stored):
            await kept.use_credential(slot.name, key, halts=halts, parks=parks)
    except StoreError as exc:
        log_error(f"agent {slot.name!r}: the store could not say what holds its credential", exc)


async def save_hold(group: CredentialGroup, kept: CredentialStore) -> None:
    """Store what holds ``group`` now (a park, a halt, or neither once renewed), and that
    its agents use it. A store that fails is logged: the hold lives in this program."""
    try:
        await kept.save_credential(group.stored())
        for name, (_, halts, parks) in list(group.members.items()):
            await kept.use_credential(name, group.identity.key, halts=halts, parks=parks)
    except StoreError as exc:
        log_error(f"credential {group.label}: the store could not keep what holds it", exc)


async def wait_for_admission(slot: Slot, group: CredentialGroup) -> None:
    """Until ``group`` may admit a turn of ``slot``'s agent (`CredentialGroup.wait`: its
    reset, a turn of it over), or until the agent has something to do that is no turn (an
    event sent to it): a usage limit's hours hold turns only.

    Cancellation: safe."""

    async def first(wait: Callable[[], Awaitable[object]]) -> None:
        await wait()
        nursery.cancel_scope.cancel()

    async def woken() -> None:
        # An event sent before this task parked woke nobody: it is handled now.
        if not slot.mailbox.notifications:
            await slot.park()

    slot.admitting = True  # a request arriving meanwhile queues behind the waiting work
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first, group.wait)
            nursery.start_soon(first, woken)
    finally:
        slot.admitting = False


async def wait_while_halted(
    slot: Slot, group: CredentialGroup, kept: CredentialStore | None, login_check: float
) -> None:
    """One wait of an agent its login's expiry halts: woken by work or after
    ``login_check`` seconds, it looks for a new login on disk, then for the halt cleared
    in the store."""
    with trio.move_on_after(login_check):
        await slot.park()
    if not group.check_login() and kept is not None and slot.halted:
        await check_stored_halt(group, kept)


async def check_stored_halt(group: CredentialGroup, kept: CredentialStore) -> None:
    """While ``group``'s login is expired: the agents go on once the store no longer holds
    its halt (cleared by ``agentrt unhalt``, or by another program whose turn on the login
    was answered). A store that fails, or has no row of it (its halt could not be stored),
    leaves them halted: the login file and `unhalt` still end it."""
    try:
        stored = await kept.credential(group.identity.key)
    except StoreError as exc:
        log_error(f"credential {group.label}: the store could not say whether it is halted", exc)
        return
    if stored is not None and stored.halt_reason is None:
        group.renewed()

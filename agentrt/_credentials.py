"""Agents grouped by the credential their CLI uses (a login or an API key), so that what
happens to the credential happens to all of them at once: a usage limit parks them until it
resets, an expired login halts them until it works again, and admission (turns at once,
turns a minute) counts their turns together, so a fan-out does not trip the limit itself.

A group's key names the credential without holding it: the ``credential`` option as given,
or one told from what the backend says its CLI would authenticate with
(`BackendInfo.credentials`, first in its order of preference): the real path of a login
file (per-agent CLI homes link to the user's file, so they group together), or a digest of
an API key's value, kept in memory only. An agent whose credential cannot be told (no
process, a keychain) is alone, in a group made when it first needs one.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import math
import os
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from ._errors import InvalidOptions
from ._records import StoredCredential
from ._redact import redact

if TYPE_CHECKING:  # a type only: `agentrt status` reads the holds without the backend contract
    from .backend import Credential

logger = logging.getLogger("agentrt")

# How `Credential.label` names a login file (a convention of `BackendInfo.credentials`).
LOGIN_FILE = "login file "
# Seconds a usage limit parks its credential's agents when the CLI did not say when it
# resets: then the next turn finds out.
UNKNOWN_RESET = 300.0
# The window of ``credential_turns_per_minute``.
MINUTE = 60.0
# Seconds between looks at the wall clock while parked: a machine that slept past the reset
# (trio's clock stood still) goes on within this of waking.
WALL_CHECK = 60.0
# The key of an agent's own group (`CredentialGroup.alone`) is this and its name.
_OWN = "agent:"
# What `AgentStatus.halt_reason` starts with for an agent its login's expiry halted.
EXPIRED = "credential_expired"


@attrs.frozen
class Identity:
    """Which credential an agent uses: ``key`` groups agents, ``label`` is what status and
    the console show (a name, an environment variable's name or a path, never a value),
    ``login_file`` the file a renewed login rewrites (None: none known)."""

    key: str
    label: str
    login_file: str | None = None


def identify(
    backend: str,
    named: str | None,
    credentials: Sequence[Credential] | None,
    env: Mapping[str, str],
) -> Identity | None:
    """The credential of an agent on ``backend``: ``named`` (its ``credential`` option) if
    given, else the first of ``credentials`` (what the CLI would use in its environment
    ``env``) where it can be told; None: the agent's own (see `CredentialGroup.alone`)."""
    login_file = None
    derived: Identity | None = None
    for credential in (credentials or ())[:1]:
        if credential.env_var is not None and env.get(credential.env_var):
            digest = hashlib.sha256(env[credential.env_var].encode()).hexdigest()[:16]
            derived = Identity(
                f"{backend}:{credential.env_var}:{digest}", f"{backend} {credential.env_var}"
            )
        elif credential.label.startswith(LOGIN_FILE):
            login_file = os.path.realpath(credential.label.removeprefix(LOGIN_FILE))
            derived = Identity(
                f"{backend}:{login_file}", f"{backend} {LOGIN_FILE}{login_file}", login_file
            )
    if named is not None:
        return Identity(f"named:{named}", named, login_file)
    return derived


class Member(Protocol):
    """An agent of a group, as the group halts and releases it (its `Slot`)."""

    def hold(self, reason: str) -> None:
        """Halt, for ``reason`` (`AgentStatus.halt_reason`)."""

    def release(self, reason: str) -> None:
        """Unhalt, if it is halted for a reason starting with ``reason``."""


def _login_stat(path: str | None) -> tuple[int, int, int] | None:
    if path is None:
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def clock_time(epoch: float) -> str:
    """An epoch time as the logs, status and the doctor show it (minutes, UTC)."""
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


@attrs.define(eq=False)
class CredentialGroup:
    """The agents of one credential in this runtime, and what holds for all of them."""

    identity: Identity
    max_turns: int | None = None
    turns_per_minute: int | None = None
    # Each agent's name: the agent, whether an expired login halts it, whether a usage limit
    # parks it.
    members: dict[str, tuple[Member, bool, bool]] = attrs.field(factory=dict)
    running: int = 0
    # When turns started (trio clock), within the last minute: for turns_per_minute.
    _starts: deque[float] | None = None
    # While parked: when the usage limit resets (epoch seconds), and that on the trio clock.
    parked_until: float | None = None
    _reopens: float = -math.inf
    # The latest reset it was parked until, ended or not: a stored park is taken once.
    _held_until: float = -math.inf
    park_reason: str | None = None
    # While its login is expired: the message, and the login file's stat at the expiry.
    expired: str | None = None
    _login_seen: tuple[int, int, int] | None = None
    # While expired: what its agents' halt_reason says, and since when (epoch seconds):
    # the stored halt this group holds, so that one stored again is not taken twice (an
    # agent unhalted since stays so).
    halt_reason: str | None = None
    halted_since: float | None = None
    # Set when the group may admit again; made by the first agent that waits.
    _changed: trio.Event | None = None

    @classmethod
    def alone(cls, name: str, member: Member, *, halts: bool, parks: bool) -> CredentialGroup:
        """The group of agent ``name`` whose credential cannot be told (`identify` says
        None): made when it first needs one (a usage limit, an expiry), as an idle agent
        holds none."""
        group = cls(Identity(cls.own_key(name), f"agent {name!r}'s own"))
        group.members[name] = (member, halts, parks)
        return group

    @staticmethod
    def own_key(name: str) -> str:
        """The key of agent ``name``'s own group (`alone`)."""
        return f"{_OWN}{name}"

    @staticmethod
    def owner_of(key: str) -> str | None:
        """The agent whose own group ``key`` is (`own_key`), or None: a shared one."""
        return key.removeprefix(_OWN) if key.startswith(_OWN) else None

    @property
    def label(self) -> str:
        return self.identity.label

    def parked(self) -> bool:
        """Whether a usage limit parks the group now (it ends by itself at the reset, on
        trio's clock or the wall clock: trio's stands still while the machine sleeps)."""
        until = self.parked_until
        if until is not None and (trio.current_time() >= self._reopens or time.time() >= until):
            self.parked_until = None
        return self.parked_until is not None

    def parks_agent(self, name: str) -> bool:
        """Whether the usage limit parks agent ``name`` now: not one whose policy ignores it
        (``on_usage_limit="fail"``)."""
        member = self.members.get(name)
        return (member is None or member[2]) and self.parked()

    def admit(self, *, parks: bool) -> bool:
        """Whether one of its agents may start a turn now, counted if so (`leave` when it
        is over); an agent that does not ``parks`` (``on_usage_limit="fail"``) ignores the
        usage limit, not the admission."""
        if parks and self.parked():
            return False
        if self.max_turns is not None and self.running >= self.max_turns:
            return False
        if self.turns_per_minute is not None:
            now = trio.current_time()
            starts = self._starts = self._starts if self._starts is not None else deque()
            while starts and starts[0] <= now - MINUTE:
                starts.popleft()
            if len(starts) >= self.turns_per_minute:
                return False
            starts.append(now)
        self.running += 1
        return True

    def leave(self) -> None:
        """A turn `admit` counted is over."""
        self.running -= 1
        self._signal()

    async def wait(self) -> None:
        """Until the group may admit a turn again: its reset, the end of one of its turns,
        or a start leaving the minute's window.

        Cancellation: safe."""
        deadline, starts = math.inf, self._starts
        if self.parked():
            deadline = min(self._reopens, trio.current_time() + WALL_CHECK)
        elif self.turns_per_minute is not None and starts and len(starts) >= self.turns_per_minute:
            deadline = starts[0] + MINUTE
        if self._changed is None:
            self._changed = trio.Event()
        with trio.move_on_at(deadline):
            await self._changed.wait()

    def usage_limit(self, resets_at: float | None, agent: str) -> bool:
        """Agent ``agent`` met the credential's usage limit: the group parks until
        ``resets_at`` (epoch seconds; None, or a time already past: `UNKNOWN_RESET` from
        now). Whether that parked it (or parked it longer)."""
        now = time.time()
        # A reset said past still refused (the API's clock behind this one's as the agents
        # resume at the reset, a time the CLI cut to the minute) is no reset to wait for.
        until = now + UNKNOWN_RESET if resets_at is None or resets_at <= now else resets_at
        if not self._park(until, f"usage limit met by agent {agent!r}"):
            return False
        logger.warning(
            "credential %s: usage limit met by agent %r; its %d agent(s) parked until %s",
            self.label,
            agent,
            len(self.members),
            clock_time(until),
            extra={"agent": agent},
        )
        return True

    def _park(self, until: float, reason: str) -> bool:
        now = time.time()
        if until <= now or (self.parked() and until <= (self.parked_until or 0.0)):
            return False
        self.parked_until, self.park_reason = until, reason
        self._held_until = max(self._held_until, until)
        self._reopens = trio.current_time() + (until - now)
        self._signal()
        return True

    def expire(self, message: str, agent: str) -> None:
        """Agent ``agent``'s login expired: every agent of it that halts on an expiry halts
        until the login works again (`renewed`)."""
        where = self.identity.login_file
        fix = f"log the CLI in again (it rewrites {where})" if where else "renew the login"
        logger.warning(
            "credential %s: the login expired (agent %r: %s); its agents halt: %s",
            self.label,
            agent,
            redact(message),
            fix,
            extra={"agent": agent},
        )
        self._halt(f"{EXPIRED}: {self.label}: {fix}, or unhalt an agent to try it", time.time())

    def _halt(self, reason: str, since: float) -> None:
        self.expired = self.halt_reason = reason
        self.halted_since = since
        self._login_seen = _login_stat(self.identity.login_file)
        for member, halts, _ in self.members.values():
            if halts:
                member.hold(reason)

    def stored(self) -> StoredCredential:
        """What holds the group now, as a `CredentialStore` keeps it."""
        parked, expired = self.parked(), self.expired is not None
        return StoredCredential(
            key=self.identity.key,
            label=self.label,
            parked_until=self.parked_until if parked else None,
            park_reason=self.park_reason if parked else None,
            halt_reason=self.halt_reason if expired else None,
            halted_since=self.halted_since if expired else None,
        )

    def adopt(self, stored: StoredCredential) -> bool:
        """Hold the group as ``stored`` says (another program's limit or expiry, or an
        earlier program's): a park that ends later than any it held, a halt other than
        the one it holds (what it stored itself is not taken again: a park it saw end, or
        a halt an agent was unhalted from since). Whether it took either."""
        took = False
        until = stored.parked_until
        if (
            until is not None
            and until > self._held_until
            and self._park(until, stored.park_reason or "usage limit")
        ):
            logger.warning(
                "credential %s: parked until %s, as the store says (%s)",
                self.label,
                clock_time(until),
                self.park_reason,
            )
            took = True
        since = stored.halted_since
        if stored.halt_reason is not None and since is not None and since != self.halted_since:
            logger.warning(
                "credential %s: halted, as the store says (%s)", self.label, stored.halt_reason
            )
            self._halt(stored.halt_reason, since)
            took = True
        return took

    def halt_is_stale(self, stored: StoredCredential) -> bool:
        """Whether the login file of ``stored``'s halt changed since it was stored (a new
        login, made while no program held the agents): the halt is over."""
        login, since = self.identity.login_file, stored.halted_since
        if login is None or since is None or stored.halt_reason is None:
            return False
        try:
            return os.stat(login).st_mtime > since
        except OSError:
            return False

    def check_login(self) -> bool:
        """While expired: the agents go on once the login file changed (a new login).
        Whether they did."""
        if self.expired is None or self.identity.login_file is None:
            return False
        return _login_stat(self.identity.login_file) != self._login_seen and self.renewed()

    def renewed(self) -> bool:
        """The login works again (a turn on it was answered, or its file changed): the
        agents its expiry halted go on. Whether it was expired."""
        if self.expired is None:
            return False
        self.expired = self.halt_reason = self.halted_since = None
        logger.info("credential %s: the login works again; its agents go on", self.label)
        for member, _, _ in self.members.values():
            member.release(EXPIRED)
        return True

    def _signal(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None


@attrs.define(eq=False)
class CredentialGroups:
    """The credential groups of one runtime, by key; a group lives while it has agents."""

    _groups: dict[str, CredentialGroup] = attrs.field(factory=dict)

    def join(
        self,
        identity: Identity,
        name: str,
        member: Member,
        *,
        halts: bool,
        parks: bool,
        max_turns: int | None,
        turns_per_minute: int | None,
    ) -> CredentialGroup:
        """Agent ``name`` joins its credential's group, with the group's admission limits
        (the first agent to give one sets it; another value is `InvalidOptions`), halted
        with the others if its login is expired."""
        group = self._groups.get(identity.key)
        if group is None:
            group = CredentialGroup(identity)
        for key, given, held in (
            ("credential_turns", max_turns, group.max_turns),
            ("credential_turns_per_minute", turns_per_minute, group.turns_per_minute),
        ):
            if given is not None and held is not None and given != held:
                why = (
                    f"the agents of credential {identity.label} are limited to {held} "
                    "already; give the same value, or none"
                )
                raise InvalidOptions(key, given, why)
        group.max_turns = group.max_turns if max_turns is None else max_turns
        if turns_per_minute is not None:
            group.turns_per_minute = turns_per_minute
        group.members[name] = (member, halts, parks)
        if halts and group.halt_reason is not None:  # its login expired already
            member.hold(group.halt_reason)
        self._groups[identity.key] = group
        return group

    def leave(self, group: CredentialGroup, name: str) -> None:
        group.members.pop(name, None)
        if not group.members and self._groups.get(group.identity.key) is group:
            del self._groups[group.identity.key]


def holding(credentials: Sequence[StoredCredential], now: float) -> list[StoredCredential]:
    """The stored credentials that hold their agents at ``now`` (epoch seconds): parked
    until a reset still to come, or halted by an expired login."""
    return [c for c in credentials if c.parked_at(now) or c.halt_reason is not None]


def held_by(credential: StoredCredential, *, halt: bool) -> list[str]:
    """The agents of ``credential`` its halt (``halt``), else its park, holds: not those
    whose policy for it is ``"fail"`` (``ignore_halt``, ``ignore_park``)."""
    ignored = credential.ignore_halt if halt else credential.ignore_park
    return [name for name in credential.agents if name not in ignored]


def held_agents(credentials: Sequence[StoredCredential], now: float) -> dict[str, StoredCredential]:
    """What holds each agent name at ``now``: its credential's park or halt, as stored,
    without the one the agent ignores (``ignore_halt``, ``ignore_park``: its policy is
    ``"fail"``); an agent neither holds is not there."""
    held: dict[str, StoredCredential] = {}
    for credential in holding(credentials, now):
        own = CredentialGroup.owner_of(credential.key)
        for name in (*credential.agents, *((own,) if own is not None else ())):
            mine = credential
            if name in credential.ignore_halt:
                mine = attrs.evolve(mine, halt_reason=None, halted_since=None)
            if name in credential.ignore_park:
                mine = attrs.evolve(mine, parked_until=None, park_reason=None)
            if holding([mine], now):
                held[name] = mine
    return held

"""``agentrt doctor``: can agents run here? Binaries, versions, credentials under each env
policy, the session store, process limits, telemetry; ``--smoke`` runs one real turn.

Only names and paths are ever printed: never the value of a credential.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import logging
import os
import resource
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from .._agent import Agent
from .._backends import backend_info, backend_names, resolve_backend
from .._credentials import clock_time, held_by, holding
from .._driver import _cgroup
from .._env import ENV_POLICIES, EnvPolicy, child_env
from .._env import _log as env_log
from .._errors import AgentRTError, InvalidOptions, StoreError, TurnFailed
from .._mode import capabilities
from .._pinned import PinnedClaude, pinned_claude
from .._records import StoredCredential
from .._runtime import open_runtime
from .._stores._memory import MemoryStore
from .._stores._sqlite import SQLiteStore, missing_directory
from .._telemetry import _otel
from .._versions import ask_version
from ..backend import AppToolsBackend, Backend, Credential, PortableBackend
from ._agent import footer
from ._args import DEFAULT_BACKEND
from ._fixes import turn_failed
from ._render import Output
from ._store import store_path

Status = Literal["ok", "warn", "fail", "skip"]

# Measured with claude 2.1.332 on Linux: one turn is a ~210 MB process with 9 threads (its
# tools add more), and holds about 8 file descriptors in the runtime's own process.
_MEMORY_PER_TURN = 250 * 1024 * 1024
_TASKS_PER_TURN = 16
_FDS_PER_TURN = 16
_SMOKE_BOUND = 180.0
_SMOKE_PROMPT = "Reply with the single word: pong"


@attrs.frozen
class Check:
    area: str
    name: str
    status: Status
    detail: str
    fix: str | None = None


class _NotStripped(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


def _child_environ(policy: EnvPolicy, environ: Mapping[str, str]) -> Mapping[str, str]:
    # The policy's own warning about stripped credentials is what the doctor reports anyway.
    quiet = _NotStripped()
    env_log.addFilter(quiet)
    try:
        return child_env(policy, environ=environ)
    finally:
        env_log.removeFilter(quiet)


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or Path.home())


def _shown(path: Path, environ: Mapping[str, str]) -> str:
    home = str(_home(environ))
    text = str(path)
    return "~" + text[len(home) :] if home != "/" and text.startswith(home + "/") else text


def credentials(
    backend: Backend, policy: EnvPolicy, environ: Mapping[str, str]
) -> Sequence[Credential] | None:
    """What the CLI would authenticate with under ``policy``, in its order of preference, as
    the backend declares it (None: it does not say), paths under the user's home as ``~``."""
    found = backend_info(backend).credentials(_child_environ(policy, environ))
    if found is None:
        return None
    home = str(_home(environ))
    shown = "~" if home != "/" else home
    return [attrs.evolve(c, label=c.label.replace(f"{home}/", f"{shown}/")) for c in found]


def _auth_checks(name: str, backend: Backend, environ: Mapping[str, str]) -> list[Check]:
    by_policy = {policy: credentials(backend, policy, environ) for policy in ENV_POLICIES}
    if any(found is None for found in by_policy.values()):
        return [Check(name, "auth", "skip", "the backend does not say how its CLI logs in")]
    found_by: dict[EnvPolicy, Sequence[Credential]] = {
        policy: found or () for policy, found in by_policy.items()
    }
    checks: list[Check] = []
    login = backend_info(backend).login or f"log the {name} CLI in"
    if not any(found_by.values()):
        checks.append(Check(name, "auth", "fail", "no credential under any env policy", login))
        return checks
    stripped = sorted(
        {c.env_var for c in found_by["inherit"] if c.env_var}
        - {c.env_var for c in found_by["profile"] if c.env_var}
    )
    for policy, found in found_by.items():
        if found:
            first = found[0]
            detail = f"{first.label} ({first.note})" if first.note else first.label
            others = [c.label for c in found[1:]]
            if others:
                detail += f"; also {', '.join(others)}"
            if policy != "inherit" and stripped:
                detail += f"; {', '.join(stripped)} not passed"
            checks.append(Check(name, f"auth ({policy})", "ok", detail))
        else:
            why = f"this policy drops {', '.join(stripped)}" if stripped else "nothing is passed"
            checks.append(
                Check(
                    name,
                    f"auth ({policy})",
                    "warn",
                    f"agents with env_policy={policy!r} cannot authenticate: {why}",
                    f"{login}; or give the agent its credential with env={{...}}",
                )
            )
    return checks


def _pinned(backend: str, environ: Mapping[str, str]) -> PinnedClaude | None:
    # Agents run $CLAUDE_CLI or `claude` on PATH: the pinned one only where it is pointed at.
    return pinned_claude() if backend == "claude" and not environ.get("CLAUDE_CLI") else None


def _install_fix(name: str, backend: Backend | None, environ: Mapping[str, str]) -> str:
    pinned = _pinned(name, environ)
    if pinned is None:
        install = None if backend is None else backend_info(backend).install
        return install or f"install the {name} CLI, or give agents its path with binary=PATH"
    return (
        f"set CLAUDE_CLI={pinned.path} for agents to use the pinned claude (the fake-API "
        "runner, python -m agentrt.testing.fake_anthropic, uses it by itself)"
    )


def _find_binary(binary: str) -> str | None:
    if os.sep in binary:
        return binary if os.access(binary, os.X_OK) and os.path.isfile(binary) else None
    return shutil.which(binary)


def _newer(a: str, b: str) -> bool:
    return tuple(map(int, a.split("."))) > tuple(map(int, b.split(".")))


async def backend_checks(name: str, *, explicit: bool, environ: Mapping[str, str]) -> list[Check]:
    """Binary, version and credentials of one backend."""
    try:
        backend = resolve_backend(name)
    except AgentRTError as exc:
        return [Check(name, "backend", "fail", str(exc), "reinstall agentrt (pip install -e .)")]
    try:
        options = backend.parse_options({})
    except InvalidOptions as exc:
        # A backend with no default for an option every agent gives (acp: the agent's
        # command) has nothing to check until that option is set.
        status: Status = "fail" if explicit else "skip"
        fix = backend_info(backend).install or f"give {name} agents the option {exc.key!r}"
        return [Check(name, "backend", status, str(exc), fix)]
    binary = str(backend.version_command(options).argv[0])
    path = _find_binary(binary)
    if path is None:
        # Without --backend, a CLI that is not installed is not a problem by itself.
        status = "fail" if explicit else "skip"
        detail, fix = f"{binary!r} not found on PATH", _install_fix(name, backend, environ)
        pinned = _pinned(name, environ)
        if pinned is not None:
            detail += f"; found {pinned}, which `make claude-cli` installed"
        return [Check(name, "binary", status, detail, fix)]
    checks = [Check(name, "binary", "ok", path)]
    written_for = backend_info(backend).written_for
    answer = await ask_version(backend.version_command(options))
    found = answer.version
    if found is None:
        checks.append(Check(name, "version", "fail", answer.text, f"check that {path} runs"))
    elif written_for is None or found == written_for:
        checks.append(
            Check(name, "version", "ok", f"{found} (the version agentrt was written for)")
        )
    else:
        side = "newer" if _newer(found, written_for) else "older"
        checks.append(
            Check(
                name,
                "version",
                "warn",
                f"{found} is {side} than {written_for}, the version agentrt's {name} backend "
                "was written for",
                "`agentrt doctor --smoke` runs a real turn to confirm it works",
            )
        )
    checks.append(Check(name, "supports", "ok", supported(backend, options)))
    return checks + _auth_checks(name, backend, environ)


def supported(backend: Backend, options: Any) -> str:
    """What the backend can do with its default options, as it declares it."""
    caps = capabilities(backend, options)
    features = (
        ("per turn", not caps.in_process),
        ("warm", caps.live),
        ("approvals", caps.approvals),
        ("hooks", caps.hooks),
        ("app tools", isinstance(backend, AppToolsBackend)),
        ("portable sessions", isinstance(backend, PortableBackend)),
    )
    text = ", ".join(f"{label} {'yes' if has else 'no'}" for label, has in features)
    if caps.not_live:
        text += f" (no live process: {caps.not_live})"
    if caps.version_probe:
        text += "; its version is asked with version_command"
    return text


def _store_check(status: Status, detail: str, fix: str | None = None) -> Check:
    return Check("store", "file", status, detail, fix)


def _store_verdict(path: Path) -> Check | Path:
    """The verdict on ``path`` without opening it, or the file to open: ``path`` itself, or
    for a store not made yet a scratch file in its directory."""
    if path.exists():
        if os.access(path, os.R_OK | os.W_OK):
            return path
        return _store_check(
            "fail", f"{path} is not readable and writable", "fix its permissions, or use --store"
        )
    missing = missing_directory(path)
    if missing is not None:
        return _store_check(
            "fail",
            str(missing),
            "create that directory, or pass --store (or set AGENTRT_STORE) with a file in an "
            "existing one",
        )
    parent = path.parent
    if parent.is_dir():
        return parent / f".agentrt-doctor-{os.getpid()}.sqlite3"
    # The default location, whose directories are made on first use.
    while not parent.exists():
        parent = parent.parent
    if os.access(parent, os.W_OK | os.X_OK):
        return _store_check("ok", f"{path} (created on first use)")
    return _store_check(
        "fail",
        f"{path} cannot be created ({parent} is not writable)",
        "set AGENTRT_STORE or pass --store with a writable path",
    )


def _remove_scratch(scratch: Path) -> None:
    for leftover in (scratch, Path(f"{scratch}-wal"), Path(f"{scratch}-shm")):
        leftover.unlink(missing_ok=True)


async def store_checks(path: Path) -> list[Check]:
    """The session store, opened as ``ask`` opens it (a store not made yet is tried on a
    scratch file beside it, removed afterwards, so the check creates nothing)."""
    found = _store_verdict(path)
    if isinstance(found, Check):
        return [found]
    try:
        async with SQLiteStore(found) as store:
            count = len(await store.list())
            held = holding(await store.credentials(), time.time())
    except StoreError as exc:
        if found == path:
            return [_store_check("fail", str(exc), "move the file aside, or use --store")]
        return [
            _store_check(
                "fail",
                f"{path} cannot be created: {exc.why}",
                "set AGENTRT_STORE or pass --store with a path where files can be made",
            )
        ]
    finally:
        if found != path:
            _remove_scratch(found)
    if found != path:
        return [_store_check("ok", f"{path} (created on first use)")]
    checks = [_store_check("ok", f"{path} ({count} session{'s' if count != 1 else ''})")]
    return checks + [credential_check(credential) for credential in held]


def credential_check(credential: StoredCredential) -> Check:
    """A credential the store says holds its agents: parked at a usage limit (a warning:
    it ends by itself at the reset) or halted by an expired login (a failure: someone has
    to log in again). Its agents: those the hold holds (not an agent whose policy is
    ``"fail"``)."""
    name = f"credential {credential.label}"

    def held(*, halt: bool) -> str:
        return ", ".join(map(repr, held_by(credential, halt=halt))) or "none stored"

    if credential.halt_reason is not None:
        since = (
            ""
            if credential.halted_since is None
            else f" since {clock_time(credential.halted_since)}"
        )
        return Check(
            "store",
            name,
            "fail",
            f"login expired{since}; its agents are halted ({held(halt=True)})",
            "log the CLI in again: the agents go on once the login file changes (or a turn "
            f"on it is answered: unhalt(name) on one agent tries it, `agentrt unhalt "
            f"{shlex.quote(credential.label)}` all of them)",
        )
    assert credential.parked_until is not None
    return Check(
        "store",
        name,
        "warn",
        f"parked until {clock_time(credential.parked_until)} by a usage limit "
        f"({credential.park_reason}); its agents wait ({held(halt=False)})",
        "wait: the agents go on by themselves at the reset (or give them another "
        "credential: the `credential` option, another login or API key)",
    )


def _limit(which: int) -> int | None:
    soft, _hard = resource.getrlimit(which)
    return None if soft == resource.RLIM_INFINITY else soft


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def limit_checks() -> list[Check]:
    """The platform, and how many turns at once these limits leave room for."""
    checks: list[Check] = []
    if sys.platform != "linux" or not os.path.isdir("/proc/self"):
        checks.append(
            Check(
                "system",
                "platform",
                "warn",
                f"{sys.platform}: no /proc, so process trees are cleaned up by process group only",
                "run agents on Linux for the full guarantee",
            )
        )
    nproc, nofile, memory = (
        _limit(resource.RLIMIT_NPROC),
        _limit(resource.RLIMIT_NOFILE),
        _available_memory(),
    )
    fits = [
        n
        for n in (
            None if memory is None else memory // _MEMORY_PER_TURN,
            None if nproc is None else nproc // _TASKS_PER_TURN,
            None if nofile is None else nofile // _FDS_PER_TURN,
        )
        if n is not None
    ]
    room = min(fits) if fits else None
    shown = ", ".join(
        f"{label} {'unlimited' if value is None else value}"
        for label, value in (("ulimit -u", nproc), ("ulimit -n", nofile))
    )
    if memory is not None:
        shown += f", {memory / 2**30:.1f} GiB available"
    if room is not None and room < 2:
        checks.append(
            Check(
                "system",
                "limits",
                "warn",
                f"{shown}: room for {room} turn(s) at once",
                "raise `ulimit -n` / `ulimit -u` or free memory; keep max_processes at 1",
            )
        )
    else:
        hint = (
            ""
            if room is None
            else f"; about {room} turns fit at once: open_runtime(max_processes<={room})"
        )
        checks.append(Check("system", "limits", "ok", shown + hint))
    return checks


def import_check(cwd: Path) -> Check | None:
    """A warning when a Python started in ``cwd`` (``python -c``, ``python -m``, a script
    there) would import ``cwd/agentrt`` as an empty namespace package: a folder without
    ``__init__.py``, such as the clone of agentrt's repository seen from its parent, found
    before an installed agentrt (an editable install's finder comes after the folders)."""
    spec = importlib.machinery.PathFinder.find_spec("agentrt", [str(cwd), *sys.path])
    if spec is None or spec.origin is not None:  # no such folder, or a regular package
        return None
    return Check(
        "agentrt",
        "import",
        "warn",
        f"Python started in {cwd} imports its folder agentrt/ (no __init__.py: a clone of "
        "agentrt's repository?) as an empty namespace package, not agentrt",
        "run Python from inside the clone (cd agentrt) or from any directory but its parent",
    )


def telemetry_check() -> Check:
    """Whether agents' spans and metrics go anywhere: the OpenTelemetry API, and an SDK's
    tracer and meter providers configured in this process (by ``opentelemetry-instrument``
    or the OTEL_PYTHON_*_PROVIDER variables; a program configures its own)."""
    found = _otel.status()
    if found.api_version is None:
        return Check(
            "telemetry",
            "opentelemetry",
            "skip",
            "opentelemetry-api is not installed: no spans or metrics",
            "pip install 'agentrt[otel]' and configure an SDK",
        )
    configured = [
        f"{what} {provider}"
        for what, provider in (
            ("traces:", found.tracer_provider),
            ("metrics:", found.meter_provider),
        )
        if provider is not None
    ]
    if not configured:
        return Check(
            "telemetry",
            "opentelemetry",
            "skip",
            f"opentelemetry-api {found.api_version}, but no SDK tracer or meter provider is "
            "configured: spans and metrics are dropped (at no cost)",
            "configure the SDK in your program (docs/howto/telemetry.md), or run under "
            "opentelemetry-instrument",
        )
    return Check(
        "telemetry",
        "opentelemetry",
        "ok",
        f"active (opentelemetry-api {found.api_version}); {'; '.join(configured)}",
    )


async def smoke_check(name: str) -> Check:
    """One real turn, in a scratch directory, with no tools."""
    with tempfile.TemporaryDirectory(prefix="agentrt-doctor-") as scratch:
        async with open_runtime(store=MemoryStore()) as rt:
            await rt.start_agent(
                Agent,
                name=f"doctor-{name}",
                backend=name,
                cwd=scratch,
                watchdog=_SMOKE_BOUND,
                **backend_info(resolve_backend(name)).quiet_options,
            )
            try:
                response = await rt.ask(f"doctor-{name}", _SMOKE_PROMPT)
            except TurnFailed as exc:
                error = turn_failed(name, exc)
                return Check(name, "smoke turn", "fail", error.message, error.fix)
    reply = " ".join(response.text.split())[:60]
    return Check(name, "smoke turn", "ok", f"answered {reply!r} ({footer(response)})")


_MARK = {"ok": "ok", "warn": "WARN", "fail": "FAIL", "skip": "--"}
_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def _print(checks: Sequence[Check], out: Output, healthy: bool) -> None:
    if out.fancy:
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, show_header=False, pad_edge=False)
        for check in checks:
            detail = Text(check.detail)
            if check.fix:
                detail.append(f"\nfix: {check.fix}", style="italic")
            mark = Text(_MARK[check.status], style=_STYLE[check.status])
            table.add_row(mark, Text(f"{check.area} {check.name}", style="bold"), detail)
        out.console.print(table)
    else:
        width = max(len(f"{c.area} {c.name}") for c in checks)
        for check in checks:
            label = f"{check.area} {check.name}".ljust(width)
            out.say(f"[{_MARK[check.status]:>4}] {label}  {check.detail}")
            if check.fix:
                out.say(f"       {' ' * width}  fix: {check.fix}")
    out.say()
    out.say("healthy" if healthy else "NOT healthy: fix the problems above", style="bold")


async def run_doctor(args: argparse.Namespace, out: Output) -> int:
    """Exit 0 when healthy: no check failed, and at least one backend is installed."""
    environ = dict(os.environ)
    every = backend_names()
    names = [args.backend] if args.backend else list(every)
    checks: list[Check] = []
    installed: list[str] = []
    for name in names:
        found = await backend_checks(name, explicit=bool(args.backend), environ=environ)
        checks += found
        if found[0].status == "ok":
            installed.append(name)
    ready = [n for n in installed if not any(c.area == n and c.status == "fail" for c in checks)]
    if ready and not args.backend:
        # Unasked for, a backend that cannot run is a warning as long as another one can.
        checks = [
            attrs.evolve(c, status="warn") if c.area in every and c.status == "fail" else c
            for c in checks
        ]
    if not installed and not args.backend:
        checks.append(
            Check(
                "agentrt",
                "backends",
                "fail",
                "no supported CLI is installed",
                _install_fix(DEFAULT_BACKEND, resolve_backend(DEFAULT_BACKEND), environ),
            )
        )
    checks += await store_checks(store_path(args))
    checks += limit_checks()
    checks.append(Check("system", "process isolation", "ok", await _cgroup.probe()))
    checks.append(telemetry_check())
    shadowed = import_check(Path.cwd())
    if shadowed is not None:
        checks.append(shadowed)
    if args.smoke:
        ready = [
            n for n in installed if not any(c.area == n and c.status == "fail" for c in checks)
        ]
        if not ready:
            checks.append(
                Check(
                    "agentrt",
                    "smoke turn",
                    "fail",
                    "no backend is ready for a turn",
                    "fix the problems above first",
                )
            )
        for name in ready:
            checks.append(await smoke_check(name))
    healthy = not any(c.status == "fail" for c in checks)
    if out.json_mode:
        out.data({"healthy": healthy, "checks": [attrs.asdict(c) for c in checks]})
    else:
        _print(checks, out, healthy)
    return 0 if healthy else 1

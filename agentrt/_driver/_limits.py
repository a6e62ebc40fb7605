"""Resource limits on a turn's processes: what `Limits` asks of the turn's cgroup (cgroup v2
``memory.max``, ``pids.max``, ``cpu.max``), and how many of its processes the kernel's OOM
killer took (``memory.events``).

A limited turn's cgroup is killed as one when it runs out of memory (``memory.oom.group``):
a CLI whose tool the kernel killed would otherwise go on with half a tree. Swap is off for
it (``memory.swap.max`` 0, where the kernel has swap accounting), so the limit ends the turn
instead of moving its excess to disk, where it would slow the whole machine down.
"""

from __future__ import annotations

import re

import attrs

from .._errors import InvalidOptions
from .._util import finite_number

__all__ = ["Limits", "apply_limits", "oom_kills"]

# cpu.max's period (the kernel's default, in microseconds); a quota is at least 1 ms.
_CPU_PERIOD = 100_000
_MIN_CPUS = 0.01
# Less than this cannot even start a CLI: a typo ("512" for "512M") said at once.
_MIN_MEMORY = 1024 * 1024
# The most the kernel's files take (Linux, 64 bits): pids.max is below PID_MAX_LIMIT + 1 and
# cpu.max's quota at most 2**44 - 1 microseconds (a larger value is refused as each turn
# starts); memory.max is read into 64 bits without an overflow check, so a larger size
# would wrap around to a small limit. Refused when the Limits is made instead.
_MAX_TASKS = 4 * 1024 * 1024
_MAX_CPUS = ((1 << 44) - 1) / _CPU_PERIOD
_MAX_MEMORY = (1 << 63) - 1
_SIZE = re.compile(r"(\d+(?:\.\d+)?)([KMGT]?)(?:i?B)?", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def _memory(value: object) -> int | None:
    if value is None:
        return None
    why = (
        'must be bytes (an int) or a size such as "512M" or "2G" (binary units), at least 1M '
        "and below 8 EiB"
    )
    size: int | float
    if isinstance(value, str):
        found = _SIZE.fullmatch(value.strip())
        if found is None:
            raise InvalidOptions("limits.memory", value, why)
        size = float(found[1]) * _UNITS[found[2].upper()]  # inf past a float's range
    elif isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        raise InvalidOptions("limits.memory", value, why)
    if not _MIN_MEMORY <= size <= _MAX_MEMORY:
        raise InvalidOptions("limits.memory", value, why)
    return int(size)


def _tasks(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_TASKS:
        raise InvalidOptions(
            "limits.tasks",
            value,
            f"must be an int from 1 to {_MAX_TASKS} (processes and threads; the kernel's "
            "most), or None",
        )
    return value


def _cpus(value: object) -> float | None:
    if value is None:
        return None
    if not finite_number(value) or not _MIN_CPUS <= value <= _MAX_CPUS:
        raise InvalidOptions(
            "limits.cpus",
            value,
            f"must be a number of cores from {_MIN_CPUS} to {int(_MAX_CPUS)} (1.5: one and a "
            "half; the kernel's most)",
        )
    return float(value)


def _best_effort(value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidOptions("limits.best_effort", value, "must be True or False")
    return value


@attrs.frozen
class Limits:
    """Limits on the processes of each of an agent's turns (and of its warm CLI): the
    ``limits`` option of `start_agent`, e.g. ``Limits(memory="2G", tasks=512, cpus=1.5)``.

    ``memory``: bytes, or a size with a binary unit (``"512M"``, ``"2G"``); a turn whose tree
    passes it is killed by the kernel and ends ``oom_killed``. ``tasks``: processes and
    threads at once (a fork bomb is refused past it). ``cpus``: cores' worth of CPU time
    (``1.5``). None leaves that resource unlimited.

    They need cgroup v2 with the controllers the runtime can enable for its turns; where it
    cannot, `start_agent` refuses the agent with `InvalidOptions` naming why, unless
    ``best_effort=True`` (then it logs a warning and runs the agent's turns unlimited).
    Bad values are refused when the Limits is made."""

    memory: int | None = attrs.field(default=None, converter=_memory)
    tasks: int | None = attrs.field(default=None, converter=_tasks)
    cpus: float | None = attrs.field(default=None, converter=_cpus)
    best_effort: bool = attrs.field(default=False, kw_only=True, converter=_best_effort)

    def controllers(self) -> frozenset[str]:
        """The cgroup v2 controllers these limits need."""
        wanted = {"memory": self.memory, "pids": self.tasks, "cpu": self.cpus}
        return frozenset(name for name, limit in wanted.items() if limit is not None)

    def files(self) -> dict[str, str]:
        """What to write into a turn's cgroup, by file name (swap beside memory where the
        kernel accounts it; elsewhere that file is not there, and not written)."""
        files: dict[str, str] = {}
        if self.memory is not None:
            files["memory.max"] = str(self.memory)
            files["memory.swap.max"] = "0"
            files["memory.oom.group"] = "1"
        if self.tasks is not None:
            files["pids.max"] = str(self.tasks)
        if self.cpus is not None:
            quota = max(round(self.cpus * _CPU_PERIOD), 1000)
            files["cpu.max"] = f"{quota} {_CPU_PERIOD}"
        return files


def apply_limits(path: str, limits: Limits) -> None:
    """Write ``limits`` into the cgroup at ``path`` (before anything runs in it)."""
    for name, value in limits.files().items():
        try:
            with open(f"{path}/{name}", "w") as f:
                f.write(value)
        except FileNotFoundError:
            if name != "memory.swap.max":  # no swap accounting: nothing to turn off
                raise


def oom_kills(path: str) -> int:
    """How many processes of the cgroup at ``path`` the OOM killer killed (0 without the
    memory controller, or once the cgroup is gone)."""
    try:
        with open(f"{path}/memory.events") as f:
            events = f.read()
    except OSError:
        return 0
    for line in events.splitlines():
        key, _, count = line.partition(" ")
        if key == "oom_kill":
            return int(count)
    return 0

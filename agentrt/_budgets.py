"""Budgets: a cost limit (USD) and a token limit for an agent, a supervisor or a whole
runtime, counted from the totals the store keeps per agent name (so across restarts,
resumes and hosts) plus what each turn since adds. A turn is not started past one; a
running turn gets what is left as the CLI's own per-run limit where that holds, else as the
bound of the cost its stream reports (an estimate, `agentrt._turn.Turn.cost_limit`)."""

from __future__ import annotations

import secrets

import attrs

from ._budget_spending import counted_tokens
from ._errors import BudgetExceeded
from ._events import Usage
from ._records import SessionRecord, StoredBudget


@attrs.define(eq=False)
class Budget:
    """One limit and the spending of the agent names it covers: each name's stored totals
    when it started (replaced, not added, when the name starts again) plus its turns since."""

    scope: str  # "agent 'x'", "supervisor", "runtime", as errors name it
    usd: float | None
    tokens: int | None
    _spent: dict[str, tuple[float, int]] = attrs.field(factory=dict, init=False)
    # Stored with each name it covers, so that `agentrt status` adds up the same names.
    key: str = attrs.field(factory=lambda: secrets.token_hex(8), init=False)

    @property
    def limited(self) -> bool:
        return self.usd is not None or self.tokens is not None

    @property
    def spent_usd(self) -> float:
        return sum(usd for usd, _ in self._spent.values())

    @property
    def spent_tokens(self) -> int:
        return sum(tokens for _, tokens in self._spent.values())

    def enter(self, name: str, record: SessionRecord | None) -> None:
        if record is None:
            self._spent[name] = (0.0, 0)
        else:
            self._spent[name] = (record.cost_usd, counted_tokens(record.usage))

    def charge(self, name: str, cost_usd: float | None, usage: Usage | None) -> None:
        usd, tokens = self._spent.get(name, (0.0, 0))
        self._spent[name] = (usd + (cost_usd or 0.0), tokens + counted_tokens(usage))

    def exceeded(self, name: str) -> BudgetExceeded | None:
        if self.usd is not None and (spent := self.spent_usd) >= self.usd:
            return BudgetExceeded(name, self.scope, "usd", spent, self.usd)
        if self.tokens is not None and (used := self.spent_tokens) >= self.tokens:
            return BudgetExceeded(name, self.scope, "tokens", used, self.tokens)
        return None

    def stored(self) -> StoredBudget:
        return StoredBudget(scope=self.scope, key=self.key, usd=self.usd, tokens=self.tokens)


@attrs.frozen
class Budgets:
    """The budgets an agent's turns count against: its own, its supervisors', the
    runtime's (those without a limit are left out)."""

    chain: tuple[Budget, ...]

    def enter(self, name: str, record: SessionRecord | None) -> None:
        for budget in self.chain:
            budget.enter(name, record)

    def charge(self, name: str, cost_usd: float | None, usage: Usage | None) -> None:
        for budget in self.chain:
            budget.charge(name, cost_usd, usage)

    def exceeded(self, name: str) -> BudgetExceeded | None:
        """The first budget spent, or None."""
        for budget in self.chain:
            if (error := budget.exceeded(name)) is not None:
                return error
        return None

    def left_usd(self) -> float | None:
        """The least USD any budget has left (None: no USD limit)."""
        if not self.chain:  # most agents: asked each turn, so no list made to say so
            return None
        left = [b.usd - b.spent_usd for b in self.chain if b.usd is not None]
        # Rounded: the CLI is given it as a figure, without the float sums' noise.
        return round(max(0.0, min(left)), 10) if left else None

    def stored(self) -> tuple[StoredBudget, ...]:
        """What `start_agent` stores of them, innermost first."""
        return tuple(budget.stored() for budget in self.chain)

    def left_tokens(self) -> int | None:
        left = [b.tokens - b.spent_tokens for b in self.chain if b.tokens is not None]
        return max(0, min(left)) if left else None


NO_BUDGETS = Budgets(())

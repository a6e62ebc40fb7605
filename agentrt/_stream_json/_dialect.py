"""What one stream-json CLI says in its own way (the init frame's field names, the wording
of its failures, its prices): `StreamJsonDialect`, given to `StreamJsonTranslator`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .._events import StopReason, Usage


def _no_session_marker(text: str) -> str | None:
    return None


def _no_fatal_retry(status: int | None, error: str | None) -> bool:
    return False


def _no_result_fields(frame: Mapping[str, Any]) -> StopReason | None:
    return None


def _no_reset(text: str) -> float | None:
    return None


def _no_price(model: str | None, usage: Usage) -> float | None:
    return None


@attrs.frozen
class StreamJsonDialect:
    """What one CLI's stream-json says in its own way, for `StreamJsonTranslator`.

    ``version_field`` and ``permission_mode_field``:
    the ``system/init`` fields that carry its version (`InitEvent.cli_version`) and
    permission mode. ``classify(status, text)``: the stop reason of a failure with HTTP
    ``status`` (None if unknown) and message ``text``, or None; ``status_message(status)``:
    what a failed call's status says when the CLI says nothing; ``lost_session_id(text)``:
    the session id a "no such conversation" message names; ``is_fatal_retry(status,
    error)``: whether a ``system/api_retry`` frame is one the CLI would retry in vain (the
    turn then fails at once); ``classify_result(frame)``: the stop reason an error result's
    own fields name (a field the CLI sets for the purpose is sturdier than its wording),
    tried before ``classify``. ``retryable``: the stop reasons a caller may retry.
    ``price(model, usage)``: what one model call with ``usage`` costs at the model's list
    price (an estimate; None: no price known), for the cost of a turn that ends before
    the CLI reports it. ``running_usage(result)``: for a result whose ``usage`` does not
    count the turn, the session's running usage it reports elsewhere (Claude's
    ``modelUsage`` of ``error_max_budget_usd``), else None; the turn's usage is then that
    minus the translator's usage baseline. ``resets_at(text)``: when a usage limit the CLI
    reported in ``text`` resets (epoch seconds), or None."""

    version_field: str
    permission_mode_field: str
    classify: Callable[[int | None, str], StopReason | None]
    status_message: Callable[[int], str]
    retryable: frozenset[StopReason]
    lost_session_id: Callable[[str], str | None] = _no_session_marker
    is_fatal_retry: Callable[[int | None, str | None], bool] = _no_fatal_retry
    classify_result: Callable[[Mapping[str, Any]], StopReason | None] = _no_result_fields
    price: Callable[[str | None, Usage], float | None] = _no_price
    running_usage: Callable[[Mapping[str, Any]], Usage | None] | None = None
    resets_at: Callable[[str], float | None] = _no_reset

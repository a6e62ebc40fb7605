"""The fake model's replies that more than one CLI's conversation tests use."""

from __future__ import annotations

from agentrt.testing import AnthropicHang, AnthropicReply, AnthropicText, RecordedRequest


def echo(request: RecordedRequest) -> AnthropicReply:
    """Says what it was asked."""
    return AnthropicText(f"said {request.last_user_text()!r}")


def echo_or_hang(request: RecordedRequest) -> AnthropicReply:
    """Never answers a prompt that says "hang" (a turn for an interrupt to end); echoes the
    rest."""
    if "hang" in request.last_user_text():
        return AnthropicHang()
    return echo(request)

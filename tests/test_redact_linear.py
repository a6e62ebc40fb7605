import time

import pytest

from agentrt._redact import redact


@pytest.mark.parametrize("text", ["x" * 8192, "QUJD" * 2048, "a" * 8191 + " token=abc"])
def test_redacting_a_full_stderr_ring_is_fast(text: str) -> None:
    # Quadratic backtracking took ~1.5 s here; linear work takes about a millisecond.
    start = time.perf_counter()
    redact(text)
    assert time.perf_counter() - start < 0.25


def test_key_value_names_are_still_found_anywhere_in_a_line() -> None:
    assert redact("x-api-key: v1 and 'password'='v2', AUTH_TOKEN=v3; a\"token=v4") == (
        "x-api-key: [REDACTED] and 'password'='[REDACTED]', AUTH_TOKEN=[REDACTED]; "
        'a"token=[REDACTED]'
    )

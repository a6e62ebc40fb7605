import pytest

from agentrt.backend import redact


@pytest.mark.parametrize(
    "text", ["x" * 300_000, "QUJD" * 75_000, "token" * 60_000, "a" * 300_000 + " token=abc"]
)
def test_redaction_is_linear_on_long_runs(text: str) -> None:
    # No timing assertion: on these inputs a quadratic pattern would not finish in any
    # reasonable time (figures in bench/README.md); the linear one finishes at once.
    assert redact(text).endswith("[REDACTED]") == text.endswith("token=abc")


def test_key_value_names_are_still_found_anywhere_in_a_line() -> None:
    assert redact("x-api-key: v1 and 'password'='v2', AUTH_TOKEN=v3; a\"token=v4") == (
        "x-api-key: [REDACTED] and 'password'='[REDACTED]', AUTH_TOKEN=[REDACTED]; "
        'a"token=[REDACTED]'
    )


@pytest.mark.parametrize(
    "text",
    [
        "a=" * 150_000,
        "a= " * 100_000,
        "'a'" * 100_000,
        "x" * 300_000 + "=",
        "x" * 300_000 + "= " + " " * 300_000,
        "A" * 300_000 + "=",
        "aB" * 150_000 + "=",
        "api_key=" * 40_000,
        "max_tokens: " * 30_000,
    ],
)
def test_the_assignment_scan_is_linear(text: str) -> None:
    # A quadratic scan of these runs for minutes; the linear one in tens of milliseconds.
    assert len(redact(text)) <= len(text) + 10 * text.count("=") + 10


@pytest.mark.parametrize(
    "text",
    [
        "a://" * 75_000,
        "a" * 300_000 + "://",
        "a://" + "u" * 300_000,
        "a://u:" + "p" * 300_000,
        "a+" * 150_000 + "://u:",
        "a://u:p:" * 40_000,
        "-----BEGIN PRIVATE KEY-----" * 10_000,
        "-----BEGIN PRIVATE KEY-----" + "QUJD\n" * 60_000,
        "-----BEGIN " * 25_000,
        "-" * 300_000,
        "AIza" * 75_000,
        "sk_live_" * 40_000,
        "npm_" * 75_000,
        "glpat-" * 50_000,
        ("hf_" + "x" * 30 + " ") * 9_000,
        "pypi-AgEIcHlwaS5vcmc" * 15_000 + " ",
    ],
)
def test_the_token_url_and_key_scans_are_linear(text: str) -> None:
    # Each is a long run a backtracking pattern would rescan from every position.
    assert len(redact(text)) <= 2 * len(text)

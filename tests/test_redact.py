import pytest

from agentrt._redact import REDACTED, is_secret_name, redact, redact_mapping

SECRET_NAMES = [
    "api_key",
    "x-api-key",
    "apiKey",
    "APIKey",
    "apikey",
    "ANTHROPIC_API_KEY",
    "AUTH_TOKEN",
    "access_token",
    "accessToken",
    "client_secret",
    "password",
    "Password",
    "passwd",
    "credentials",
    "credential",
    "Authorization",
    "auth",
    "token",
    "GITHUB_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "db.password",
    "api_key_2",
]
PLAIN_NAMES = [
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "max_tokens",
    "token_count",
    "keyboard",
    "monkey",
    "author",
    "PWD",
    "sort_keys",
    "tokenizer",
    "session_id",
    "authorization_header",
    "",
    "_",
    "42",
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_a_name_whose_last_word_is_a_secret_word_is_secret(name: str) -> None:
    assert is_secret_name(name)
    assert redact(f"{name}=hunter2") == f"{name}={REDACTED}"
    assert redact_mapping({name: "hunter2"}) == {name: REDACTED}


@pytest.mark.parametrize("name", PLAIN_NAMES)
def test_counts_and_words_that_only_contain_a_secret_word_are_not(name: str) -> None:
    assert not is_secret_name(name)
    if name:
        assert redact(f"{name}=10") == f"{name}=10"
        assert redact(f'"{name}": 10') == f'"{name}": 10'
    assert redact_mapping({name: "10"}) == {name: "10"}


def test_usage_json_survives_while_its_neighbours_are_redacted() -> None:
    text = '{"usage": {"input_tokens": 10, "output_tokens": 5}, "api_key": "abc", "max_tokens": 5}'
    assert redact(text) == (
        '{"usage": {"input_tokens": 10, "output_tokens": 5}, "api_key": "[REDACTED]", '
        '"max_tokens": 5}'
    )


def test_a_secret_inside_a_plain_value_is_still_found() -> None:
    assert redact("url=https://h/p?api_key=abc&x=1 next") == (
        "url=https://h/p?api_key=[REDACTED]&x=1 next"
    )
    assert redact("max_tokens=5,token=abc") == "max_tokens=5,token=[REDACTED]"


def test_the_auth_scheme_does_not_shield_the_credential() -> None:
    assert redact("Authorization: Basic dXNlcjpwYXNz, x=1") == "Authorization: [REDACTED], x=1"
    assert redact("authorization: Bearer abc.def") == "authorization: [REDACTED]"
    assert redact("Bearer abc.def") == "Bearer [REDACTED]"


def test_quotes_around_the_value_are_kept() -> None:
    assert redact("""a 'password'='v2' "token": "v3" end""") == (
        """a 'password'='[REDACTED]' "token": "[REDACTED]" end"""
    )


def test_credential_shaped_values_are_redacted_under_any_name() -> None:
    text = "x sk-ant-abcdefgh1234 ghp_abcdefghijklmnop1234 AKIAABCDEFGHIJKLMNOP"
    assert redact(text) == f"x {REDACTED} {REDACTED} {REDACTED}"

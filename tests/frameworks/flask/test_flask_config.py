"""``SERVICE_WEBHOOKS_*`` values as strings (from the environment): numbers and booleans
are converted, anything else is refused naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from service_webhooks._exceptions import ConfigurationError
from service_webhooks.adapters.flask import ServiceWebhooks

SECRET = "whsec-test-0123456789abcdef0123456789abcdef"


def build(**values: Any) -> Any:
    config = {"SERVICE_WEBHOOKS_SECRETS": SECRET, "SERVICE_WEBHOOKS_STORE": "memory"}
    config.update({f"SERVICE_WEBHOOKS_{key}": value for key, value in values.items()})
    config.setdefault("SERVICE_WEBHOOKS_INBOX", False)
    return ServiceWebhooks.receiver_from_config(config)


def test_numeric_strings_are_converted() -> None:
    receiver = build(
        TOLERANCE="300",
        MAX_BODY_SIZE=" 1024 ",
        LEASE="2.5",
        RETENTION="259200",
        UNHANDLED_STATUS="500",
    )
    assert (receiver.tolerance, receiver.max_body_size, receiver.lease) == (300, 1024, 2.5)
    assert (receiver.retention, receiver.unhandled.status) == (259200, 500)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("TOLERANCE", "five", "SERVICE_WEBHOOKS_TOLERANCE'] must be a number"),
        ("LEASE", "", "SERVICE_WEBHOOKS_LEASE'] must be a number"),
        ("MAX_BODY_SIZE", "1.5", "SERVICE_WEBHOOKS_MAX_BODY_SIZE'] must be an integer"),
        ("UNHANDLED_STATUS", "ok", "SERVICE_WEBHOOKS_UNHANDLED_STATUS'] must be an integer"),
        ("SUCCESS_BODY", "nope", "SERVICE_WEBHOOKS_SUCCESS_BODY'] must be a boolean"),
        ("STRICT", "2", "SERVICE_WEBHOOKS_STRICT'] must be a boolean"),
        ("TOLERANCE", "nan", "TOLERANCE'\\]: tolerance must be a finite number of seconds >= 0"),
        ("LEASE", "inf", "LEASE'\\]: lease must be a finite number of seconds > 0"),
    ],
)
def test_bad_strings_are_refused_naming_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build(**{key: value})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, r"set app.config\['SERVICE_WEBHOOKS_SECRETS'\]"),
        (123456789, r"SERVICE_WEBHOOKS_SECRETS'\] is a number: from_prefixed_env"),
        ([], r"SERVICE_WEBHOOKS_SECRETS'\]: at least one secret is required"),
        ("   ", r"SERVICE_WEBHOOKS_SECRETS'\]: a secret must not be whitespace only"),
        ("whsec-x\n", r"SERVICE_WEBHOOKS_SECRETS'\]: a secret must not start or end"),
    ],
    ids=["missing", "digits-parsed-as-json", "empty-list", "blank", "trailing-newline"],
)
def test_bad_secrets_are_refused_naming_the_key(value: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as raised:
        build(SECRETS=value)
    assert "whsec-x" not in str(raised.value)  # never the secret itself


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("false", False),
        ("FALSE", False),
        ("0", False),
        ("no", False),
        ("Off", False),
        ("true", True),
        ("1", True),
        ("YES", True),
        ("on", True),
        (False, False),
    ],
)
def test_boolean_strings_are_parsed(value: Any, expected: bool) -> None:
    assert build(SUCCESS_BODY=value).success_body is expected
    assert build(STRICT=value).router.strict is expected


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"LEASE": -5}, r"^app.config\['SERVICE_WEBHOOKS_LEASE'\]: lease must be"),
        ({"RETENTION": 60}, r"^app.config\['SERVICE_WEBHOOKS_RETENTION'\]: retention must be"),
        ({"MAX_BODY_SIZE": 0}, r"^app.config\['SERVICE_WEBHOOKS_MAX_BODY_SIZE'\]: max_body_size"),
        ({"UNHANDLED_STATUS": 302}, r"^app.config\['SERVICE_WEBHOOKS_UNHANDLED_STATUS'\]: "),
        ({"STORE": "bogus://x"}, r"^app.config\['SERVICE_WEBHOOKS_STORE'\]: unknown store URL"),
        ({"INBOX": "bogus://x"}, r"^app.config\['SERVICE_WEBHOOKS_INBOX'\]: no inbox for URL"),
        ({"STORE": "sqlite:x.db?mode=ro"}, r"^app.config\['SERVICE_WEBHOOKS_STORE'\]: a sqlite"),
    ],
    ids=["lease", "retention", "max-body-size", "unhandled-status", "store", "inbox", "sqlite"],
)
def test_a_value_the_receiver_refuses_is_named_by_its_key(
    values: dict[str, Any], message: str
) -> None:
    # the receiver's own message names its argument ("lease"), which no Flask user wrote
    with pytest.raises(ConfigurationError, match=message):
        build(**values)

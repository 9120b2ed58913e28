"""An API key echoed in an error body or status line is masked, control characters in
the service's error texts are escaped, ``(str, Enum)`` filters are sent as
their value, and every API error survives pickle and copy."""

from __future__ import annotations

import copy
import enum
import pickle
from typing import TYPE_CHECKING

import httpx
import pytest

from service_webhooks.api import (
    APIConnectionError,
    APIError,
    APIResponseError,
    APIStatusError,
    AsyncClient,
    AuthenticationError,
    Client,
    PaginationError,
    ParameterError,
    RateLimitError,
)
from service_webhooks.testing.fake_api import Fault

if TYPE_CHECKING:
    from conftest import Api

API_KEY = "test-key"  # the key the ``api`` fixture's clients use


async def test_a_key_echoed_in_an_error_body_is_masked_in_the_message(api: Api) -> None:
    # Some services repeat the rejected key; docs: the key never appears in a message.
    api.fake.inject(Fault(status=401, body=b'{"message": "invalid API key test-key"}'))
    with pytest.raises(AuthenticationError) as caught:
        await api.history()
    text = str(caught.value) + repr(caught.value)
    assert "invalid API key ***" in text
    assert API_KEY not in text
    # The message keeps 200 characters of the service's text: no piece of a key that
    # straddles the cut is left either.
    api.fake.inject(Fault(status=401, body=b'{"message": "' + b"a" * 196 + b'test-key"}'))
    with pytest.raises(AuthenticationError) as caught:
        await api.history()
    assert "a" * 196 + "***" in str(caught.value)
    assert "test" not in str(caught.value) + repr(caught.value)


class LegacyState(str, enum.Enum):  # noqa: UP042 - str() of a member is "LegacyState.PENDING"
    PENDING = "PENDING"


async def test_a_str_mixin_enum_filter_is_sent_as_its_value(api: Api) -> None:
    page = await api.list_operations(state=LegacyState.PENDING, limit=5)
    assert dict(api.fake.requests[-1].params)["state"] == "PENDING"
    assert {op.state for op in page.operations} == {"PENDING"}
    pager = api.iter_operations(state=LegacyState.PENDING, limit=50)
    assert {op.state for op in await api.items(pager)} == {"PENDING"}
    assert dict(api.fake.requests[-1].params)["state"] == "PENDING"


ERRORS: list[APIError] = [
    APIError("m", method="GET", path="/p"),
    ParameterError("limit must be between 1 and 100, got 0"),
    APIStatusError("409 Conflict", method="POST", path="/x", status_code=409, body={"a": 1}),
    RateLimitError("429", method="GET", path="/p", status_code=429, retry_after=2.0),
    APIConnectionError("ConnectError", method="GET", path="/p", sent=False),
    PaginationError("repeated", method="GET", path="/p", token="t"),
    APIResponseError("bad body", method="GET", path="/p", status_code=200),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_survive_pickle_and_copy(error: APIError) -> None:
    # A handler's error crossing a process (multiprocessing, a task queue) is pickled.
    unpickled = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes
    for clone in (unpickled, copy.copy(error), copy.deepcopy(error)):
        assert type(clone) is type(error)
        assert str(clone) == str(error)
        assert vars(clone) == vars(error)


async def test_a_key_echoed_in_the_reason_phrase_is_masked() -> None:
    """The status line's reason phrase is the service's text too (was shown as sent)."""

    def handler(request: httpx.Request) -> httpx.Response:
        phrase = b"Unauthorized key " + API_KEY.encode()
        return httpx.Response(401, json={}, extensions={"reason_phrase": phrase})

    transport = httpx.MockTransport(handler)
    client = Client(API_KEY, base_url="http://api.invalid", transport=transport)
    with client, pytest.raises(AuthenticationError) as caught:
        client.operations.list()
    async with AsyncClient(API_KEY, base_url="http://api.invalid", transport=transport) as aclient:
        with pytest.raises(AuthenticationError) as acaught:
            await aclient.operations.cancel("op-1")
    for error in (caught.value, acaught.value):
        assert str(error).startswith("401 Unauthorized key ***")
        assert API_KEY not in str(error) + repr(error)


async def test_line_breaks_and_escapes_in_an_error_text_are_escaped(api: Api) -> None:
    """An error text from the service cannot forge a log line or recolour a terminal."""
    body = b'{"message": "refused\\nERROR forged line \\u001b[31mred\\u001b]0;title\\u0007"}'
    api.fake.inject(Fault(status=409, body=body))
    with pytest.raises(APIStatusError) as caught:
        await api.cancel("op-0000")
    text = str(caught.value)
    assert text == (
        "409 Conflict: refused\\nERROR forged line \\x1b[31mred\\x1b]0;title\\x07"
        " (POST /operations/v1/op-0000/cancel)"
    )
    sent = "refused\nERROR forged line \x1b[31mred\x1b]0;title\x07"
    assert caught.value.body == {"message": sent}  # kept as received

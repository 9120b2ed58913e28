"""``service-webhooks send`` against an in-process ``httpx.MockTransport``: each kind of
answer or failure and how it is classified and printed (spec §7), plus argument errors.

``tests/cli/test_send.py`` uses a real server; here every client the command creates
gets a mock transport, so the failure kinds that a real server cannot produce on
demand (protocol errors, other transport errors, the overall deadline) are covered.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from service_webhooks import SIGNATURE_HEADER, Secret, SignatureMismatchError, verify
from service_webhooks.cli import main
from service_webhooks.delivery import Sender, StaticResolver

send_module = importlib.import_module("service_webhooks.cli.send")  # not the command

SECRET = "whsec-send-inprocess"
ORG = "o-SENDMOCK-eu1"
URL = "http://receiver.test/webhooks"
TEMPORARY = "temporary failure (the service would retry)"
PERMANENT = "permanent failure (the service would not retry)"

Handler = Callable[[httpx.Request], Any]


PUBLIC_IP = "93.184.216.34"  # where every host resolves here: not a reserved address


@pytest.fixture
def transport(monkeypatch: pytest.MonkeyPatch) -> Callable[[Handler], list[httpx.Request]]:
    """``transport(handler)``: the command's sender answers with ``handler`` (every host
    resolving to :data:`PUBLIC_IP`); returns the list its requests are appended to."""

    def install(handler: Handler) -> list[httpx.Request]:
        requests: list[httpx.Request] = []

        async def recording(request: httpx.Request) -> Any:
            requests.append(request)
            answer = handler(request)
            return await answer if asyncio.iscoroutine(answer) else answer

        def sender(allow_private_destinations: bool, verify: object = True) -> Sender:
            return Sender(
                deadline=send_module.DEADLINE,
                allow_private_destinations=allow_private_destinations,
                snippet_size=send_module._READ_LIMIT,
                user_agent=send_module.USER_AGENT,
                transport=httpx.MockTransport(recording),
                resolver=StaticResolver(default=[PUBLIC_IP]),
            )

        monkeypatch.setattr(send_module, "_sender", sender)
        return requests

    return install


def test_the_command_sends_as_one_attempt_of_the_service() -> None:
    sender = send_module._sender(False)
    assert (sender.deadline, sender.allow_private_destinations) == (10.0, False)
    assert (sender.snippet_size, sender.user_agent) == (1024, "service-webhooks-send")
    asyncio.run(sender.__aexit__(None, None, None))


def run(*args: str) -> Any:
    return CliRunner().invoke(
        main, ["send", URL, "--secret", SECRET, "--org", ORG, *args], catch_exceptions=False
    )


def event_args(data: str = '{"id": "n-1"}') -> list[str]:
    return ["--event", "note.created", "--data", data]


def test_success_prints_status_and_response_excerpt(transport: Any) -> None:
    requests = transport(lambda request: httpx.Response(200, text="  " + "ok " * 100 + "\n"))
    result = run(*event_args())
    assert result.exit_code == 0
    lines = result.output.splitlines()
    [request] = requests
    body = request.content
    assert lines[0] == f"POST {URL}  note.created v1  org {ORG}  ({len(body)} bytes)"
    assert lines[1] == "HTTP 200 OK: success"
    assert lines[2] == "response: " + ("ok " * 100)[:198].strip()  # 200 chars, stripped
    assert request.method == "POST"
    assert request.headers["user-agent"] == "service-webhooks-send"
    assert request.headers["content-type"] == "application/json; charset=utf-8"
    assert json.loads(body) == {"eventName": "note.created", "version": 1, "data": {"id": "n-1"}}
    header = verify(body, request.headers[SIGNATURE_HEADER], [Secret(SECRET)])
    assert header.organization_id == ORG


@pytest.mark.parametrize(
    ("status", "line", "exit_code"),
    [
        (202, "HTTP 202 Accepted: success", 0),
        (307, f"HTTP 307 Temporary Redirect: {TEMPORARY}", 1),
        (400, f"HTTP 400 Bad Request: {PERMANENT}", 1),
        (599, f"HTTP 599: {TEMPORARY}", 1),  # no reason phrase: no space before the colon
    ],
)
def test_status_without_body(transport: Any, status: int, line: str, exit_code: int) -> None:
    transport(lambda request: httpx.Response(status))
    result = run(*event_args())
    assert result.exit_code == exit_code
    assert result.stdout.splitlines()[1:] == [line]  # an empty body prints no response line


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (httpx.ConnectError("refused here"), "no response (connection refused)"),
        (httpx.ReadTimeout("slow"), "no response (timeout: slow)"),
        (
            httpx.RemoteProtocolError("garbage"),
            "no response (protocol error (HTTP/HTTPS mismatch?): garbage)",
        ),
        (httpx.ReadError(""), "no response (transport error: ReadError: ReadError)"),
        (
            httpx.UnsupportedProtocol("nope"),
            "no response (transport error: UnsupportedProtocol: nope)",
        ),
    ],
)
def test_no_answer_is_a_temporary_failure(
    transport: Any, error: httpx.HTTPError, line: str
) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise error

    transport(fail)
    result = run(*event_args())
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == f"{line}: {TEMPORARY}"


def test_overall_deadline_ends_a_slow_answer(
    transport: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(send_module, "DEADLINE", 0.05)

    async def never(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        raise AssertionError("the deadline did not end the attempt")

    transport(never)
    result = run(*event_args())
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (f"no response within 0.05 s: {TEMPORARY}")


def test_body_from_stdin_is_sent_unchanged(transport: Any) -> None:
    requests = transport(lambda request: httpx.Response(204))
    raw = b'{"eventName":"x","version":1,"data":null}  \n'
    result = CliRunner().invoke(
        main,
        ["send", URL, "--secret", SECRET, "--org", ORG, "--body-file", "-", "--timestamp", "5"],
        input=raw,
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"POST {URL}  body file  org {ORG}  ({len(raw)} bytes)",
        "HTTP 204 No Content: success",
    ]
    [request] = requests
    assert request.content == raw
    header = verify(raw, request.headers[SIGNATURE_HEADER], [Secret(SECRET)], now=5)
    assert header.timestamp == 5


@pytest.mark.parametrize("org", ["o,1", "é", ""])
def test_an_unsignable_organization_is_a_usage_error(transport: Any, org: str) -> None:
    requests = transport(lambda request: httpx.Response(200))
    result = CliRunner().invoke(
        main, ["send", URL, "--secret", SECRET, "--org", org, *event_args()]
    )
    assert result.exit_code == 2
    assert "Invalid value for --org: organization_id must be non-empty printable ASCII" in (
        result.output
    )
    assert requests == []


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://host:port/", "Error: invalid endpoint URL: Port could not be cast"),
        ("http://127.0.0.1:99999/", "Error: invalid endpoint URL: Port out of range 0-65535"),
        ("http://h.test:0/", "Error: endpoint URL port must be 1-65535"),
        ("http:///no-host", "Error: endpoint URL has no host"),
        ("mailto:a@b.c", "Error: endpoint URL scheme must be http or https, got 'mailto'"),
        ("http://u:p@h.test/", "Error: endpoint URL must not carry credentials"),
        ("http://exa mple.com/", "Error: endpoint URL host must not contain spaces"),
        ("http://h\x00.test/", "Error: endpoint URL host must not contain spaces or control"),
    ],
)
def test_unusable_url_is_a_usage_error(transport: Any, url: str, message: str) -> None:
    requests = transport(lambda request: httpx.Response(200))
    result = CliRunner().invoke(
        main, ["send", url, "--secret", SECRET, "--org", ORG, *event_args()]
    )
    assert result.exit_code == 2
    assert message in result.output
    assert requests == []


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/", "ftp://h.test/", "http:///x"])
def test_send_and_trigger_refuse_a_url_alike(url: str) -> None:
    sent = CliRunner().invoke(main, ["send", url, "--secret", SECRET, "--org", ORG, *event_args()])
    triggered = CliRunner().invoke(main, ["trigger", "note.created", "--url", url, "--secret", "s"])
    assert sent.exit_code == triggered.exit_code == 2
    assert sent.output.splitlines()[-1] == triggered.output.splitlines()[-1]


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--secret", ""], {}),
        ([], {"SERVICE_WEBHOOKS_SECRET": " \t "}),  # a list without a secret
    ],
)
def test_an_empty_secret_is_a_usage_error(transport: Any, args: list[str], env: Any) -> None:
    requests = transport(lambda request: httpx.Response(200))
    result = CliRunner(env=env).invoke(main, ["send", URL, *args, "--org", ORG, *event_args()])
    assert result.exit_code == 2
    assert (
        "Error: Invalid value for '--secret' (env var: 'SERVICE_WEBHOOKS_SECRET'): "
        "a secret must be a non-empty str or bytes"
    ) in result.output
    assert requests == []


def test_the_environment_signs_with_its_first_secret(transport: Any) -> None:
    requests = transport(lambda request: httpx.Response(200))
    env = {"SERVICE_WEBHOOKS_SECRET": "  NEW-secret\n OLD-secret "}  # rotation: newest first
    result = CliRunner(env=env).invoke(main, ["send", URL, "--org", ORG, *event_args()])
    assert result.exit_code == 0, result.output
    [request] = requests
    signature = request.headers[SIGNATURE_HEADER]
    verify(request.content, signature, [Secret("NEW-secret")])
    with pytest.raises(SignatureMismatchError):
        verify(request.content, signature, [Secret("OLD-secret")])


def test_a_secret_on_the_command_line_is_used_whole(transport: Any) -> None:
    requests = transport(lambda request: httpx.Response(200))
    result = CliRunner().invoke(
        main, ["send", URL, "--secret", "two words", "--org", ORG, *event_args()]
    )
    assert result.exit_code == 0, result.output
    verify(requests[0].content, requests[0].headers[SIGNATURE_HEADER], [Secret("two words")])


def test_https_url_is_accepted(transport: Any) -> None:
    requests = transport(lambda request: httpx.Response(200))
    result = CliRunner().invoke(
        main, ["send", "https://receiver.test/h", "--secret", SECRET, "--org", ORG, *event_args()]
    )
    assert result.exit_code == 0, result.output
    [request] = requests  # sent to the address that was checked, named as given
    assert (request.url.scheme, request.url.host, request.url.path) == ("https", PUBLIC_IP, "/h")
    assert request.headers["host"] == "receiver.test"
    assert request.extensions["sni_hostname"] == "receiver.test"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--event", "note.created", "--data", "NaN"], "not valid JSON: NaN is not valid JSON"),
        (["--event", "note.created", "--data", '{"n": Infinity}'], "Infinity is not valid"),
        (["--event", "", "--data", "{}"], "Invalid value for --event: an event needs a non-empty"),
    ],
)
def test_an_envelope_that_is_not_one_is_a_usage_error(
    transport: Any, args: list[str], message: str
) -> None:
    # Both used to be sent: NaN as is (a body that is not JSON), and "eventName": "".
    # --body-file remains the way to send a malformed body on purpose.
    requests = transport(lambda request: httpx.Response(200))
    result = CliRunner().invoke(main, ["send", URL, "--secret", SECRET, "--org", ORG, *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert requests == []


def test_a_timestamp_over_12_digits_is_the_timestamp_option_error(transport: Any) -> None:
    # It used to be reported as "Invalid value for --org: timestamp must be ...".
    requests = transport(lambda request: httpx.Response(200))
    result = CliRunner().invoke(
        main,
        ["send", URL, "--secret", SECRET, "--org", ORG, *event_args(), "--timestamp",
         str(10**12)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--timestamp'" in result.output
    assert "--org" not in result.output
    assert requests == []


class _Stalling(httpx.AsyncByteStream):
    """A 200 whose body sends 2 KiB, then nothing more (a receiver still writing)."""

    async def __aiter__(self) -> Any:
        yield b"z" * 2048
        await asyncio.sleep(30)
        raise AssertionError("the body was read past the excerpt")


def test_only_the_status_counts_not_the_rest_of_the_body(
    transport: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The status arrived in time: success, as the emulator's Sender says for the same
    # answer. It used to wait for the whole body and report "no response" at the deadline.
    monkeypatch.setattr(send_module, "DEADLINE", 1.0)
    transport(lambda request: httpx.Response(200, stream=_Stalling()))
    result = run(*event_args())
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1] == "HTTP 200 OK: success"
    assert lines[2] == "response: " + "z" * 200


def test_a_status_in_time_is_the_answer_even_if_its_body_is_late(
    transport: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the status counts (spec §6.1): a 200 whose body stalls past the deadline
    is a success with the part that arrived, not a timeout."""
    monkeypatch.setattr(send_module, "DEADLINE", 0.2)

    async def stalls() -> Any:
        yield b"partly "
        await asyncio.sleep(30)
        yield b"never"

    transport(lambda request: httpx.Response(200, content=stalls()))
    result = run(*event_args())
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1:] == ["HTTP 200 OK: success", "response: partly"]


def test_the_host_is_resolved_once_and_the_checked_address_is_the_one_sent_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A name whose second answer is a reserved address (DNS rebinding) cannot slip
    past the check: the request goes to the address that was checked, or is not sent."""
    answers = iter([["127.0.0.1"], [PUBLIC_IP]])
    sent: list[httpx.Request] = []

    class Rebinding:
        async def resolve(self, host: str, port: int) -> list[str]:
            return next(answers)

    def sender(allow_private_destinations: bool, verify: object = True) -> Sender:
        return Sender(
            transport=httpx.MockTransport(
                lambda request: sent.append(request) or httpx.Response(200)
            ),
            resolver=Rebinding(),
            allow_private_destinations=allow_private_destinations,
        )

    monkeypatch.setattr(send_module, "_sender", sender)
    result = run(*event_args())
    assert result.exit_code == 1
    answer = result.output.splitlines()[1]
    assert answer.startswith("not sent: ")
    assert answer.endswith(PERMANENT)
    assert sent == []

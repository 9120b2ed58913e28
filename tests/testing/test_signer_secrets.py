"""The test kit signs with what an app's settings configure: a secret, a rotation list
(newest first), an ``{organization ID: secret(s)}`` mapping or a callable, the shapes
``WebhookReceiver(secrets=...)`` accepts (``webhook_secret`` returning
``settings.SERVICE_WEBHOOKS["SECRETS"]``, as the testing page shows)."""

from __future__ import annotations

from typing import Any

import pytest

from service_webhooks import ConfigurationError, Secret, WebhookReceiver
from service_webhooks.testing import Deliverer, Signer

NEW = "whsec-new-0123456789abcdef0123456789abcdef"
OLD = "whsec-old-0123456789abcdef0123456789abcdef"
OTHER = "whsec-other-0123456789abcdef0123456789abcd"
NOTE = {"id": "n-1", "author": "ana@example.com", "text": "hi"}


def starlette_client(receiver: WebhookReceiver) -> Any:
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from service_webhooks.adapters.asgi import webhook_routes  # type: ignore[import-not-found,unused-ignore]

    return TestClient(Starlette(routes=webhook_routes(receiver, "/webhooks")))


@pytest.fixture
def webhook_secret() -> list[str]:
    return NEW.split() + OLD.split()  # the Django page's SECRETS: env value .split()


def test_a_rotation_list_from_the_settings_signs_with_the_newest_secret(
    webhook_secret: list[str], webhook_signer: Signer, deliver_webhook: Deliverer
) -> None:
    """Before: ``ConfigurationError: a secret must be a non-empty str or bytes`` from the
    ``webhook_signer`` fixture, for the testing page's own Django example."""
    assert webhook_signer.secret == Secret(NEW)
    receiver = WebhookReceiver(secrets=webhook_secret, store="memory")
    receiver.on("note.created", lambda event: None)
    response = deliver_webhook(starlette_client(receiver), "/webhooks", "note.created", NOTE)
    assert response.json() == {"status": 200, "reason": "processed"}
    only_new = WebhookReceiver(secrets=NEW, store="memory")
    body, headers = webhook_signer.delivery("note.created", NOTE)
    assert only_new.process(body, headers["Service-Signature"]).reason == "unhandled"


def test_a_mapping_signs_with_the_organizations_secret_also_when_overridden() -> None:
    secrets = {"o-TEST-na1": [NEW, OLD], "o-ACME-eu1": OTHER}
    receiver = WebhookReceiver(secrets=secrets, store="memory")
    seen: list[str] = []
    receiver.on("note.created", lambda event: seen.append(event.organization_id))
    client = starlette_client(receiver)
    deliver = Deliverer(Signer(secrets))
    assert deliver.signer.secret == Secret(NEW)
    assert deliver(client, "/webhooks", "note.created", NOTE).status_code == 200
    other = deliver(client, "/webhooks", "note.created", NOTE, organization_id="o-ACME-eu1")
    assert other.json() == {"status": 200, "reason": "processed"}
    assert seen == ["o-TEST-na1", "o-ACME-eu1"]
    assert Signer(secrets, organization_id="o-ACME-eu1").secret == Secret(OTHER)


def test_a_callable_is_asked_for_the_organizations_secrets() -> None:
    def secrets(organization_id: str) -> list[str] | None:
        return [NEW, OLD] if organization_id == "o-TEST-na1" else None

    assert Signer(secrets).secret == Secret(NEW)
    with pytest.raises(ConfigurationError, match=r"no secret for organization 'o-OTHER'"):
        Signer(secrets, organization_id="o-OTHER")


def test_an_organization_the_mapping_lacks_is_named_with_the_fix() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Signer({"o-ACME-eu1": OTHER})
    message = str(caught.value)
    assert "no secret for organization 'o-TEST-na1'" in message
    assert "webhook_organization_id" in message
    assert OTHER not in message


@pytest.mark.parametrize(
    ("secret", "named"), [(None, "None"), ("", "str"), ([], "list"), ({}, "dict"), (42, "int")]
)
def test_a_missing_secret_is_named(secret: Any, named: str) -> None:
    """A ``webhook_secret`` returning ``os.environ.get(...)`` of an unset variable."""
    with pytest.raises(ConfigurationError, match=rf"Signer needs .*, not (an empty )?{named}$"):
        Signer(secret)


def test_a_single_secret_is_held_as_before() -> None:
    signer = Signer(b"raw \x00 bytes")
    assert signer.secret == Secret(b"raw \x00 bytes")
    assert repr(signer) == "Signer(secret=<redacted>, organization_id='o-TEST-na1')"
    assert Signer(Secret(NEW)) == Signer(NEW)


def test_signing_as_an_organization_the_mapping_lacks_is_answered_unknown_organization() -> None:
    """The receiver's answer to a delivery from an organization it has no secret for."""
    secrets = {"o-TEST-na1": NEW}
    receiver = WebhookReceiver(secrets=secrets, store="memory")
    deliver = Deliverer(Signer(secrets))
    response = deliver(
        starlette_client(receiver), "/webhooks", "note.created", NOTE, organization_id="o-GONE"
    )
    assert response.json() == {"status": 401, "reason": "unknown_organization"}
    with pytest.raises(ConfigurationError, match="organization_id must be non-empty printable"):
        deliver.signer.for_organization("o,1")

"""The app that docs/testing.md mounts answers like a real deployment: both spellings of
the URL as deliveries (never a 3xx, spec §7) and the core's 405 for other methods."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

from service_webhooks.testing import Signer

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def doc_app() -> Any:
    """The FastAPI app of the first Python block under "## Starlette / FastAPI"."""
    section = DOC.read_text().split("## Starlette / FastAPI", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    namespace: dict[str, Any] = {"__name__": "testing_doc_app"}
    exec(compile(match.group(1), str(DOC), "exec"), namespace)  # noqa: S102 - the docs' own code
    return namespace["app"], namespace["SECRET"]


def test_the_documented_app_answers_both_spellings_and_the_cores_405() -> None:
    app, secret = doc_app()
    with warnings.catch_warnings():  # starlette asks for httpx2 when only httpx is installed
        warnings.simplefilter("ignore", DeprecationWarning)
        from starlette.testclient import TestClient

    signer = Signer(secret)
    with TestClient(app, follow_redirects=False) as client:
        for path in ("/webhooks", "/webhooks/"):
            body, headers = signer.delivery("note.created", {"id": path, "author": "a", "text": ""})
            response = client.post(path, content=body, headers=headers)
            assert (response.status_code, response.json()) == (
                200,
                {"status": 200, "reason": "processed"},
            ), path
            answer = client.get(path)
            assert (answer.status_code, answer.headers.get("allow")) == (405, "POST"), path
            assert answer.json() == {"status": 405, "reason": "method_not_allowed"}

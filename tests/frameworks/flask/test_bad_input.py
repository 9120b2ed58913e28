"""The bad-input catalogue (``tests/helpers/sw_bad_inputs.py``) through Flask's test
client.

The same named inputs and documented answers as ``tests/test_bad_input.py``, sent
through the blueprint of the test app (``tests/helpers/sw_flask_app.py``) with
``TESTING`` on, so any exception the view lets out fails the test instead of becoming a
500. A chunked body is sent without ``Content-Length`` and with ``wsgi.input_terminated``
set, as gunicorn does.
"""

from __future__ import annotations

import io
from types import ModuleType
from typing import Any

import pytest
import sw_bad_inputs as catalogue
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request


@pytest.fixture(scope="module")
def client(kit: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> FlaskClient:
    tmp = tmp_path_factory.mktemp("flask-bad-input")
    app: Flask = kit.load_app_module().create_app(
        str(tmp / "store.sqlite3"), str(tmp / "missing" / "store.sqlite3")
    )
    app.testing = True  # exceptions propagate out of the test client
    return app.test_client()


_KNOWN: dict[str, str] = {}  # case name -> why it is expected to fail (none today)
_CASES = [
    pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=_KNOWN[c.name]))
    if c.name in _KNOWN
    else c
    for c in catalogue.WIRE
]


@pytest.mark.parametrize("case", _CASES, ids=[c.name for c in catalogue.WIRE])
def test_flask_test_client(case: Any, kit: ModuleType, client: FlaskClient) -> None:
    request = case.build(catalogue.Signer(kit.SECRET, kit.ORG, catalogue.now()))
    headers = [(name, value.decode("latin-1")) for name, value in request.wire_headers()]
    if request.chunked:  # no Content-Length; gunicorn marks the input as terminated
        environ = EnvironBuilder(
            "/webhooks",
            method=request.method,
            headers=headers,
            input_stream=io.BytesIO(request.body),
            environ_overrides={"wsgi.input_terminated": True},
        ).get_environ()
        del environ["CONTENT_LENGTH"]
        response = client.open(Request(environ))
        assert "CONTENT_LENGTH" not in response.request.environ
    else:
        response = client.open(
            "/webhooks", method=request.method, headers=headers, data=request.body
        )
    answer_headers = {k.lower(): v for k, v in response.headers.items()}
    catalogue.check(case, request.method, response.status_code, answer_headers, response.data)

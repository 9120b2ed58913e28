"""Facts the pages must state, which running their code blocks cannot check."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def django_fragment(text: str) -> str:
    start = text.index("# settings.py")
    return text[start : text.index("```", start)]


@pytest.mark.parametrize("page", ["README.md", "docs/django.md"])
def test_django_fragments_import_what_they_use(page: str) -> None:
    fragment = django_fragment((ROOT / page).read_text(encoding="utf-8"))
    assert "os.environ" in fragment
    assert "import os" in fragment
    assert "include(" in fragment
    assert re.search(r"from django\.urls import .*\binclude\b", fragment)
    assert re.search(r"from django\.urls import .*\bpath\b", fragment)


@pytest.mark.parametrize("page", ["README.md", "docs/django.md", "docs/dashboard.md"])
def test_every_page_naming_a_django_name_says_where_it_is_imported_from(page: str) -> None:
    """``webhook_view`` and ``DjangoInbox`` are not in the app package's ``__all__``
    (importing them from it raises ImportError): a page calling one names its module,
    in an import or as a dotted path, and the module defines it."""
    text = (ROOT / page).read_text(encoding="utf-8")
    for name in ("webhook_view", "DjangoInbox"):
        if not re.search(rf"\b{name}\(", text):
            continue
        module = r"service_webhooks\.adapters\.django\.(\w+)"
        found = re.search(rf"from {module} import {name}\b|{module}\.{name}\b", text)
        assert found, f"{page} uses {name}() without its import"
        source = ROOT / "adapters" / "django" / f"{found[1] or found[2]}.py"
        assert re.search(rf"^(def|class) {name}\b", source.read_text(encoding="utf-8"), re.M)


@pytest.mark.parametrize(
    "page",
    ["README.md", "docs/index.md", "docs/django.md", "examples/django_project/notes/webhooks.py"],
)
def test_handler_examples_are_idempotent_upserts(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    assert ".objects.create(" not in text  # a redelivery would add a second row


def test_readme_has_one_more_section() -> None:
    assert README.count("\n## More\n") == 1
    after = README.split("\n## More\n", 1)[1].lstrip()
    assert after.startswith("- "), "the More section is not empty"


def test_flask_store_table_lists_every_store_url() -> None:
    text = (ROOT / "docs/flask.md").read_text(encoding="utf-8")
    [row] = [line for line in text.splitlines() if line.startswith("| `SERVICE_WEBHOOKS_STORE`")]
    for scheme in ('"memory"', '"sqlite:', '"redis://', '"postgresql://'):
        assert scheme in row


def table_keys(page: str, heading: str) -> set[str]:
    """The keys the first column of the table under ``heading`` names; `` `_B` `` is
    short for ``SERVICE_WEBHOOKS_B``."""
    text = (ROOT / page).read_text(encoding="utf-8")
    section = text[text.index(f"\n{heading}\n") :]
    table = re.search(r"(?:^\|.*\n)+", section, re.M)
    assert table, f"{page}: no table under {heading}"
    keys: set[str] = set()
    for line in table.group(0).splitlines()[2:]:  # after the header and the rule
        names = re.findall(r"`([A-Z_]+)`", line.split("|")[1])
        keys |= {"SERVICE_WEBHOOKS" + name if name.startswith("_") else name for name in names}
    return keys


def test_the_flask_config_table_lists_every_key() -> None:
    from service_webhooks.adapters.flask import CONFIG_KEYS

    keys = table_keys("docs/flask.md", "## Extension (`init_app`, configured from `app.config`)")
    assert keys == {*CONFIG_KEYS, "SERVICE_WEBHOOKS_URL"}


def test_the_django_settings_table_lists_every_key() -> None:
    from service_webhooks.adapters.django.conf import KEYS

    assert table_keys("docs/django.md", "## Settings: `SERVICE_WEBHOOKS`") == set(KEYS)


@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_pages_link_to_other_pages_rather_than_name_their_file(page: Path) -> None:
    """On the site a page's file path (`` `docs/benchmarks.md` ``) leads nowhere: link it."""
    assert not re.search(r"`docs/[\w-]+\.md", page.read_text(encoding="utf-8"))


def test_examples_share_one_default_secret() -> None:
    # and each splits it as the service-webhooks command does ("new old": a rotation)
    pattern = re.compile(r'SERVICE_WEBHOOKS_SECRET",\s*"([^"]+)"\s*\)\.split\(\)')
    defaults = {
        path.relative_to(ROOT).as_posix(): pattern.findall(path.read_text(encoding="utf-8"))
        for path in [
            ROOT / "examples/asgi_app.py",
            ROOT / "examples/flask_app.py",
            ROOT / "examples/celery_app/hooks.py",
            ROOT / "examples/django_project/mysite/settings.py",
        ]
    }
    assert all(len(found) == 1 for found in defaults.values()), defaults
    assert len({found[0] for found in defaults.values()}) == 1, defaults


@pytest.mark.parametrize(
    "page", [*(f"docs/{path.name}" for path in sorted((ROOT / "docs").glob("*.md"))), "README.md"]
)
def test_pages_split_the_secret_variable_they_give_a_receiver(page: str) -> None:
    """``SERVICE_WEBHOOKS_SECRET="new old"`` is a rotation for the CLI; a receiver given
    the unsplit ``str`` keeps it as one secret and answers every delivery 401."""
    text = (ROOT / page).read_text(encoding="utf-8")
    unsplit = re.findall(r'environ\["SERVICE_WEBHOOKS_SECRET"\](?!\.split\(\))', text)
    assert not unsplit, f"{page}: {len(unsplit)} unsplit SERVICE_WEBHOOKS_SECRET"


def test_receiver_reference_documents_the_registration_methods() -> None:
    text = (ROOT / "docs/reference/receiver.md").read_text(encoding="utf-8")
    for name in ("on", "on_any", "on_error", "remove"):
        assert f"`WebhookReceiver.{name}`" in text
        assert f"(#service_webhooks.Router.{name})" in text
    assert "::: service_webhooks.Router" in text  # where the linked docstrings render


def test_readme_says_how_long_the_suite_takes_and_how_to_run_a_quick_subset() -> None:
    assert re.search(r"full suite takes about \d+", README)
    assert 'pytest -m "not e2e and not services"' in README


def test_the_quick_subset_markers_exist() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"e2e: ' in pyproject
    assert '"services: ' in pyproject


@pytest.mark.parametrize("page", ["README.md", "docs/status-codes.md"])
def test_the_answer_table_lists_every_reason_a_request_can_get(page: str) -> None:
    """Each error a delivery can end in has its reason in the page's table, beside its
    status: ``ConfigurationError`` too (500, when a ``secrets=`` callable returns no
    valid secret)."""
    import service_webhooks
    from service_webhooks import WebhookError

    text = (ROOT / page).read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    exported = [getattr(service_webhooks, name) for name in service_webhooks.__all__]
    errors = [
        value
        for value in exported
        if isinstance(value, type) and issubclass(value, WebhookError) and value is not WebhookError
    ]
    assert len(errors) >= 10
    for error in errors:
        reason = f"| `{error.reason}` |"
        assert any(reason in row and f"| {error.status}" in row for row in rows), (
            f"{page}: no row for {error.__name__} ({error.status}, {error.reason})"
        )


PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
PYTHON_BLOCK = re.compile(r"^```py(?:thon)?\n(.*?)^```", re.M | re.S)


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_python_blocks_hold_python_not_commented_out_shell(page: Path) -> None:
    """Shell commands go in a ``bash`` block, where a reader copies them as they are:
    a ``python`` block of ``# command`` lines only reads as code that does nothing."""
    for block in PYTHON_BLOCK.findall(page.read_text(encoding="utf-8")):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        assert not all(line.startswith("#") for line in lines), (
            f"{page.name}: a python block of comments only:\n{block}"
        )


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_example_delivery_ids_are_prefixes_that_can_be_unambiguous(page: Path) -> None:
    """Delivery IDs are UUIDv7s whose first 12 hex digits are the millisecond received:
    an example ID given to ``show`` or ``replay`` has digits beyond those, or it would
    match every delivery of that time (a 6-digit one, all those of about 4.6 hours)."""
    text = page.read_text(encoding="utf-8")
    command = r"(?:inbox show|inbox replay|service-webhooks (?:show|replay)|_replay)"
    for ids in re.findall(rf"{command}((?: [0-9a-f]{{4,32}}\b)+)", text):
        for example in ids.split():
            assert len(example) > 12, f"{page.name}: example ID {example!r} is time digits only"


def test_the_answer_table_has_a_row_for_a_failing_idempotency_key_function() -> None:
    """The ``idempotency_key=`` function failing is answered 500 ``configuration`` (a
    bug: retried until it is fixed), which the error table's rows do not say."""
    text = (ROOT / "docs/status-codes.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert any("`idempotency_key=`" in row and "| 500 | `configuration` |" in row for row in rows)


def test_the_outcome_module_table_lists_every_reason_of_the_status_page() -> None:
    """``service_webhooks._outcome`` says docs/status-codes.md holds the same table."""
    from service_webhooks import _outcome

    text = (ROOT / "docs/status-codes.md").read_text(encoding="utf-8")
    start = text.index("## What the receiver answers")
    section = text[start : text.index("\n## ", start)]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]  # no header
    reasons = {row.split("|")[3].strip().strip("`") for row in rows}
    assert {"processed", "signature", "secrets_unavailable", "handoff_failed"} <= reasons
    docstring = _outcome.__doc__ or ""
    missing = sorted(reason for reason in reasons if f"``{reason}``" not in docstring)
    assert not missing, f"service_webhooks/_outcome.py's table lacks {missing}"


EXAMPLES = sorted((ROOT / "examples").rglob("*.py"))
TYPED_HANDLER = re.compile(
    r"^@\w+\.on\((?P<args>[^)]*)\)[^\n]*\n(?:async )?def \w+\(event: Event\[(?P<model>\w+)\]",
    re.M,
)


@pytest.mark.parametrize(
    "page", [*PAGES, *EXAMPLES], ids=[str(p.relative_to(ROOT)) for p in [*PAGES, *EXAMPLES]]
)
def test_a_handler_typed_with_a_built_in_model_is_pinned_to_its_version(page: Path) -> None:
    """Only version 1 of an event has a typed model (spec §9): an ``on(name)`` handler
    without ``version=`` also gets a later version, whose ``data`` is plain JSON, so
    one annotated ``Event[NoteCreated]`` would raise on it (500 until the event dies)."""
    from service_webhooks import EVENT_MODELS

    models = {model.__name__: key for key, model in EVENT_MODELS.items()}
    for found in TYPED_HANDLER.finditer(page.read_text(encoding="utf-8")):
        if found["model"] in models:
            version = models[found["model"]][1]
            assert f"version={version}" in found["args"], (
                f"{page.name}: on({found['args']}) gives Event[{found['model']}] "
                f"every version; add version={version}"
            )


def test_the_idempotency_key_example_keys_a_later_version_of_its_event() -> None:
    """docs/idempotency.md's key function for receivers with several events also runs
    for a later ``note.created`` version (plain JSON ``data``, spec §9)."""
    from service_webhooks import Event, NoteCreated

    text = (ROOT / "docs/idempotency.md").read_text(encoding="utf-8")
    (block,) = [b for b in PYTHON_BLOCK.findall(text) if "def key(event)" in b]
    namespace: dict[str, object] = {}
    exec(block, namespace)  # noqa: S102 - the page's own example
    key = namespace["key"]
    assert callable(key)
    body = b'{"eventName":"note.created","version":2,"data":{"noteId":"n-1"}}'
    later = Event("note.created", 2, {"noteId": "n-1"}, "o-1", 1_700_000_000, "", body)
    assert isinstance(key(later), str)
    assert key(later)
    first = Event("note.created", 1, NoteCreated(id="n-1", author="a", text=""), "o-1", 0, "")
    assert key(first) == "n-1"


EXAMPLE_READMES = sorted((ROOT / "examples").rglob("README.md"))
SHELL_BLOCK = re.compile(r"^```(?:sh|bash)\n(.*?)^```", re.M | re.S)
HEREDOC = re.compile(r"<<'PY'\n(.*?)^PY$", re.M | re.S)
# what a program or a module run by an example needs: an extra of the package, or itself
PROVIDED_BY = {
    "httpx": {"http", "cli", "httpx"},
    "uvicorn": {"cli", "uvicorn"},
    "celery": {"celery"},
    "redis": {"redis", "celery"},
    "django": {"django"},
    "flask": {"flask"},
    "starlette": {"asgi", "dashboard"},
    "gunicorn": {"gunicorn"},
    "service-webhooks": {"cli"},
}


def pip_installs(block: str) -> set[str]:
    """The extras and the packages the block's ``pip install`` lines name."""
    names: set[str] = set()
    for line in re.findall(r"^pip install (.*?)(?:\s+#.*)?$", block, re.M):
        for word in line.split():
            found = re.fullmatch(r"'?service-webhooks\[([\w,]+)\]'?", word)
            names |= set(found[1].split(",")) if found else {word.strip("'")}
    return names


@pytest.mark.parametrize(
    "readme", EXAMPLE_READMES, ids=[str(p.relative_to(ROOT)) for p in EXAMPLE_READMES]
)
def test_an_example_readme_installs_what_its_commands_use(readme: Path) -> None:
    """Followed word for word in a fresh environment, each command finds its program and
    each snippet its imports: the celery README's ``import httpx`` once raised
    ``ModuleNotFoundError`` after its own ``pip install`` line."""
    blocks = SHELL_BLOCK.findall(readme.read_text(encoding="utf-8"))
    installed = pip_installs(blocks[0])
    assert installed, f"{readme}: the first block installs nothing"
    used: set[str] = set()
    for block in blocks:
        for line in block.splitlines():
            if line and not line.startswith((" ", "#", "pip ", "export ", "cd ", "kill ")):
                used.add(line.split()[0])
        for snippet in HEREDOC.findall(block):
            used |= set(re.findall(r"^(?:import|from) (\w+)", snippet, re.M))
            for imports in re.findall(r"^import (.*)$", snippet, re.M):
                used |= {name.strip() for name in imports.split(",")}
    for name in sorted(used & PROVIDED_BY.keys()):
        assert PROVIDED_BY[name] & installed, f"{readme}: nothing installs {name}"


@pytest.mark.parametrize(
    "readme", EXAMPLE_READMES, ids=[str(p.relative_to(ROOT)) for p in EXAMPLE_READMES]
)
def test_an_example_readme_signs_with_the_secret_its_server_reads(readme: Path) -> None:
    """The server reads ``SERVICE_WEBHOOKS_SECRET`` with a development default and splits
    it (a rotation): a snippet that signs must read it the same way, or it is answered
    401 once the variable is set, and raises ``KeyError`` while it is unset."""
    default = re.compile(
        r'os\.environ\.get\(\s*(?:#[^\n]*\n\s*)?"SERVICE_WEBHOOKS_SECRET",\s*'
        r'"whsec-development-only-0123456789abcdef0123"\s*\)\.split\(\)\[0\]'
    )
    for block in SHELL_BLOCK.findall(readme.read_text(encoding="utf-8")):
        for snippet in HEREDOC.findall(block):
            if "sign(" in snippet:
                assert default.search(snippet), f"{readme}: {snippet}"

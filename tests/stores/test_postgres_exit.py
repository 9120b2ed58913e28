"""The sync pools a PostgreSQL store or inbox opened are closed as the process exits.

The docs make closing optional. Left to the pool's ``__del__`` during interpreter
finalization, Python 3.13 often cannot stop the pool's worker threads and psycopg_pool
waits 5 seconds for each (``couldn't stop thread 'service_webhooks-worker-0' within 5.0
seconds``): a script, ``flask service-webhooks list`` or a gunicorn
worker that never called ``close()`` took 20 seconds more per pool to exit. An
``atexit`` hook closes them first, in the process that opened them only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("psycopg")

pytestmark = pytest.mark.services

EXIT_WITHOUT_CLOSE = textwrap.dedent(
    """
    import atexit, json, sys

    pools = {}
    # registered before the library's hook, so it runs after it (atexit is LIFO)
    atexit.register(lambda: print(json.dumps({k: p.closed for k, p in pools.items()})))

    from service_webhooks.inbox import PostgresInbox
    from service_webhooks.stores import PostgresStore

    url, schema = sys.argv[1:]
    store = PostgresStore(url, table=f"{schema}.keys")
    store.create_schema()
    store.claim("k", "t", 60)
    inbox = PostgresInbox(url, table=f"{schema}.inbox")
    inbox.create_schema()
    inbox.search()
    pools.update(store=store._pool, inbox=inbox._pool)
    """  # and exits with both open: no close()
)

FORKED_CHILD_EXITS = textwrap.dedent(
    """
    import os, sys

    import psycopg

    from service_webhooks.stores import PostgresStore

    url, schema = sys.argv[1:]
    store = PostgresStore(url, table=f"{schema}.keys")
    store.create_schema()
    with store._pool.connection() as connection:
        backend = connection.info.backend_pid
    child = os.fork()
    if child == 0:
        sys.exit(0)  # a normal exit: the child's atexit hooks run
    os.waitpid(child, 0)
    with psycopg.connect(url, autocommit=True) as admin:
        alive = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (backend,)
        ).fetchone()[0]
    print(alive, store.claim("k", "t", 60).name)
    """
)


def _run(script: str, postgres_url: str, schema: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a new interpreter, to its exit (the atexit hooks run there)."""
    result = subprocess.run(
        [sys.executable, "-c", script, postgres_url, schema],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result


def test_pools_left_open_are_closed_at_exit(postgres_url: str, schema: str) -> None:
    result = _run(EXIT_WITHOUT_CLOSE, postgres_url, schema)
    assert json.loads(result.stdout.splitlines()[-1]) == {"store": True, "inbox": True}
    assert "couldn't stop thread" not in result.stderr


def test_a_forked_child_leaves_the_parents_pool_open(postgres_url: str, schema: str) -> None:
    result = _run(FORKED_CHILD_EXITS, postgres_url, schema)
    assert result.stdout.split() == ["1", "NEW"]  # the parent's session is still there

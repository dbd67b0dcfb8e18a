"""A real PostgreSQL server for the tests that need one.

The server is ``DECIRANK_TEST_POSTGRES_URL`` when set (a URL whose user may
create databases); otherwise a throwaway cluster is started from the
installed PostgreSQL binaries (Debian: ``apt-get install postgresql``). The
tests are skipped, saying why, when neither is possible. ``tests/conftest.py``
makes the fixtures available to every test.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest


def _psycopg():
    return pytest.importorskip("psycopg", reason="the postgres extra is not installed")


def _postgres_binary(name: str) -> str | None:
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return shutil.which(name) or (candidates[-1] if candidates else None)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """An admin URL of a running server."""
    _psycopg()
    given = os.environ.get("DECIRANK_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    initdb, pg_ctl = _postgres_binary("initdb"), _postgres_binary("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("no PostgreSQL server: install one (apt-get install postgresql) or set DECIRANK_TEST_POSTGRES_URL")
    run_as: list[str] = []
    workdir = tempfile.mkdtemp(prefix="decirank-pg-")
    if os.geteuid() == 0:
        # PostgreSQL refuses to run as root; its own user runs it, in a directory it owns.
        try:
            account = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server")
        os.chown(workdir, account.pw_uid, account.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(workdir, "data"), _free_port()
    subprocess.run(
        [*run_as, initdb, "-D", data, "-A", "trust", "-U", "decirank", "--no-sync"], check=True, capture_output=True
    )
    options = f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run(
        [*run_as, pg_ctl, "-D", data, "-o", options, "-l", os.path.join(workdir, "log"), "-w", "start"],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://decirank@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*run_as, pg_ctl, "-D", data, "-m", "immediate", "stop"], capture_output=True, check=False)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def database_url(postgres_server, monkeypatch) -> str:
    """A new, empty database for one test, set as DECIRANK_DATABASE_URL."""
    name = f"decirank_{uuid.uuid4().hex[:12]}"
    with _psycopg().connect(postgres_server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = urlunsplit(urlsplit(postgres_server)._replace(path=f"/{name}"))
    monkeypatch.setenv("DECIRANK_DATABASE_URL", url)
    return url

"""`tabletopic cluster status` beside brokers of another release: the brokers migrate the metadata
database as they start, so a newer CLI can meet a schema without the columns it reads. It says which
release reads the database, in one line, not a database error."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from typer.testing import CliRunner

from tabletopic import database
from tabletopic.cli import app
from tabletopic.cluster.db import MIGRATIONS, _add_admin_url


def test_cluster_status_on_an_older_schema_says_which_tabletopic_reads_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    engine = database.create_engine(url)
    # The database as the release before migration 5 left it: no cluster_nodes.admin_url (this
    # release's migration 1 creates the table with it, so it is dropped here).
    older = MIGRATIONS.index(_add_admin_url)
    database.migrate(engine, "cluster", MIGRATIONS[:older])
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE cluster_nodes DROP COLUMN admin_url"))
    status = ["cluster", "status", "--metadata-url", url]

    refused = CliRunner().invoke(app, status)
    assert refused.exit_code == 1, refused.output
    assert (
        f"schema is at version {older} and this tabletopic reads version {len(MIGRATIONS)}" in refused.output
    )
    assert "start one broker of this release" in refused.output and "Traceback" not in refused.output

    database.migrate(engine, "cluster", MIGRATIONS)
    shown = CliRunner().invoke(app, status)
    assert shown.exit_code == 0, shown.output
    assert "NODE\tRACK\tEPOCH" in shown.output and "(nothing yet)" in shown.output

    # A schema newer than this release knows (brokers of a later release): read, its migrations add.
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE schema_migrations SET version = version + 1 WHERE component = 'cluster'")
        )
    assert CliRunner().invoke(app, status).exit_code == 0


def test_cluster_status_on_a_database_without_a_cluster_says_so(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    empty = CliRunner().invoke(app, ["cluster", "status", "--metadata-url", url])
    assert empty.exit_code == 1 and "no cluster is registered in this database" in empty.output

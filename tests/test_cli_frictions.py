"""What a new user meets first: the CLI finds the node one way for every command, says in one line
when it is not there, prints plain text when piped, and start-up failures name the key to change."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from rich.table import Table

from tabletopic.broker.listeners import client_endpoint
from tabletopic.broker.security.client_login import node_listener
from tabletopic.cli import GROUP_OPTIONS, bench_names
from tabletopic.cli_common import hoist_group_options, load_config, print_table
from tabletopic.config import Config, ConfigError
from tests.support.ports import free_port
from tests.support.waiting import wait_until_sync

ROOT = Path(__file__).resolve().parents[1]


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tabletopic", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "60", **(env or {})},
        cwd=ROOT,
    )


def test_group_options_after_the_subcommand_are_moved_before_it() -> None:
    argv = ["tabletopic", "tables", "describe", "t1", "--admin-url", "http://h:1", "-o=x=y"]
    assert hoist_group_options(argv, GROUP_OPTIONS) == [
        "tabletopic", "tables", "--admin-url", "http://h:1", "-o=x=y", "describe", "t1",
    ]  # fmt: skip
    already = ["tabletopic", "tables", "--admin-url", "http://h:1", "list", "--json"]
    assert hoist_group_options(already, GROUP_OPTIONS) == already
    # Another group's own --config (topic configs) is never taken for the node's config file.
    create = ["tabletopic", "topics", "create", "t", "--config", "a=b", "-o", "listeners=PLAINTEXT://h:1"]
    assert hoist_group_options(create, GROUP_OPTIONS) == [
        "tabletopic", "topics", "-o", "listeners=PLAINTEXT://h:1", "create", "t", "--config", "a=b",
    ]  # fmt: skip


def bootstrap_of(config: Config) -> str:
    return client_endpoint(config).address


def test_the_bootstrap_comes_from_the_nodes_listeners() -> None:
    assert bootstrap_of(Config({"listeners": "PLAINTEXT://0.0.0.0:9999"})) == "127.0.0.1:9999"
    advertised = Config({"listeners": "PLAINTEXT://0.0.0.0:1", "advertised.listeners": "PLAINTEXT://k:2"})
    assert bootstrap_of(advertised) == "k:2"
    # The first listener mapped to PLAINTEXT wins over an earlier secured one; an IPv6 host keeps
    # its brackets in bootstrap.servers.
    mapped = Config(
        {
            "listeners": "SASL_SSL://0.0.0.0:1,INTERNAL://[::1]:2",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT",
        }
    )
    assert bootstrap_of(mapped) == "[::1]:2"
    assert bootstrap_of(Config({"listeners": "SSL://h:3"})) == "h:3"


def test_a_malformed_listener_names_its_key_to_a_client_command() -> None:
    """The CLI reads the listeners with the broker's own parser, so a client command refuses what
    the broker would refuse, in the same words."""
    with pytest.raises(
        ConfigError, match=r"^listener\.security\.protocol\.map: .*LISTENER_NAME:SECURITY_PROTOCOL"
    ):
        client_endpoint(Config({"listeners": "PLAINTEXT://h:1", "listener.security.protocol.map": "X"}))
    with pytest.raises(ConfigError, match=r"^listeners: .*add INTERNAL:PROTOCOL"):
        client_endpoint(Config({"listeners": "INTERNAL://h:1"}))
    # A client command ends with the configuration error's exit code, not a traceback.
    with pytest.raises(typer.Exit) as ended:
        node_listener(Config({"listeners": "INTERNAL://h:1"}))
    assert ended.value.exit_code == 2


def test_without_a_data_dir_commands_find_the_node_or_cluster_started_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make serve``, stopped, then ``make cluster`` in the same place: the commands reach the
    cluster, not the stopped node, and the other way round; a named data directory is always used."""
    monkeypatch.chdir(tmp_path)
    node, cluster = Path("data/endpoints.properties"), Path("cluster-data/endpoints.properties")
    for path, port in ((node, 1111), (cluster, 2222)):
        path.parent.mkdir()
        path.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port}\n")

    def found(data_dir: Path | None = None) -> str:
        return bootstrap_of(load_config(data_dir, None, None))

    os.utime(node, (time.time() - 60, time.time() - 60))
    assert found() == "127.0.0.1:2222"
    assert found(Path("data")) == "127.0.0.1:1111"
    os.utime(cluster, (time.time() - 120, time.time() - 120))
    assert found() == "127.0.0.1:1111"
    node.unlink()
    assert found() == "127.0.0.1:2222"


def test_topics_with_the_node_down_fail_in_one_line_quickly(tmp_path: Path) -> None:
    port = free_port()
    started = time.monotonic()
    result = cli("topics", "list", "-d", str(tmp_path), "-o", f"listeners=PLAINTEXT://127.0.0.1:{port}")
    assert time.monotonic() - started < 20  # not librdkafka's 30 s of retries
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "tabletopic serve" in lines[0]
    # The same through the environment, as `tabletopic serve` reads it.
    env = {"TABLETOPIC_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}"}
    by_env = cli("topics", "list", "-d", str(tmp_path), env=env)
    assert by_env.returncode == 1 and f"127.0.0.1:{port}" in by_env.stderr


def test_a_bootstrap_list_is_reached_through_any_of_its_brokers(capsys: pytest.CaptureFixture[str]) -> None:
    """``--bootstrap-server a:1,b:2`` as Kafka's tools take it (and as ``cluster up`` prints it):
    one broker that answers is enough; with none, every address is named. It was refused whole as
    'no Kafka listener at a:1,b:2 (Name or service not known)'."""
    from tabletopic.cli_common import require_listening

    dead = [free_port(), free_port()]
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        alive = listening.getsockname()[1]
        require_listening(f"127.0.0.1:{dead[0]}, 127.0.0.1:{alive}", "Kafka listener", "")
        with pytest.raises(typer.Exit):
            require_listening(",".join(f"127.0.0.1:{p}" for p in dead), "Kafka listener", "")
    said = capsys.readouterr().err
    assert f"no Kafka listener at 127.0.0.1:{dead[0]}, 127.0.0.1:{dead[1]} (Connection refused)" in said, said


def test_tables_takes_admin_url_after_the_subcommand() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = cli("tables", "list", "--admin-url", url)
    assert result.returncode == 1
    assert url in result.stderr  # the option was used, not refused as unknown
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_rich_tables_print_plain_tab_separated_lines_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    table = Table("topic", "table")
    long_name = "a_really_long_topic_name_" * 6
    table.add_row(long_name, "default.t")
    print_table(table)
    assert capsys.readouterr().out.splitlines() == ["topic\ttable", f"{long_name}\tdefault.t"]


def test_print_config_comment_lines_all_start_with_a_hash(tmp_path: Path) -> None:
    result = cli("sql", "--print-config", "-d", str(tmp_path), env={"COLUMNS": "40"})
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines and all(line.startswith(("#", "--conf ")) for line in lines), result.stdout
    assert "Warning" not in result.stderr and "Deprecat" not in result.stderr


def test_print_config_says_how_to_log_in_to_a_catalog_that_asks_for_one(tmp_path: Path) -> None:
    guarded = cli("sql", "--print-config", "-d", str(tmp_path), "-o", "authentication.method=BASIC")
    assert guarded.returncode == 0, guarded.stderr
    assert "--conf spark.sql.catalog.tabletopic.credential=USER:PASSWORD" in guarded.stdout, guarded.stdout
    assert "credential=" not in cli("sql", "--print-config", "-d", str(tmp_path)).stdout


def test_bench_help_and_readme_list_the_same_benchmarks() -> None:
    readme = (ROOT / "README.md").read_text()
    listed = re.search(r"^tabletopic bench\s+(\S+)", readme, re.MULTILINE)
    assert listed is not None
    assert sorted(listed.group(1).split("|")) == bench_names()
    help_text = cli("bench", "--help", env={"COLUMNS": "300"}).stdout
    assert all(name in help_text for name in bench_names())


def test_readme_documents_every_command() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(
        r"^│?\s*(\w[\w-]*)\s{2,}", cli("--help", env={"COLUMNS": "200"}).stdout, re.MULTILINE
    )
    for command in ("serve", "sql", "topics", "tables", "storage", "demo", "config", "bench"):
        assert f"tabletopic {command}" in readme, command
    assert commands  # the help listed commands at all


# ------------------------------------------------------------------------------ start-up failures


def serve_args(tmp_path: Path, **overrides: str) -> list[str]:
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "admin.listener": f"http://127.0.0.1:{free_port()}",
        "schema.registry.listener": f"http://127.0.0.1:{free_port()}",
        "catalog.listener": f"http://127.0.0.1:{free_port()}",
        "table.job.runner": "inprocess",
        **{k.replace("_", "."): v for k, v in overrides.items()},
    }
    args = ["serve", "--data-dir", str(tmp_path)]
    for key, value in settings.items():
        args += ["--override", f"{key}={value}"]
    return args


@pytest.mark.integration
@pytest.mark.parametrize(
    ("key", "url"),
    [("listeners", "PLAINTEXT://127.0.0.1:{port}"), ("admin.listener", "http://127.0.0.1:{port}")],
)
def test_a_busy_port_names_the_listener_and_the_key_without_a_traceback(
    tmp_path: Path, key: str, url: str
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = serve_args(tmp_path, **{key.replace(".", "_"): url.format(port=port)})
        result = cli(*args, timeout=120)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert len(errors) == 1, result.stderr[-3000:]
    assert f"127.0.0.1:{port}" in errors[0] and "in use" in errors[0] and f"change {key}" in errors[0]


def assert_one_line_naming(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert len(errors) == 1, result.stderr[-3000:]
    for needle in needles:
        assert needle in errors[0], errors[0]


@pytest.mark.integration
@pytest.mark.s3
def test_a_missing_or_invalid_bucket_or_bad_credentials_name_the_key(
    tmp_path: Path, s3_settings: dict[str, str]
) -> None:
    missing = {**s3_settings, "s3.bucket": "no-such-bucket-here"}
    result = cli(*serve_args(tmp_path / "a", **{k.replace(".", "_"): v for k, v in missing.items()}))
    assert_one_line_naming(result, "no-such-bucket-here", "does not exist", "s3.bucket")
    wrong = {**s3_settings, "s3.secret.key": "not-the-secret"}
    result = cli(*serve_args(tmp_path / "b", **{k.replace(".", "_"): v for k, v in wrong.items()}))
    assert_one_line_naming(result, "s3.access.key", "s3.secret.key")


@pytest.mark.integration
def test_an_unreachable_metadata_database_names_metadata_url(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://user:secret@127.0.0.1:{free_port()}/db"
    result = cli(*serve_args(tmp_path, metadata_url=url))
    assert_one_line_naming(result, "metadata database", "change metadata.url")
    assert "secret" not in result.stderr  # the password is not printed


def test_library_deprecation_warnings_stay_out_of_cli_output() -> None:
    code = (
        "from tabletopic.cli_common import quiet_library_warnings; quiet_library_warnings(); "
        "import confluent_kafka.schema_registry.avro; print('ok')"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert result.stdout.strip() == "ok" and "Warning" not in result.stderr, result.stderr


@pytest.fixture(scope="module")
def node_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The data directory of one running node (in-process table jobs) that the client commands
    find from it; the tests sharing it keep to topics of their own."""
    from tests.support.broker_process import BrokerProcess

    data_dir = tmp_path_factory.mktemp("cli-node")
    node = BrokerProcess(data_dir, {"table.job.runner": "inprocess"}).start()
    yield data_dir
    node.stop()


@pytest.mark.integration
def test_client_commands_find_a_node_with_moved_ports_from_its_data_directory(node_dir: Path) -> None:
    data_dir = node_dir
    topic = "moved_ports"
    created = cli(
        "topics", "create", topic, "-d", str(data_dir), "--config", "automq.table.topic.enable=true"
    )
    assert created.returncode == 0, created.stderr
    listed = cli("topics", "list", "-d", str(data_dir))
    assert listed.returncode == 0 and topic in listed.stdout, listed.stderr

    def table_listed() -> subprocess.CompletedProcess[str] | None:
        tables = cli("tables", "list", "-d", str(data_dir))
        return tables if tables.returncode == 0 and topic in tables.stdout else None

    # The table pipeline picks the new table topic up within a poll.
    wait_until_sync(table_listed, timeout=30, interval=0.5)
    # An explicit flag still wins over what the node recorded.
    elsewhere = cli("topics", "list", "-d", str(data_dir), "-b", f"127.0.0.1:{free_port()}")
    assert elsewhere.returncode == 1


# ------------------------------------------------------------------------------ issue 31: frictions


def test_a_misspelt_server_key_is_refused_naming_the_key_meant() -> None:
    from tabletopic.config import ConfigError, nearest_name

    with pytest.raises(ConfigError, match=r"unknown configuration key log\.levle: did you mean log\.level\?"):
        Config({"log.levle": "DEBUG"})
    # A Kafka key tabletopic has no use for is still accepted (a server.properties moves over as is).
    assert Config({"num.network.threads": "3", "log.retention.hours": "1"}).get("log.level")
    assert nearest_name("automq.table.topic.enabled", ["automq.table.topic.enable", "retention.ms"]) == (
        "automq.table.topic.enable"
    )
    assert nearest_name("segment.jitter", ["retention.ms"]) is None


def test_serve_with_a_misspelt_key_fails_in_one_line_naming_the_nearest_key(tmp_path: Path) -> None:
    result = cli("serve", "-d", str(tmp_path), "-o", "log.levle=DEBUG", timeout=120)
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[-3000:]
    assert "log.levle" in lines[0] and "did you mean log.level?" in lines[0]


@pytest.mark.integration
def test_a_start_up_error_is_not_buried_under_migration_lines(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli(*serve_args(tmp_path, admin_listener=f"http://127.0.0.1:{port}"), timeout=120)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "migrated to version" not in result.stderr, result.stderr[-3000:]


def test_misspelt_topic_configs_say_which_key_was_meant() -> None:
    from tabletopic.broker.topic_config_keys import InvalidTopicConfig
    from tabletopic.broker.topic_config_keys import validate_topic_configs as validate_kafka_keys
    from tabletopic.table.table_config import validate_table_topic_configs
    from tabletopic.validation.schema_validation import validate_topic_configs as validate_schema_keys

    with pytest.raises(ValueError, match=r"did you mean automq\.table\.topic\.enable\?"):
        validate_table_topic_configs({"automq.table.topic.enabled": "true"})
    with pytest.raises(
        InvalidTopicConfig, match=r"unknown topic config retention\.msx; did you mean retention\.ms\?"
    ):
        validate_kafka_keys({"retention.msx": "1"})
    with pytest.raises(ValueError, match=r"did you mean confluent\.value\.schema\.validation\?"):
        validate_schema_keys({"confluent.value.schema.validaton": "true"})


def test_client_errors_are_printed_in_words() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from tabletopic.cli_common import client_error

    exc = KafkaException(KafkaError(40, "unknown topic config x; did you mean y?"))
    assert client_error(exc) == "unknown topic config x; did you mean y? (INVALID_CONFIG)"
    assert "KafkaError{" not in client_error(KafkaException(KafkaError(36)))
    assert client_error(RuntimeError("plain")) == "plain"


def test_config_show_prints_values_as_a_properties_file_does(tmp_path: Path) -> None:
    result = cli("config", "show", "-d", str(tmp_path), "-o", "listeners=PLAINTEXT://h:1,SSL://h:2")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "admin.console.enable=true" in lines and "listeners=PLAINTEXT://h:1,SSL://h:2" in lines
    assert not [line for line in lines if line.endswith(("=True", "=False", "']"))], result.stdout


def test_piped_console_output_is_never_wrapped() -> None:
    code = "from tabletopic.cli_common import console; console.print('word ' * 60 + 'end')"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "40"},
    )
    assert result.stdout.count("\n") == 1 and result.stdout.rstrip().endswith("end"), result.stdout


def test_tables_describe_never_prints_snapshot_none() -> None:
    from tabletopic.table.cli import last_commit

    assert last_commit(None, None) == "no commit yet"
    assert "snapshot 7" in last_commit(time.time() - 5, 7)
    assert "None" not in last_commit(time.time() - 5, None)


def test_the_command_line_says_how_long_ago_in_the_consoles_words() -> None:
    # `tables list` said "1967s ago" where the console said "33 min ago".
    from tabletopic.cli_common import ago
    from tabletopic.table.cli import last_commit

    now = time.time()
    assert ago(now - 5) == "5 s ago" and ago(now - 1967) == "33 min ago" and ago(now - 9000) == "2.5 h ago"
    assert ago(None) == "never" and ago(None, never="-") == "-"
    assert last_commit(now - 1967, 7) == "last commit 33 min ago (snapshot 7)"


@pytest.mark.integration
def test_topic_config_typos_and_alter_config_with_config_against_a_node(node_dir: Path) -> None:
    data_dir = node_dir
    typo = cli("topics", "create", "t1", "-d", str(data_dir), "--config", "automq.table.topic.enabled=true")
    assert typo.returncode == 1
    lines = typo.stderr.strip().splitlines()
    assert len(lines) == 1, typo.stderr
    assert "did you mean automq.table.topic.enable?" in lines[0] and "INVALID_CONFIG" in lines[0]
    assert "KafkaError{" not in typo.stderr
    created = cli("topics", "create", "t1", "-d", str(data_dir))
    assert created.returncode == 0, created.stderr
    altered = cli("topics", "alter-config", "t1", "-d", str(data_dir), "--config", "retention.ms=60000")
    assert altered.returncode == 0, altered.stderr
    aliased = cli("topics", "alter-config", "t1", "-d", str(data_dir), "--set", "retention.bytes=1000000")
    assert aliased.returncode == 0, aliased.stderr
    described = cli("topics", "describe", "t1", "-d", str(data_dir))
    assert (
        "retention.ms=60000  (set)" in described.stdout
        and "retention.bytes=1000000  (set)" in described.stdout
    )
    again = cli("topics", "create", "t1", "-d", str(data_dir))
    assert (
        again.returncode == 1 and "KafkaError{" not in again.stderr and "TOPIC_ALREADY_EXISTS" in again.stderr
    )

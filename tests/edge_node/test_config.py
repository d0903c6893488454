"""The node's settings: environment, flags over it, and clear errors."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from edge.digest.settings import TLSMode
from edge.node.config import ConfigError, EdgeConfig, add_arguments, load_config
from tests.fixtures.ports import free_port

REQUIRED = {"COORDINATOR_URL": "https://seed.example.net:8443", "NODE_TOKEN": "seed_abc"}


def test_two_settings_are_enough():
    config = load_config(env=REQUIRED)
    assert config == EdgeConfig(coordinator_url="https://seed.example.net:8443", node_token="seed_abc")
    assert (config.nntp.tls, config.nntp.port_or_default, config.nntp_connections) == (TLSMode.IMPLICIT, 563, 8)
    assert (config.max_leases, config.chunks_in_flight, config.batch_format) == (3, 12, "msgpack")
    assert config.spool_dir is None
    assert "seed_abc" not in repr(config)


@pytest.mark.parametrize("missing", ["COORDINATOR_URL", "NODE_TOKEN"])
def test_the_required_ones_are_named_when_missing(missing):
    env = {k: v for k, v in REQUIRED.items() if k != missing}
    with pytest.raises(ConfigError, match=f"{missing} must be set"):
        load_config(env=env)


def test_flags_override_the_environment():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = vars(parser.parse_args(["--nntp-connections", "3", "--batch-format", "JSON", "--nntp-ssl", "0"]))
    config = load_config(flags, env={**REQUIRED, "NNTP_CONNECTIONS": "5", "NNTP_HOST": "news.provider.net"})
    assert (config.nntp_connections, config.batch_format, config.nntp.host) == (3, "json", "news.provider.net")
    assert (config.nntp.tls, config.nntp.port_or_default) == (TLSMode.NONE, 119)


def test_a_bad_flag_is_named_as_the_flag():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = vars(parser.parse_args(["--nntp-port", "nntp"]))
    with pytest.raises(ConfigError) as error:
        load_config(flags, env={**REQUIRED, "NNTP_PORT": "119"})
    assert str(error.value).startswith("--nntp-port must be an integer, got 'nntp'")


def test_the_password_stays_out_of_repr():
    config = load_config(env={**REQUIRED, "NNTP_USER": "me", "NNTP_PASSWORD": "hunter2"})
    assert (config.nntp.user, config.nntp.password) == ("me", "hunter2")
    assert "hunter2" not in repr(config)


def test_secrets_have_no_flag():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = {option for action in parser._actions for option in action.option_strings}
    assert "--node-token" not in options and "--nntp-password" not in options
    assert "--coordinator-url" in options


@pytest.mark.parametrize(
    "env, message",
    [
        ({"COORDINATOR_URL": "seed.example.net"}, "COORDINATOR_URL must be an https:// URL with a host"),
        ({"COORDINATOR_URL": "ftp://seed.example.net"}, "COORDINATOR_URL must be an https:// URL with a host"),
        ({"COORDINATOR_URL": "http://seed.example.net"}, "COORDINATOR_URL is plain http://"),
        (
            {"COORDINATOR_URL": "http://seed.example.net", "COORDINATOR_INSECURE": "0"},
            "COORDINATOR_URL is plain http://",
        ),
        ({"COORDINATOR_INSECURE": "maybe"}, "COORDINATOR_INSECURE must be a boolean"),
        ({"COORDINATOR_URL": "https://x:99999"}, "COORDINATOR_URL has a bad port"),
        ({"NODE_TOKEN": "two words"}, "NODE_TOKEN must be the node token"),
        ({"NNTP_CONNECTIONS": "0"}, "NNTP_CONNECTIONS must be between 1 and 256, got 0"),
        ({"NNTP_PORT": "nntp"}, "NNTP_PORT must be an integer, got 'nntp'"),
        ({"NNTP_SSL": "maybe"}, "NNTP_SSL must be a boolean"),
        ({"NNTP_TIMEOUT": "-1"}, "NNTP_TIMEOUT must be a positive number of seconds"),
        ({"COORDINATOR_GIVE_UP": "nan"}, "COORDINATOR_GIVE_UP must be a positive number of seconds"),
        ({"BATCH_FORMAT": "xml"}, "BATCH_FORMAT must be one of msgpack, json"),
        (
            {"COORDINATOR_CAFILE": "/nonexistent/ca.pem"},
            "COORDINATOR_CAFILE '/nonexistent/ca.pem' is not a readable file",
        ),
        ({"NNTP_SSL": "1", "NNTP_STARTTLS": "1"}, "NNTP_SSL and NNTP_STARTTLS exclude each other"),
        ({"NNTP_PASSWORD": "secret"}, "NNTP_PASSWORD is set but NNTP_USER is not"),
        ({"NNTP_CAFILE": "/nonexistent/ca.pem"}, "NNTP_CAFILE '/nonexistent/ca.pem' is not a readable file"),
    ],
)
def test_bad_values_are_named(env, message):
    with pytest.raises(ConfigError) as error:
        load_config(env={**REQUIRED, **env})
    assert str(error.value).startswith(message)


def test_starttls_means_the_plain_port_upgraded():
    config = load_config(env={**REQUIRED, "NNTP_STARTTLS": "yes"})
    assert (config.nntp.tls, config.nntp.port_or_default) == (TLSMode.STARTTLS, 119)


def test_the_spool_directory_is_made(tmp_path):
    config = load_config(env={**REQUIRED, "SPOOL_DIR": str(tmp_path / "a" / "spool")})
    assert (tmp_path / "a" / "spool").is_dir() and config.spool_dir == str(tmp_path / "a" / "spool")
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="SPOOL_DIR cannot be made"):
        load_config(env={**REQUIRED, "SPOOL_DIR": str(tmp_path / "file" / "spool")})


@pytest.mark.parametrize(("cores", "max_leases", "expected"), [(1, 3, 0), (2, 3, 0), (3, 3, 2), (4, 3, 3), (16, 6, 6)])
def test_digest_processes_default_to_the_cores_but_one_up_to_max_leases(monkeypatch, cores, max_leases, expected):
    monkeypatch.setattr("edge.node.config._cores", lambda: cores)
    config = load_config(env={**REQUIRED, "MAX_LEASES": str(max_leases)})
    assert config.digest_processes is None and config.digest_processes_or_default == expected


def test_digest_processes_can_be_set_and_are_checked():
    assert load_config(env={**REQUIRED, "DIGEST_PROCESSES": "0"}).digest_processes_or_default == 0
    assert load_config(env={**REQUIRED, "DIGEST_PROCESSES": "5"}).digest_processes_or_default == 5
    for bad in ("-1", "65", "two"):
        with pytest.raises(ConfigError, match="DIGEST_PROCESSES"):
            load_config(env={**REQUIRED, "DIGEST_PROCESSES": bad})


def test_plain_http_needs_coordinator_insecure_and_is_then_warned_about():
    with pytest.raises(ConfigError) as error:
        load_config(env={**REQUIRED, "COORDINATOR_URL": "http://seed.example.net:8080"})
    assert "use https://, or set COORDINATOR_INSECURE=1" in str(error.value)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = vars(parser.parse_args(["--coordinator-url", "http://seed.example.net"]))
    with pytest.raises(ConfigError) as error:
        load_config(flags, env=REQUIRED)
    assert str(error.value).startswith("--coordinator-url is plain http://")
    insecure = load_config(
        env={**REQUIRED, "COORDINATOR_URL": "http://seed.example.net:8080", "COORDINATOR_INSECURE": "1"}
    )
    assert (insecure.coordinator_url, insecure.coordinator_insecure) == ("http://seed.example.net:8080", True)
    assert "unencrypted" in insecure.warnings[0]
    assert load_config(env=REQUIRED).warnings == ()
    # The setting allows http://; an https:// URL with it set is simply https.
    assert load_config(env={**REQUIRED, "COORDINATOR_INSECURE": "1"}).warnings == ()


def _edge_run(tmp_path, **env) -> subprocess.CompletedProcess:
    # A server the node could use (nothing listens there): it asks the coordinator first.
    env = {
        "PATH": os.environ.get("PATH", ""),
        "NODE_TOKEN": "seed_x",
        "COORDINATOR_GIVE_UP": "1",
        "NNTP_HOST": "127.0.0.1",
        "NNTP_PORT": str(free_port()),
        "NNTP_SSL": "0",
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "edge", "run", "--progress", "json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_edge_run_refuses_a_plain_http_coordinator_unless_told(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    refused = _edge_run(tmp_path, COORDINATOR_URL=url)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip() == (
        "edge run: COORDINATOR_URL is plain http://, which would send the node token unencrypted: use https://,"
        " or set COORDINATOR_INSECURE=1 on a test network"
    )
    # Told so, the node runs: it asks the coordinator (nothing listens there) and gives up (exit 4).
    ran = _edge_run(tmp_path, COORDINATOR_URL=url, COORDINATOR_INSECURE="1")
    assert ran.returncode == 4, ran.stderr
    start = json.loads(ran.stderr.splitlines()[0])
    assert (start["event"], start["coordinator"]) == ("start", url)
    assert "unencrypted" in start["warning"]
    assert "Traceback" not in ran.stderr

"""A command's own flags and ``--set``: which value wins (streaming/cli_options.py)."""

from __future__ import annotations

from streaming.cli_options import load_or_exit

SET = {"kafka.bootstrap_servers": "set-host:1"}


def test_a_flag_left_out_keeps_the_set_value() -> None:
    # `isrwatch collect admin --set kafka.bootstrap_servers=...` without --bootstrap-servers
    config = load_or_exit(None, SET, {"kafka.bootstrap_servers": None})
    assert config.kafka.bootstrap_servers == "set-host:1"


def test_a_flag_given_beats_set() -> None:
    config = load_or_exit(None, SET, {"kafka.bootstrap_servers": "flag-host:2"})
    assert config.kafka.bootstrap_servers == "flag-host:2"


def test_without_either_the_default_stands() -> None:
    config = load_or_exit(None, {}, {"kafka.bootstrap_servers": None})
    assert config.kafka.bootstrap_servers == "127.0.0.1:9092"

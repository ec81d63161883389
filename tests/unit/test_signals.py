"""CLI-3, CLI-8: the signals `bkill -s` and `xcecli kill -s` take (xced.model.signals), by name
or number as LSF's bkill -s takes them (https://www.ibm.com/docs/en/SSWRJV_10.1.0/lsf_command_ref/bkill.1.html,
docs/lsf-behaviour.md section 5)."""

from __future__ import annotations

import signal

import pytest

from xced.model.signals import parse_signal


@pytest.mark.parametrize("text, want", [("USR1", signal.SIGUSR1), ("SIGUSR1", signal.SIGUSR1), ("usr1", signal.SIGUSR1),
                                        ("sigterm", signal.SIGTERM), ("9", signal.SIGKILL), ("15", signal.SIGTERM),
                                        (" INT ", signal.SIGINT), ("IOT", signal.SIGABRT), ("2", signal.SIGINT)])
def test_a_signal_by_name_or_number(text, want):
    assert parse_signal(text) == (int(want), want.name)


@pytest.mark.parametrize("text", ["", "FOO", "SIG", "0", "-9", "99", "1000000", "USR1X", "9.0", "KILL TERM"])
def test_anything_else_is_refused_listing_the_valid_signals(text):
    with pytest.raises(ValueError) as e:
        parse_signal(text)
    msg = str(e.value)
    assert msg.startswith(f"signal {text!r}: not a signal") and "KILL (9)" in msg and "USR1 (10)" in msg

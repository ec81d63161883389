"""The usage error of xcecli's commands, raised by code that no parser library runs
(xcecli.submitting, xcecli.views) so that the Typer commands and the start-up fast path
(xcecli.fast, CLI-7) share it: Typer turns it into its usage error (exit 2, CLI-1); the fast
path declines and lets Typer run the same command line, which reports it the same way."""

from __future__ import annotations


class Usage(Exception):
    """A malformed argument, found before anything was sent to the daemon: `message`, one
    line saying what was wrong and what would be valid."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

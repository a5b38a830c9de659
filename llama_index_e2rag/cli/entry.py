"""``e2rag`` command line: index files, query a store, show what is in it, run the demo.

Models are resolved as everywhere else (``Settings`` > ``OPENAI_API_KEY`` > offline default), so
with nothing configured the CLI builds LLM-free grounded graphs with MiniLM embeddings and answers
extractively. This module assembles the parser from the command modules (one per command: its
flags and its ``run``) and runs the command; a failure ends with the one line ``cli.reasons``
chooses by the exception's class and a non-zero exit, never a traceback. Module imports are
light (the commands import what they need when they run), so that even an early Ctrl-C finds
``main``.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn, Optional, Sequence

from llama_index_e2rag.cli import (
    demo,
    index,
    migrate,
    query,
    reasons,
    repair,
    serve,
    show,
    timeline,
)
from llama_index_e2rag.cli import errors as cli_errors

#: What ``e2rag --help`` says first (plain text: argparse prints it as it is).
DESCRIPTION = (
    "e2rag: index books (text, PDF, EPUB, DOCX, HTML) into a narrative store, query it (or serve "
    "it over HTTP), show what it holds, run the demo."
)
#: The commands in the order ``e2rag --help`` lists them; each module adds its own subparser.
COMMANDS = (index, query, serve, show, timeline, repair, migrate, demo)


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line (``e2rag: error: ...``) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"e2rag: error: {message} (see e2rag --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="e2rag", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``e2rag`` script; returns the exit code.

    0 on success; 1 with one line ``e2rag: error: <reason>`` on stderr for any failure (an
    unexpected one also names the log file holding its traceback); 130 with ``e2rag:
    interrupted`` for Ctrl-C; 2 for usage errors (argparse); a closed stdout pipe (``| head``)
    ends quietly with 1. As the ``e2rag`` script (``argv`` None), a Ctrl-C ends the process
    once the message is out: the work it started has been stopped by then (``background``),
    and tearing down every module took seconds.
    """
    args = build_parser().parse_args(argv)
    restore_ctrl_c = cli_errors.quiet_workers_on_ctrl_c()
    try:
        code = _run(args, sys.argv[1:] if argv is None else argv)
    finally:
        restore_ctrl_c()
    if code == 130 and argv is None:
        cli_errors.end_process(code)
    return code


def _run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe fails here, not in Python's flush at exit
        return code
    except SystemExit:
        raise
    except BaseException as exc:  # every failure ends as one line, never a traceback
        try:
            return reasons.report(exc, getattr(args, "store", None), argv)
        except KeyboardInterrupt:  # a second Ctrl-C while reporting the first failure
            cli_errors.say("e2rag: interrupted")
            return 130


if __name__ == "__main__":
    sys.exit(main())

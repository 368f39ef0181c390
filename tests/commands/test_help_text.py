"""`mpsim ... --help` explains every option: each argument of each command and subcommand has a help
text, and each command has a line in the listing of its parent."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from mpsim.cli import build_parser


def _without_help(parser: argparse.ArgumentParser, path: str) -> Iterator[str]:
    """'<command path> <option or positional>' for every argument of `parser` (recursively through its
    subcommands) whose help is missing, blank or suppressed."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if not str(listed.get(name) or "").strip():
                    yield f"{path} {name} (no line in `{path} --help`)"
                yield from _without_help(sub, f"{path} {name}")
        elif action.help in (None, argparse.SUPPRESS) or not str(action.help).strip():
            yield f"{path} {'/'.join(action.option_strings) or action.dest}"


def test_every_option_of_every_command_has_help_text() -> None:
    missing = list(_without_help(build_parser(), "mpsim"))
    assert missing == [], f"{len(missing)} arguments without help text:\n" + "\n".join(missing)


def test_the_walk_reaches_the_subcommands_and_sees_a_missing_help() -> None:
    parser = argparse.ArgumentParser(prog="t")
    sub = parser.add_subparsers(dest="command")
    leaf = sub.add_parser("leaf", help="a command")
    leaf.add_argument("--size", type=int, help="  ")
    leaf.add_argument("path")
    sub.add_parser("bare")
    assert list(_without_help(parser, "t")) == ["t leaf --size", "t leaf path",
                                                "t bare (no line in `t --help`)"]

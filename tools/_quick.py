"""``--quick``, shared by the scripts in tools/ (tests/test_tools.py runs each in it): the quick mode sets some
options itself, and refuses them given beside it rather than silently replacing them."""

from __future__ import annotations

import argparse


def apply_quick(parser: argparse.ArgumentParser, args: argparse.Namespace, **settings) -> None:
    """With ``args.quick``, set ``settings`` (destination -> value) on ``args``; one the command line gave too (a
    value other than the parser's default) is refused in one line (argparse's usage error, exit 2)."""
    if not args.quick:
        return
    flags = {a.dest: max(a.option_strings, key=len) for a in parser._actions if a.option_strings}
    given = [flags[d] for d in settings if getattr(args, d) != parser.get_default(d)]
    if given:
        parser.error(f"{', '.join(given)}: --quick sets {'it' if len(given) == 1 else 'them'} itself")
    for dest, value in settings.items():
        setattr(args, dest, value)

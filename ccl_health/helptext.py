"""The help formatter of every command: each option's help says its
default (unless the help text names it already); descriptions keep their
line breaks."""

import argparse


class Formatter(argparse.RawDescriptionHelpFormatter):

    def _get_help_string(self, action):
        text = action.help or ''
        if 'default' not in text and action.option_strings and \
                action.default not in (None, False, argparse.SUPPRESS):
            text += ' (default: %(default)s)'
        return text


def apply(parser):
    """``parser`` and all its sub-commands' parsers use :class:`Formatter`."""
    parser.formatter_class = Formatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                apply(sub)
    return parser

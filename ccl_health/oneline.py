"""The one function every line that leaves the suite for another program
goes through: a drain reason (``scontrol update ... reason=``), the hook's
verdict line (which NHC and ``site/slurm/healthcheck.sh`` hand to
``scontrol`` and ``logger``), and the nightly's mail lines.

Text in those lines comes partly from programs we do not control (an NCCL
``WARN`` line, a launcher's error, a file name): an escape sequence in it
would rewrite the terminal of whoever reads ``sinfo -R`` or the syslog; a
carriage return would hide what came before it; a NUL would cut the
string short in C; a newline would make a second syslog record or a
second NHC line.  :func:`clean` removes them:

* ANSI escape sequences whole (CSI ``ESC [ ... final``, OSC
  ``ESC ] ... BEL / ESC \\``, and the two-character ``ESC x``);
* every other C0 control character (U+0000-U+001F), DEL (U+007F) and the
  C1 controls (U+0080-U+009F); tab, newline, CR, vertical tab and form
  feed become a space;
* runs of spaces become one; the result is stripped (``squeeze=False``:
  the spaces are kept, for a mail line's indent);
* capped at ``limit`` characters, the cut marked with ``...``.

The cap of a line that can become a Slurm drain reason or a syslog message
is :data:`REASON_MAX` (256).  Slurm keeps the reason as given, but a
person reads it in ``sinfo -R`` / ``scontrol show node`` (one line), and
the same line goes to syslog through ``logger``, whose messages RFC 5424
(section 6.1) only requires a receiver to take up to 480 octets, header
included.  The full detail is never lost: the hook's ``--json`` document
and the performance database keep it.
"""

import re

#: the longest line that may become a Slurm drain reason or a syslog
#: message (see the module's text)
REASON_MAX = 256

#: the cut's mark
ELLIPSIS = '...'

_ESCAPES = re.compile(
    r'\x1b\[[0-?]*[ -/]*[@-~]'          # CSI: ESC [ params intermediates final
    r'|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?'   # OSC ... BEL or ST
    r'|\x9b[0-?]*[ -/]*[@-~]'           # the 8-bit CSI
    r'|\x1b[@-_]?')                     # ESC + one character, or a lone ESC
_SPACES = re.compile(r'[\t\n\v\f\r ]+')
_CONTROLS = re.compile(r'[\x00-\x08\x0e-\x1f\x7f-\x9f]')


def clean(text, limit=REASON_MAX, squeeze=True):
    """``text`` (any object: ``str()`` of it) as one line of printable
    characters, at most ``limit`` characters long (``None``: no cap).
    ``squeeze=False`` keeps the spaces as they are (a mail line's indent)
    and only turns the other white space into spaces."""
    s = text if isinstance(text, str) else str(text)
    s = _ESCAPES.sub('', s)
    if squeeze:
        s = _SPACES.sub(' ', s)
        s = _CONTROLS.sub('', s)
        s = _SPACES.sub(' ', s).strip()
    else:
        s = _CONTROLS.sub('', re.sub(r'[\t\n\v\f\r]', ' ', s)).rstrip()
    if limit is not None and len(s) > limit:
        s = s[:max(0, limit - len(ELLIPSIS))].rstrip() + ELLIPSIS
    return s

"""The state of the back-to-service loop (``scripts/fleet --resume``,
:mod:`ccl_health.fleet.resume`): ``<output>/fleet/nodes.json``, each
node's drains, re-checks and resumes, its counts and its last check, and
the locks of the loop.  Every change is made under the state's lock on the
file read again (a fleet run draining while a resume settles: both kept),
and written whole and atomically.  Lock files are never opened through a
link, nor used when another user owns them."""

import contextlib
import datetime
import fcntl
import json
import os
import re
import stat
import tempfile
from typing import Dict, Optional

from ccl_health import CclHealthError, safefile

STATE = 'nodes.json'


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        '%Y-%m-%dT%H:%M:%SZ')


def open_lock(path: str) -> int:
    """The descriptor of the lock file ``path``, made if missing: never
    through a link (O_NOFOLLOW), only a regular file of this user."""
    safefile.own_dir(os.path.dirname(path), 'fleet state folder')
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW |
                     os.O_CLOEXEC, 0o600)
    except OSError as err:
        raise CclHealthError(f'{path}: cannot open the lock ({err.strerror};'
                             f' a link is never followed)') from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        os.close(fd)
        raise CclHealthError(f'{path}: not a regular file of this user: not '
                             f'used as a lock')
    return fd


@contextlib.contextmanager
def locked(path: str, wait: bool = True):
    """Inside, this process holds the lock ``path`` (flock); yields True,
    or False at once when ``wait`` is false and another holds it."""
    fd = open_lock(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def lock_path(output_dir: str, partition: Optional[str]) -> str:
    """The lock of the resume runs of ``partition`` (all: ``all``)."""
    name = re.sub(r'[^A-Za-z0-9._-]', '_', partition or '') or 'all'
    return os.path.join(output_dir, 'fleet', f'resume-{name}.lock')


def state_path(output_dir: str) -> str:
    return os.path.join(output_dir, 'fleet', STATE)


def state_dir(output_dir: str, make: bool = False) -> str:
    """The state's folder (``<output>/fleet``), made when ``make``; one
    that is there is used only when it is a real folder of this user
    (:func:`ccl_health.safefile.own_dir`): in another user's folder a
    planted ``nodes.json`` would resume its nodes unchecked."""
    folder = os.path.dirname(state_path(output_dir))
    if make or os.path.lexists(folder):
        safefile.own_dir(folder, 'fleet state folder')
    return folder


def load_state(output_dir: str) -> dict:
    """``{node: {'passes', 'checks', 'fails', 'events': [{time, event,
    reason}], 'last_check': {time, outcome, reason}}}`` (events: drain,
    pass, fail, could-not-check, resume).  A state file (or its folder)
    of another user, or a link, is refused (:class:`CclHealthError`),
    never trusted."""
    state_dir(output_dir)
    try:
        text = safefile.read_own(state_path(output_dir), 'fleet state')
        doc = json.loads(text) if text is not None else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def save_state(output_dir: str, state: dict):
    """The whole state, atomically: a new file of its own (never through a
    link), then renamed over the old one."""
    _save_json(output_dir, state_path(output_dir), state)


def _save_json(output_dir: str, path: str, doc: dict):
    """``doc`` into ``path`` (in the state folder of ``output_dir``, of
    this user), atomically and durably (fsync before the rename): a new
    file of its own, never through a link."""
    state_dir(output_dir, make=True)
    fd, tmp = tempfile.mkstemp(prefix='.nodes-', suffix='.tmp',
                               dir=os.path.dirname(path))
    try:
        mask = os.umask(0o022)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, 'w') as fp:
            json.dump(doc, fp, indent=1, sort_keys=True)
            fp.flush()
            os.fsync(fp.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# -- a resume's intent: what it is doing, kept before it is done -------------
#
# A resume puts drained nodes back into service (``state=resume``, inside a
# MAINT reservation) before their checks pass.  SIGKILL (Slurm's KillWait,
# the OOM killer, a lost launch host) cannot be acted on, so what the run is
# about to do is written first, durably: its reservation, then the nodes it
# resumes with their reasons.  A node leaves the intent once it is decided
# (resumed after its passes, or drained again); the file goes when the
# reservation is deleted.  Whatever run comes next for the partition (a
# resume, or a fleet run) finds an intent left behind and finishes it:
# each node still listed is drained again, the reservation deleted.

def intent_path(output_dir: str, partition: Optional[str]) -> str:
    """The intent of the resume runs of ``partition``, beside its lock."""
    return lock_path(output_dir, partition)[:-len('.lock')] + '.intent.json'


def load_intent(output_dir: str, partition: Optional[str]) -> Optional[dict]:
    """``{'reservation', 'nodes': {node: reason}, 'resumed': bool, 'pid',
    'host', 'started'}`` of a resume not finished, or None.  A file (or
    folder) of another user, or a link, is refused, never acted on."""
    state_dir(output_dir)
    try:
        text = safefile.read_own(intent_path(output_dir, partition),
                                 'unfinished resume')
        if text is None:
            return None
        doc = json.loads(text)
    except ValueError as err:
        raise CclHealthError(f'{intent_path(output_dir, partition)}: an '
                             f'unfinished resume that cannot be read '
                             f'({err}): check its nodes by hand, then remove '
                             f'it') from None
    return doc if isinstance(doc, dict) else None


def save_intent(output_dir: str, partition: Optional[str], intent: dict):
    _save_json(output_dir, intent_path(output_dir, partition), intent)


def drop_intent(output_dir: str, partition: Optional[str]):
    with contextlib.suppress(FileNotFoundError):
        os.unlink(intent_path(output_dir, partition))


def update_state(output_dir: str, change):
    """``change(state)`` on the state read under its lock, then saved:
    what another run wrote meanwhile is kept."""
    state_dir(output_dir, make=True)
    with locked(state_path(output_dir) + '.lock'):
        state = load_state(output_dir)
        out = change(state)
        save_state(output_dir, state)
    return out


def note(state: dict, node: str, event: str, reason: str = '',
         when: Optional[str] = None):
    ent = state.setdefault(node, {'passes': 0, 'checks': 0, 'fails': 0,
                                  'events': []})
    for k in ('passes', 'checks', 'fails'):
        ent.setdefault(k, 0)
    ent.setdefault('events', [])
    if event:
        ent['events'].append({'time': when or _now(), 'event': event,
                              'reason': reason})
    return ent


def last_check(state: dict, node: str, outcome: str, reason: str = ''):
    """A node's last check: what decides whether it may be a partner."""
    note(state, node, '')['last_check'] = {'time': _now(),
                                           'outcome': outcome,
                                           'reason': reason}


def note_drains(output_dir: str, reasons: Dict[str, str]):
    """A fleet run drained these nodes: a new drain starts a new count."""
    def change(state):
        for n, why in reasons.items():
            ent = note(state, n, 'drain', why)
            ent.update(passes=0, checks=0, fails=0)
    update_state(output_dir, change)


def note_fleet_checks(output_dir: str, summary: dict):
    """A fleet run's outcome per node as its last check: healthy ->
    pass; a straggler, a bad node, one that could not be checked -> not."""
    def change(state):
        for n in summary.get('healthy', []):
            if n in summary.get('stragglers', {}):
                last_check(state, n, 'straggler', summary['stragglers'][n])
            else:
                last_check(state, n, 'pass', 'fleet run')
        for n, why in summary.get('bad', {}).items():
            last_check(state, n, 'fail', why)
        for n, why in summary.get('could_not_check', {}).items():
            last_check(state, n, 'could-not-check', why)
    update_state(output_dir, change)


def timeline(state: dict, nodes=None) -> dict:
    """``{node: events}`` of the nodes with events (of ``nodes``)."""
    return {n: state[n]['events'] for n in sorted(state)
            if state[n].get('events') and (nodes is None or n in nodes)}

"""A failing check's evidence, kept where its line says.

The probes write their NCCL debug logs (and their output,
``output.txt``) in a work folder; the judge's reason may name a log
(``NCCL WARN of class ... in <path>``), and that line becomes the drain
reason.  So the work folder is made where it can stay: a new folder
``check-<time>-XXXXXX`` (``mkdtemp``: unique; the time to the
microsecond, :func:`ccl_health.identity.stamp`) under the evidence folder
(``--evidence-dir``, ``$CCL_HEALTH_EVIDENCE_DIR``, else
``<state>/ccl-health/evidence``, :func:`ccl_health.outputs.state_dir`),
which must be a real folder of this user that no one else can write in
(:func:`ccl_health.safefile.private_dir`).

* HEALTHY: the work folder is removed.
* Not healthy, with files in it: kept (its path is in the ``--json``
  document and the record, ``evidence``); then the older ``check-*``
  folders are removed, the oldest first, until at most
  :data:`~ccl_health.hook.settings.EVIDENCE_KEEP` are left and they take at
  most :data:`~ccl_health.hook.settings.EVIDENCE_MB` MiB (the one just kept
  stays whatever its size).
* Where the evidence folder cannot be used, the work folder is a temporary
  one, removed at the end, and the line names no path of it: a log is
  named by its file name only (``nccl-debug.n01.1234.log``).

A signal removes the work folder like any temporary folder
(:func:`ccl_health.hook.bounded.remove_folders`); one left by SIGKILL is
removed by a later pruning.
"""

import os
import re
import shutil
import stat

from ccl_health import CclHealthError, identity, safefile
from ccl_health.hook import bounded as run
from ccl_health.oneline import clean

#: the name of a kept check's folder starts with this
PREFIX = 'check-'


def workdir(settings):
    """``(work folder, kept)``: a new folder under the evidence folder
    (``kept`` is True), else a temporary one (``kept`` False: why not is
    ``settings``' evidence folder's problem, said in the ``--json``
    document as ``evidence``)."""
    root = getattr(settings, 'evidence_dir', '') or ''
    if root:
        try:
            os.makedirs(os.path.dirname(root), exist_ok=True)
            safefile.private_dir(root, 'evidence folder')
            # mkdtemp's name is unique; the time is an identity's, short
            # (the line that names a log in it is a drain reason of 256)
            return run.temporary_folder(f'{PREFIX}{identity.stamp()}-',
                                        root), ''
        except (OSError, CclHealthError) as err:
            return run.temporary_folder(), f'not kept: {err}'
    return run.temporary_folder(), 'not kept: no evidence folder'


def settle(res, work, not_kept, settings):
    """Keep ``work`` for a result that is not healthy (and prune the
    older ones), else remove it; a line that would name a path of a
    removed folder names the file only.  Sets ``res.evidence``."""
    keep = res.code != 0 and not not_kept and _has_files(work)
    if keep:
        run.keep_folder(work)
        res.evidence = work
        prune(os.path.dirname(work), settings.evidence_keep,
              settings.evidence_bytes, spare=work)
        # the printed line is capped (:func:`ccl_health.oneline.clean`): a
        # path it names is whole, else the kept folder instead of a file
        # deep in it, else no path (the --json document and the record
        # still name the folder)
        line = res.line
        for cand in (line, re.sub(_paths(work), work, line)):
            if _whole_in_printed(cand, work):
                res.line = cand
                break
        else:
            res.line = unpath(line, work)
        return res
    run.remove_folder(work)
    res.evidence = not_kept if res.code != 0 else ''
    res.line = unpath(res.line, work)
    res.attempt_notes = [unpath(n, work) for n in
                         getattr(res, 'attempt_notes', []) or []]
    for p in res.probes:
        if getattr(p, 'why', None):
            p.why = unpath(p.why, work)
    return res


def _whole_in_printed(line, work):
    """Whether every path under ``work`` in ``line`` is whole in the
    printed (capped) line."""
    printed = clean(line)
    return all(m.group(0) in printed for m in
               re.finditer(_paths(work) + '?', line))


def _paths(work):
    """A pattern of the paths under ``work``."""
    return re.escape(work.rstrip(os.sep)) + r'(?:/\S*)'



def unpath(text, folder):
    """``text`` with each path under ``folder`` cut to its file name."""
    return re.sub(re.escape(folder.rstrip(os.sep)) + r'/(?:[^\s/]+/)*'
                  r'([^\s/]+)', r'\1', text or '')


def _has_files(folder):
    for _, _, files in os.walk(folder):
        if files:
            return True
    return False


def _size(folder):
    total = 0
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                pass
    return total


def prune(root, keep, max_bytes, spare=None):
    """Remove ``check-*`` folders of this user under ``root``, the oldest
    first, until at most ``keep`` are left taking at most ``max_bytes``;
    ``spare`` is never removed.  Returns the removed paths."""
    found = [(path, _size(path)) for path, _ in safefile.owned_oldest_first(
        root, lambda name: name.startswith(PREFIX), stat.S_ISDIR)]

    def remove(path):
        shutil.rmtree(path, ignore_errors=True)
        return True
    return safefile.prune_oldest(found, keep, max_bytes, remove, spare)

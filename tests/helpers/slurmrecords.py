"""Records of ``scontrol -o show node`` (Slurm 22.05's, captured) and
lines built from them with other values."""

import os

from conftest import REPO

CAPTURED = os.path.join(REPO, 'tests', 'fixtures', 'slurm')


def captured(name):
    with open(os.path.join(CAPTURED, f'scontrol-show-node-{name}.txt')) as fp:
        return fp.read()


def record(name='n01', state='IDLE', gres='(null)', partitions='batch',
           features='(null)', reason=None):
    """A record of ``scontrol -o show node`` built from a real one (the
    idle n01 of Slurm 22.05) with other values in its fields."""
    line = captured('n01-idle').strip()
    for key, val in (('NodeName', name), ('State', state), ('Gres', gres),
                     ('Partitions', partitions),
                     ('AvailableFeatures', features),
                     ('ActiveFeatures', features)):
        head, rest = line.split(f' {key}=' if key != 'NodeName'
                                else 'NodeName=', 1)
        rest = rest.split(' ', 1)
        line = (f'{head} {key}={val}' if key != 'NodeName'
                else f'NodeName={val}') + (' ' + rest[1] if len(rest) > 1
                                           else '')
    if reason:
        line += f' Reason={reason} [root@2026-11-25T16:49:03]'
    return line + '\n'

"""Every command README.md and the pages of docs/ show runs here, so they
cannot drift from the code: the ```bash blocks are read, each `scripts/...` / `reframe ...`
command is run in its dry-run form (no GPU: `--dry-run` and
CCL_HEALTH_ASSUME_GPUS; a database: the fixture databases captured on
GPUs), and its exit status and what it selected or answered are checked.
A command that cannot run here is listed in NOT_HERE with the reason; a
README command that is neither run nor listed fails the test."""

import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO
from helpers.doccommands import (CAP, HIST, REPORT, as_run_here,
                                 expand_optional, placeholders)

#: the system tier (tests/conftest.py): every README command run as written: ReFrame runs and nightlies
pytestmark = pytest.mark.system

#: commands that cannot run here, and why (matched by their start)
NOT_HERE = {
    'scripts/test': 'the test suite itself (CI runs exactly this)',
    'mpirun -np 2 python3 -m ccl_health.torch_bench': 'needs 2 GPUs and '
    'PyTorch; the tool is tested by tests/test_torch_bench.py',
}
#: docs/sites.md's InfiniBand example system: not shipped; made in a site's
#: copy by tests/test_docs_sequence.py and tests/test_ib_site.py, which run
#: these there
for _cmd in ('scripts/validate --system mycluster',
             'CCL_HEALTH_MODULES_SYSTEM=nomod scripts/run --dry-run -- '
             '--system mycluster',
             "scripts/fleet --simulate site/fleet-faults.example.json "
             "--nodelist 'gpu[001-016]' --site mycluster"):
    NOT_HERE[_cmd] = ('the example system mycluster of docs/sites.md (not '
                      'shipped): tests/test_docs_sequence.py runs it in a '
                      'site copy')


def pages():
    """README.md and every page of docs/."""
    docs = os.path.join(REPO, 'docs')
    return [os.path.join(REPO, 'README.md')] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith('.md'))


def readme_commands():
    """The commands of the ```bash blocks of README.md and docs/*.md:
    comments dropped, continuation lines joined."""
    text = '\n'.join(open(p).read() for p in pages())
    cmds = []
    for block in re.findall(r'```bash\n(.*?)```', text, re.S):
        block = block.replace('\\\n', ' ')
        for line in block.splitlines():
            line = re.sub(r'\s+#\s.*$', '', line).strip()
            if line and not line.startswith('#'):
                cmds.append(line)
    return cmds


@pytest.fixture(scope='module')
def work(tmp_path_factory):
    """A folder as a user's: ./ccl-health-output holds the performance
    database (the 20 healthy sweeps + 2 degradations captured on GPUs) and
    the run report; the captured outputs of a bare nccl-tests run."""
    d = tmp_path_factory.mktemp('readme')
    out = d / 'ccl-health-output'
    (out / 'reports').mkdir(parents=True)
    shutil.copy(os.path.join(HIST, 'hist.db'), out / 'ccl-health.db')
    shutil.copy(REPORT, out / 'reports')
    for f in os.listdir(CAP):
        shutil.copy(os.path.join(CAP, f), d / f)
    # references are written by calibrate only with --dry-run here
    return d


def _cases():
    out = []
    for cmd in readme_commands():
        if any(cmd.startswith(k) for k in NOT_HERE):
            continue
        for c in expand_optional(placeholders(cmd)):
            out.append(c)
    return out


def test_every_readme_command_is_covered():
    cmds = readme_commands()
    assert len(cmds) > 20
    for cmd in cmds:
        if re.match(r'^(\S+\s+){5}', cmd) and cmd[0].isdigit():
            cmd = re.sub(r'^(\S+\s+){5}(cd \S+ && )?', '', cmd).replace(
                '/opt/ccl-health/', '')
        assert cmd.startswith(('scripts/', 'reframe ', 'CCL_HEALTH_',
                               'source .venv/bin/activate',
                               'env -i scripts/')) or \
            any(cmd.startswith(k) for k in NOT_HERE), \
            f'README command neither run by this test nor in NOT_HERE: {cmd}'


@pytest.mark.parametrize('cmd', _cases())
def test_readme_command(cmd, work):
    argv, env, rcs, expect = as_run_here(cmd, work)
    p = subprocess.run(argv, cwd=work if not argv[0].endswith('reframe')
                       and 'scripts/run' not in argv[0] else REPO,
                       env=env, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode in rcs, f'{cmd}: exit {p.returncode}\n{out[-3000:]}'
    assert re.search(expect, out, re.M), f'{cmd}:\n{out[-3000:]}'
    assert 'Traceback' not in out

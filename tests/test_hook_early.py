"""The one probe process started ahead (issue 42): right after the
resource manager allows a probe and the GPUs are listed, the hook starts
``ccl-health-probe -S`` (CUDA's driver starts while Python reads the
site), sends it its NCCL variables and "start nccl" once the plan is made
and the node's first reading complete (its contexts and NCCL's
communicators), then its go; where the plan differs in anything
CUDA reads as it starts, or wants no such process, the early one is
killed and never left behind.  The stand-in (tests/replay/probe/
ccl-health-probe) speaks the program's protocol and notes each exec,
start line and go (CCL_HEALTH_REPLAY_PROBE_STARTS)."""

import os

from helpers.probe import probe_hook
from helpers.procs import processes_with, running, wait_until

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def starts(path):
    """[(pid, what)] of the stand-in's notes, in order."""
    out = []
    for line in path.read_text().splitlines():
        pid, what = line.split(' ', 1)
        out.append((int(pid), what))
    return out


def test_the_probe_started_ahead_is_the_one_that_runs(tmp_path):
    notes, seen = tmp_path / 'starts', tmp_path / 'seen.env'
    rc, line, doc, run = probe_hook(tmp_path, True, env={
        'CCL_HEALTH_REPLAY_PROBE_STARTS': str(notes),
        'CCL_HEALTH_REPLAY_PROBE_ENV': str(seen)})
    assert rc == 0 and line.startswith('HEALTHY: all_reduce 1GiB on 2 GPUs'), \
        line
    (pid, first), (same, begin), (again, go) = starts(notes)
    # started with -S alone, set to work (NCCL too: an all_reduce is
    # planned), the options came with the go: one process
    assert (first, begin, go) == ('exec -S', 'start nccl', 'go')
    assert pid == same == again
    assert (run / 'probe-args').read_text() == (
        '-b 268435456 -n 5 -w 1 -a 1073741824 -i 10 -W 2 | '
        'CUDA_VISIBLE_DEVICES=0,1\n')
    env = dict(ln.split('=', 1) for ln in seen.read_text().splitlines())
    # the site's NCCL setting (site/local.yaml), sent before the go; the
    # debug log and the marks of the run given at the start
    assert env['NCCL_NVLS_ENABLE'] == '0'
    assert env['NCCL_DEBUG'] == 'INFO'
    assert env['CCL_HEALTH_RUN_ID']            # its processes: the run's
    assert doc['probes'][0]['early_s'] is not None
    assert doc['probe_ahead'].startswith('started ahead, used: its go ')
    assert doc['timings']['probe_early'] >= 0
    assert doc['timings']['probe_start_ahead'] >= 0     # out of 'site'
    assert (doc['probes'][0]['proven'], doc['probes'][0]['verdict']) == (
        'intra', 'pass')


def test_an_early_probe_the_plan_does_not_want_is_killed(tmp_path):
    """No reference at the size asked: could not check, and the process
    started ahead is ended by the hook (no go, not left running)."""
    notes = tmp_path / 'starts'
    rc, line, doc, run = probe_hook(tmp_path, True, '--size', '3G', env={
        'CCL_HEALTH_REPLAY_PROBE_STARTS': str(notes)})
    assert rc == 2 and line.startswith('COULD-NOT-CHECK: no reference'), line
    assert doc['probe_ahead'] == ('started ahead, ended: the check ended '
                                  'before its probes')
    # killed, maybe before the stand-in's Python could note its start
    noted = starts(notes) if notes.exists() else []
    assert [w for _, w in noted] in ([], ['exec -S'])
    assert all(not running(pid) for pid, _ in noted)
    assert wait_until(lambda: not processes_with(str(run)), 5), \
        'a probe outlived the hook'
    assert not (run / 'probe-args').exists()     # it never got its go


def test_a_variable_cuda_reads_in_the_plan_starts_a_fresh_process(tmp_path):
    """The site's health.env sets a CUDA variable: the process started
    without it cannot have it (CUDA read its environment as it started),
    so it is killed and the plan's own process runs, with it."""
    import shutil
    site = tmp_path / 'site'
    shutil.copytree(os.path.join(REPO, 'site'), site)
    text = (site / 'local.yaml').read_text()
    (site / 'local.yaml').write_text(text.replace(
        '  launcher: mpirun --bind-to none -np\n',
        '  launcher: mpirun --bind-to none -np\n'
        '  env:\n    CUDA_DEVICE_MAX_CONNECTIONS: "1"\n'))
    notes, seen = tmp_path / 'starts', tmp_path / 'seen.env'
    rc, line, doc, run = probe_hook(tmp_path, True, env={
        'CCL_HEALTH_SITE_DIR': str(site),
        'CCL_HEALTH_REPLAY_PROBE_STARTS': str(notes),
        'CCL_HEALTH_REPLAY_PROBE_ENV': str(seen)})
    assert rc == 0 and line.startswith('HEALTHY: '), line
    assert doc['probe_ahead'] == (
        'started ahead, ended: CUDA_DEVICE_MAX_CONNECTIONS differs (read as '
        'the program starts)')
    # the early one killed (maybe before its Python noted its start), then
    # the plan's own, with its options on its command line
    *early, (fresh, last) = starts(notes)
    assert [w for _, w in early] in ([], ['exec -S'])
    assert all(not running(pid) for pid, _ in early)
    assert last == ('exec -b 268435456 -n 5 -w 1 -a 1073741824 -i 10 -W 2')
    env = dict(ln.split('=', 1) for ln in seen.read_text().splitlines())
    assert env['CUDA_DEVICE_MAX_CONNECTIONS'] == '1'
    assert doc['probes'][0]['early_s'] is None
    assert 'probe_early' not in doc['timings']


def test_what_an_early_probe_is_sent():
    """Only NCCL / RCCL / libfabric / UCX / Open MPI variables may differ
    (set or unset before its start); anything else, another program, or a
    value no line carries: None (a fresh process)."""
    from ccl_health.hook.probes import EarlyProbe
    started = {'PATH': '/usr/bin', 'NCCL_DEBUG': 'INFO', 'NCCL_X': 'old',
               'CUDA_VISIBLE_DEVICES': '0,1'}
    e = EarlyProbe('/p/ccl-health-probe', started, '/tmp/x', proc=None)
    assert e.env_lines('/p/ccl-health-probe', dict(started)) == ([], '')
    plan = dict(started, NCCL_X='new', FI_PROVIDER='efa',
                OMPI_MCA_plm_rsh_agent='')
    del plan['NCCL_DEBUG']
    assert e.env_lines('/p/ccl-health-probe', plan) == (
        ['env FI_PROVIDER=efa', 'unset NCCL_DEBUG', 'env NCCL_X=new',
         'env OMPI_MCA_plm_rsh_agent='], '')
    for other in ({'CUDA_VISIBLE_DEVICES': '1,0'}, {'PATH': '/bin'},
                  {'HSA_XNACK': '1'}, {'LD_PRELOAD': 'x.so'},
                  {'NCCL_X': 'two\nlines'}):
        lines, why = e.env_lines('/p/ccl-health-probe',
                                 dict(started, **other))
        assert lines is None and why.startswith(next(iter(other))), other
    assert e.env_lines('/q/ccl-health-probe', dict(started)) == (
        None, 'the plan runs /q/ccl-health-probe')


def test_an_early_probe_runs_only_the_run_it_was_started_for(tmp_path):
    """Its go only for the program and environment of its start line;
    another (or none begun): killed, and the caller starts a fresh one."""
    import sys
    from ccl_health.hook import bounded
    from ccl_health.hook.probes import EarlyProbe
    script = tmp_path / 'p.py'
    script.write_text('import sys\nprint(sys.stdin.read(), end="")\n')
    env = {'PATH': '/usr/bin:/bin'}

    def early():
        proc = bounded.start([sys.executable, str(script)], env, stdin=True)
        return EarlyProbe(str(script), env, str(tmp_path), proc)
    e = early()
    assert e.begin(str(script), dict(env, NCCL_X='1'), nccl=True)
    got = e.go(str(script), dict(env, NCCL_X='1'), ['-b', '0'], 30)
    assert got.returncode == 0
    assert got.output == 'env NCCL_X=1\nstart nccl\ngo -b 0\n'
    assert e.said.startswith('started ahead, used: its go ')
    for begun in (True, False):
        e = early()
        if begun:
            assert e.begin(str(script), env, nccl=False)
        assert e.go(str(script), dict(env, NCCL_X='2'), [], 30) is None
        assert e.said == 'started ahead, ended: ' + (
            'the run is not the one it was started for' if begun else
            'it was not started for the run')
        assert e.proc.returncode is not None          # killed and reaped
    e = early()
    assert not e.begin(str(script), dict(env, LD_PRELOAD='x.so'), True)
    assert e.said == ('started ahead, ended: LD_PRELOAD differs (read as '
                      'the program starts)')
    assert e.proc.poll() is not None


def test_nccl_hanging_before_the_copies_is_the_all_reduces_hang(tmp_path):
    """NCCL's communicators, made before the go, never end: the program
    waits for them before its copies (its line "# waiting for NCCL's
    communicators"); the hang is the all_reduce's (as when NCCL started
    after the copies), never the copy matrix's, and the process is ended
    within the limit."""
    rc, line, doc, run = probe_hook(tmp_path, True, '--limit', '6', env={
        'CCL_HEALTH_REPLAY_PROBE_NCCL_HANG': '60'})
    assert rc == 1 and doc['verdict'] == 'hang', line
    assert 'all_reduce on GPUs 0<->1' in line, line
    assert 'ccl-health-links' not in line, line
    assert [p.get('tool', 'nccl') for p in doc['probes']] == ['nccl']
    assert wait_until(lambda: not processes_with(str(run)), 5), \
        'a probe outlived the hook'


def test_a_fresh_process_after_an_early_one_logs_in_a_folder_of_its_own(
        tmp_path):
    """Where the process started ahead was set to work for another run,
    the fresh process's NCCL debug log goes to a new folder: nothing the
    early one logged is read as the run's transport proof; where it was
    set to work for this run, it is the run, in its own folder."""
    import re
    import sys
    from ccl_health.hook import bounded
    from ccl_health.hook.probes import _run_once, one_process_env, start_early
    script = tmp_path / 'probe'
    script.write_text(f'#!{sys.executable}\nimport os, sys\n'
                      'print(os.environ["NCCL_DEBUG_FILE"])\n'
                      'print(" ".join(sys.argv[1:]))\n'
                      'print(sys.stdin.read(), end="")\n')
    script.chmod(0o755)
    env = {'PATH': '/usr/bin:/bin', 'NCCL_RAS_ENABLE': '0'}
    cmd = [str(script), '-b', '0']
    early = start_early(str(script), env, str(tmp_path))
    assert early.begin(str(script), one_process_env(
        dict(env, NCCL_X='1'), early.logdir, early.ras_address), nccl=True)
    got, logdir, kept = _run_once(early, cmd, env, str(tmp_path), 30,
                                  True, re.compile('.'))
    assert early.said == ('started ahead, ended: the run is not the one it '
                          'was started for')
    assert logdir != early.logdir and kept == cmd
    assert got.output.splitlines()[:2] == [
        os.path.join(logdir, 'nccl-debug.%h.%p.log'), '-b 0']
    same = start_early(str(script), env, str(tmp_path))
    assert same.begin(str(script), one_process_env(
        env, same.logdir, same.ras_address), nccl=False)
    got, logdir, kept = _run_once(same, cmd, env, str(tmp_path), 30, True,
                                  re.compile('.'))
    assert logdir == same.logdir and kept == [str(script), '-S', '< go',
                                              '-b', '0']
    assert got.output.splitlines() == [
        os.path.join(logdir, 'nccl-debug.%h.%p.log'), '-S', 'start',
        'go -b 0']
    bounded.remove_folders()


def test_the_lines_of_a_probe_started_ahead_are_read_as_before():
    """What the program prints when started ahead ("# early ...", "#
    waiting for NCCL's communicators ...", "# nccl init ... (started
    before the go)", "# all_reduce phases: ...") inserted into a real
    2x H200 output: the copy matrix and nccl-tests' table read the same."""
    from ccl_health.evidence import copymatrix as links
    from ccl_health.evidence import nccltests
    with open(os.path.join(REPO, 'tests', 'fixtures', 'device',
                           'hook-timing-x2-after', 'keep',
                           'probe-0,1.txt')) as fp:
        text = fp.read()
    copies, table = links.split_probe_output(text)
    ahead = ('# early 0.300 s before the go, contexts 0.200 s after it\n' +
             copies.replace('# init ', "# waiting for NCCL's communicators "
                            "(ncclCommInitAll, started before the go)\n"
                            "# nccl init (started before the go) waited "
                            "for 0.100 s before the copies\n# init ", 1))
    later = table.replace('# nccl init 0.585 s\n', (
        '# nccl init 0.585 s (started before the go)\n# all_reduce '
        'phases: buffers 0.010 s (beside nccl init), warmup 0.020 s, '
        'out-of-place 0.030 s, in-place 0.030 s, checks 0.010 s\n'), 1)
    assert ahead != copies and later != table
    old, new = links.parse_links(copies), links.parse_links(ahead)
    assert (new.links, new.complete, new.errors, new.unknown, new.init_s) == \
        (old.links, True, [], [], old.init_s)
    old, new = nccltests.parse(table), nccltests.parse(later)
    assert new.by_size() == old.by_size() and new.errors == old.errors == []

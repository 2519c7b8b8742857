#!/usr/bin/env python3
"""The first nights of a nightly on an existing large database (issue 45:
"<= 15 s beyond its sweeps"), from one command.

A copy of the database (SQLite: the file, and its ``-wal`` where there is
one; the original is only read) is given to the nightly's rehearsal
(``scripts/nightly --rehearse healthy --db COPY --publish DIR --output
DIR``, docs/nightly.md "Rehearse first": a real night without GPUs, a
stand-in replaying the project's captures), night after night, each a
process of its own as cron starts it.  Each night is timed as a whole and
split, in the night's process (the nightly module's own steps, wrapped):

  sweep      the main command (``scripts/run``: ReFrame's run of the
             stand-in, the check recording its case, the run report's
             cases recorded, the run's history line); ReFrame's own part
             (its profiler's ``main``, in ``reframe.log``) is the sweep
             proper, the rest is scripts/run's start and recording
  news       the comparison and news (``ccl_health.news``), the mail
  keep       the closed days of the health checks kept (``health_days``)
  page       the page (``report.build``: its figures cached under
             ``<publish>/.figures``)
  rest       the night's files, the index, Python's start and imports

"beyond its sweeps" is the night's wall time less the sweep proper:
ReFrame's ``main`` less its sanity stage (where the check judges and
records its case, and where the first night upgrades the schema).
``--cold`` drops the database's files from the page cache before each
night (posix_fadvise; nothing else's cache).  ``--profile DIR`` writes
cProfile statistics of the night's process and of its main command.
The load average is read before each night.

    python benchmarks/nightly_first_night.py --db frontier-31d.db \\
        --work /tmp/nf [--nights 2] [--cold] [--small] [--profile DIR] \\
        [--code DIR] [--json benchmarks/results/nightly_first_night.json]
    python benchmarks/nightly_first_night.py --markdown --json FILE

``--small`` runs the same nights on a new database as well (the
rehearsal's own, created by its first night) for comparison.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import coldcache
from stopwatch import timed

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable


# -- one night, in its own process (--one-night) -----------------------------

def one_night(argv, times_path, profile):
    """``scripts/nightly`` ``argv`` in this process (the code of the
    folder it runs in: ``--code``), its steps timed into ``times_path``
    (JSON); with ``profile`` (a path prefix) its cProfile statistics, and
    its main command's, beside."""
    t0 = time.perf_counter()
    sys.path.insert(0, os.getcwd())
    from ccl_health import nightly, report
    from ccl_health.db import health_days
    times = {'imports': time.perf_counter() - t0}
    nightly._run_child = timed(times, 'sweep', nightly._run_child)
    nightly._news = timed(times, 'news', nightly._news)
    nightly._page = timed(times, 'page_all', nightly._page)
    health_days.keep = timed(times, 'keep', health_days.keep)
    report.build = timed(times, 'page', report.build)
    if profile:
        command = nightly.run_command

        def profiled(args, out, run_id):
            cmd = command(args, out, run_id)
            return cmd[:1] + ['-m', 'cProfile', '-o',
                              profile + '.sweep.pstats'] + cmd[1:]
        nightly.run_command = profiled
        import cProfile
        prof = cProfile.Profile()
        code = prof.runcall(nightly.main, argv)
        prof.dump_stats(profile + '.night.pstats')
    else:
        code = nightly.main(argv)
    times['night'] = time.perf_counter() - t0
    times['exit'] = code
    with open(times_path, 'w') as fp:
        json.dump(times, fp)
    return 0


# -- the nights --------------------------------------------------------------

def copy_db(src, dst):
    for suffix in ('', '-wal'):
        if os.path.exists(dst + suffix):
            os.unlink(dst + suffix)
        if os.path.exists(src + suffix) and (
                suffix == '' or os.path.getsize(src + suffix)):
            shutil.copyfile(src + suffix, dst + suffix)
    if os.path.exists(dst + '-shm'):
        os.unlink(dst + '-shm')


def reframe_profile(log):
    """ReFrame's own ``main`` seconds and its sanity stage's (where the
    check judges and records its case: a schema upgrade of the database
    happens there, on the first night) from its profiler report in
    ``reframe.log`` (the night's run: the last report); None where
    missing."""
    try:
        with open(log) as fp:
            text = fp.read()
    except OSError:
        return None, None
    main = re.findall(r'debug: reframe: main: ([0-9.]+) s', text)
    sanity = re.findall(r'debug: reframe: +RegressionTask\.sanity: '
                        r'([0-9.]+) s', text)
    return (float(main[-1]) if main else None,
            float(sanity[-1]) if sanity else None)


def night(work, db, n, cold, profile, code):
    publish = os.path.join(work, 'www')
    output = os.path.join(work, 'out')
    if cold and os.path.exists(db):
        coldcache.sqlite(db)
    with open('/proc/loadavg') as fp:
        load = fp.read().split()[:3]
    times_path = os.path.join(work, f'night{n}.json')
    argv = ['--rehearse', 'healthy', '--db', db, '--publish', publish,
            '--output', output, '--night', f'night-{n}']
    cmd = [PY, os.path.abspath(__file__), '--one-night', times_path,
           '--profile-prefix', (os.path.join(profile, f'night{n}')
                                if profile else ''), '--'] + argv
    t0 = time.perf_counter()
    # the code under test first, in this process and in its children
    # (ReFrame's run imports the checks' package)
    env = dict(os.environ, PYTHONPATH=code)
    proc = subprocess.run(cmd, cwd=code, env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - t0
    with open(times_path) as fp:
        t = json.load(fp)
    rfm, sanity = reframe_profile(os.path.join(output, 'rehearsal',
                                               'reframe.log'))
    proper = (rfm or 0.0) - (sanity or 0.0)
    page = t.get('page_all', 0.0)
    row = {
        'night': n, 'wall': round(wall, 2), 'exit': t['exit'],
        'mail': proc.stdout.splitlines()[:1],
        'load': [float(x) for x in load],
        'reframe_main': rfm, 'reframe_sanity': sanity,
        'sweep_proper': round(proper, 2),
        'sweep': round(t.get('sweep', 0.0), 2),
        'news': round(t.get('news', 0.0), 2),
        'keep': round(t.get('keep', 0.0), 2),
        'page': round(t.get('page', 0.0), 2),
        'page_other': round(page - t.get('keep', 0.0) - t.get('page', 0.0),
                            2),
    }
    row['sweep_not_reframe'] = round(row['sweep'] - (rfm or 0.0), 2)
    row['rest'] = round(wall - row['sweep'] - row['news'] - page, 2)
    row['beyond_sweeps'] = round(wall - proper, 2)
    row['after_sweep'] = round(wall - row['sweep'], 2)
    return row


def label_of(code):
    """The code's git revision where it is a checkout, else its folder's
    name."""
    try:
        return subprocess.run(['git', '-C', code, 'rev-parse', '--short',
                               'HEAD'], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.path.basename(code)


def nights(label, src, work, count, cold, profile, code):
    shutil.rmtree(work, ignore_errors=True)     # a first night: nothing
    os.makedirs(work)                           # published before
    db = os.path.join(work, 'night.db')
    t0 = time.perf_counter()
    if src:
        copy_db(src, db)
    copied = round(time.perf_counter() - t0, 1)
    rows = []
    for n in range(1, count + 1):
        prof = os.path.join(profile, label) if profile else None
        if prof:
            os.makedirs(prof, exist_ok=True)
        rows.append(night(work, db, n, cold, prof, code))
        r = rows[-1]
        print(f'{label} night {n}: {r["wall"]} s (ReFrame {r["reframe_main"]}'
              f' s of which its sanity stage {r["reframe_sanity"]} s, '
              f'scripts/run {r["sweep"]} s; news {r["news"]}, keep '
              f'{r["keep"]}, page {r["page"]}, rest {r["rest"]}; beyond the '
              f'sweep {r["beyond_sweeps"]} s) load {r["load"]} exit '
              f'{r["exit"]}', flush=True)
    # names, not this machine's paths (the results are kept in the tree)
    return {'database': label, 'source': os.path.basename(src),
            'copied_s': copied, 'code': os.path.basename(code.rstrip('/')),
            'code_label': label_of(code),
            'cold': cold, 'size_bytes': os.path.getsize(db), 'nights': rows}


def markdown(results):
    """The table of results.md: a row a night."""
    out = ['| database | code | night | load | wall | ReFrame (its sanity '
           'stage) | scripts/run | news | page | rest | **beyond the sweep** '
           '|', '|' + '---|' * 11]
    for r in results:
        code = r.get('code_label') or os.path.basename(r.get('code', ''))
        for n in r['nights']:
            out.append(
                f'| {r["database"]} | {code} | {n["night"]} | '
                f'{n["load"][0]} | {n["wall"]} | {n["reframe_main"]:.2f} '
                f'({n["reframe_sanity"]:.2f}) | {n["sweep"]} | {n["news"]} | '
                f'{n["page_other"] + n["keep"] + n["page"]:.2f} | '
                f'{n["rest"]} | **{n["beyond_sweeps"]}** |')
    return '\n'.join(out)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ['--one-night']:
        rest = argv[argv.index('--') + 1:]
        return one_night(rest, argv[1], argv[3] or None)
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--db', help='the database to copy (SQLite file; only '
                    'read); required but with --markdown')
    ap.add_argument('--label', help='its name in the results')
    ap.add_argument('--work', help='a folder for the copy and the nights; '
                    'required but with --markdown')
    ap.add_argument('--nights', type=int, default=2)
    ap.add_argument('--cold', action='store_true')
    ap.add_argument('--small', action='store_true', help='also a new '
                    'database (the rehearsal\'s own)')
    ap.add_argument('--profile', help='a folder for cProfile statistics')
    ap.add_argument('--code', default=REPO, help='the tree whose '
                    'ccl_health runs the nights (default: this one; another '
                    'revision, say `git archive REV`, for a before and '
                    'after)')
    ap.add_argument('--json', help='results appended to this file')
    ap.add_argument('--code-label', help='the code\'s name in the '
                    'results (default: its folder\'s)')
    ap.add_argument('--markdown', action='store_true', help='print the '
                    'table of the --json file\'s results, run nothing')
    a = ap.parse_args(argv)
    if a.markdown and a.json:
        with open(a.json) as fp:
            print(markdown(json.load(fp)))
        return 0
    if not a.db or not a.work:
        ap.error('--db and --work are required (--markdown: --json)')
    label = a.label or os.path.splitext(os.path.basename(a.db))[0]
    # the nights run in the code's folder: every path made absolute
    a.work = os.path.abspath(a.work)
    a.profile = a.profile and os.path.abspath(a.profile)
    results = [nights(label, os.path.abspath(a.db),
                      os.path.join(a.work, label), a.nights, a.cold,
                      a.profile, os.path.abspath(a.code))]
    if a.code_label:
        for r in results:
            r['code_label'] = a.code_label
    if a.small:
        results.append(nights('new', None, os.path.join(a.work, 'new'),
                              a.nights, a.cold, a.profile,
                              os.path.abspath(a.code)))
    if a.json:
        old = []
        if os.path.exists(a.json):
            with open(a.json) as fp:
                old = json.load(fp)
        with open(a.json, 'w') as fp:
            json.dump(old + [dict(r, measured=time.strftime(
                '%Y-%m-%dT%H:%M:%SZ', time.gmtime())) for r in results],
                fp, indent=1)
            fp.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())

#!/usr/bin/env python3
"""The report page of one database written before (issue 45: a month of
Frontier, ``benchmarks/db_scale.py --set frontier --days 31``), timed as
``benchmarks/db_scale.py`` times it, the page alone: cold (the database
dropped from memory, a fresh folder: every figure drawn) and again (into
the same folder at once after: the nightly's page, nothing new to draw),
as a person runs it (a process: wall seconds, its own CPU seconds, the
machine's load as it started), then its parts in this process, cold
(``db_scale.page_split``: counts, reads, figures, the page's own
Python); on SQLite and, with ``--pg``, on a PostgreSQL copy (the tests'
server, loaded by ``scripts/report migrate``).

    python benchmarks/page_month.py DB.db [--pg] [--work DIR]
        [--json FILE]

The database is only read (the page opens it read-only); ``--work``
holds the pages drawn.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import db_scale  # noqa: E402


def page(url, work, pg=None):
    """The page of ``url`` cold and again, and its parts cold."""
    out = {}
    db_scale.cold(url, pg)
    first, second = {}, {}
    wall, rss, rc, _ = db_scale.timed(db_scale.read_cmd('page', url, work),
                                      cpu=first)
    again, _, rc2, _ = db_scale.timed(db_scale.read_cmd(
        'page', url, work, again=True), cpu=second)
    out.update(s=round(wall, 2), again_s=round(again, 2), rc=rc, rc2=rc2,
               rss_mib=rss and round(rss), cpu_s=first.get('cpu_s'),
               load=first.get('load'), again_cpu_s=second.get('cpu_s'),
               again_load=second.get('load'))
    db_scale.cold(url, pg)
    load = os.getloadavg()[0]
    split = subprocess.run(
        [db_scale.PY, db_scale.__file__, '--page-split', url,
         os.path.join(work, 'page-split')], capture_output=True, text=True,
        check=True).stdout.strip().splitlines()[-1]
    out['split'] = dict(json.loads(split), load=round(load, 1))
    print(json.dumps(out), flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('db')
    ap.add_argument('--pg', action='store_true')
    ap.add_argument('--work')
    ap.add_argument('--json')
    args = ap.parse_args(argv)
    work = args.work or tempfile.mkdtemp(prefix='ccl-health-page-')
    os.makedirs(work, exist_ok=True)
    result = {'sqlite': page(os.path.abspath(args.db), work)}
    if args.pg:
        pg = db_scale.Postgres()
        try:
            url = pg.database('page_month')
            t = time.perf_counter()
            wall, _, rc, line = db_scale.timed(
                [db_scale.REPORT, '--db', args.db, 'migrate', '--to', url])
            result['migrate'] = {'s': round(time.perf_counter() - t, 1),
                                 'rc': rc}
            print(f'migrate {wall:.1f} s rc={rc} {line[:80]}', flush=True)
            result['postgresql'] = page(url, work, pg)
        finally:
            pg.stop()
    if args.json:
        with open(args.json, 'w') as fp:
            json.dump(result, fp, indent=1, sort_keys=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())

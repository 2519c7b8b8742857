"""The fleet's words and page as a person reads them (issue 40): the
``next:`` line keeps the ``--site`` the run was given; the page starts
with the node count (never ": 16 nodes"); each bar of the per-node chart
names its node; the pair matrix counts n1, n2, ..., n10 (natural order)."""

import json
import os
import re
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_simulated_fleet_page_and_next_line(tmp_path):
    plan = tmp_path / 'plan.json'
    plan.write_text(json.dumps({'bad_nodes': {'n3': 'crash'}}))
    env = dict(os.environ)
    env.pop('SLURM_JOB_ID', None)
    p = subprocess.run(
        [os.path.join(REPO, 'scripts', 'fleet'), '--simulate', str(plan),
         '--nodelist', 'n[1-12]', '--site', 'local', '--output',
         str(tmp_path / 'out'), '--json', str(tmp_path / 's.json')],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    [nxt] = [ln for ln in p.stdout.splitlines() if ln.strip().startswith(
        'next:')]
    assert 'scripts/fleet --partition' in nxt and '--site local' in nxt, nxt
    s = json.loads((tmp_path / 's.json').read_text())
    page = (tmp_path / 'out' / 'fleet' / s['run_id'] /
            'fleet.html').read_text()
    note = re.search(r'<p class="note">([^<]*?)\d+ nodes\s+checked', page)
    assert note and not note.group(1).strip().startswith(':'), note
    assert not re.search(r'<p class="note">\s*:', page)
    # the per-node chart: every node named under its bar
    chart = page.split('aria-label="per-node busbw"')[1].split('</svg>')[0]
    labels = re.findall(r'<text [^>]*rotate[^>]*>([^<]+)</text>', chart)
    assert len(labels) > 8 and sorted(labels) == sorted(s['node_busbw'])
    # the pair matrix: rows in natural order
    matrix = page.split('aria-label="node-pair matrix"')[1].split(
        '</svg>')[0]
    rows = re.findall(r'text-anchor="end">([^<]+)</text>', matrix)
    assert rows == sorted(rows, key=lambda n: int(n[1:])), rows

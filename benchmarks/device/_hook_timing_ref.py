"""The references benchmarks/device/hook_timing.sh needs on this node, where
the shipped reference file lacks them (as docs/sites.md says a site writes
them): the partition's peer_copy kinds from ccl-health-probe's copy matrix,
and an intra all_reduce entry at 1 GiB per GPU count from its all_reduce;
half of what was measured (a healthy node passes; the hook's time does not
depend on the value).
    python3 benchmarks/device/_hook_timing_ref.py REFERENCE.yaml PROBE-OUTPUT..."""
import sys

import yaml

from ccl_health.evidence import copymatrix as links
from ccl_health.evidence import nccltests

SIZE = 1 << 30
ref_path, outputs = sys.argv[1], sys.argv[2:]
doc = yaml.safe_load(open(ref_path))
part = doc['partitions']['gpu']
pc = part.setdefault('peer_copy', {'size': '256MiB', 'tolerance': 0.2,
                                   'gbps': {}})
entries = part.setdefault('entries', [])
source = 'benchmarks/device/hook_timing.sh: half of ccl-health-probe on this node'
for path in outputs:
    matrix, table = links.split_probe_output(open(path).read())
    for ln in links.parse_links(matrix).links:
        if ln.kind not in pc['gbps']:
            pc['gbps'][ln.kind] = round(ln.gbps / 2, 1)
            pc['source'] = pc.get('source', '') + f'; {ln.kind}: {source}'
    if table is None:
        continue
    res = nccltests.parse(table)
    n = len(res.rank_ids)
    row = res.by_size().get(SIZE)
    if n < 2 or row is None:
        continue
    have = [e for e in entries if e.get('transport') == 'intra' and
            e.get('collective') == 'all_reduce' and e.get('nodes') == 1 and
            e.get('gpus_per_node') == n and
            any(str(k) in ('1GiB', str(SIZE)) for k in e.get('busbw', {}))]
    if have:
        print(f'{n} GPUs: the shipped entry stays')
        continue
    bw = min(m.busbw for m in (row.out_of_place, row.in_place) if m)
    entries.append({'transport': 'intra', 'collective': 'all_reduce',
                    'nodes': 1, 'gpus_per_node': n, 'tolerance': 0.1,
                    'source': source, 'busbw': {'1GiB': round(bw / 2, 2)}})
    print(f'{n} GPUs: entry at 1GiB {bw / 2:.2f} GB/s')
yaml.safe_dump(doc, open(ref_path, 'w'), sort_keys=False)
print('peer_copy', pc['gbps'])

"""A peer_copy reference of this GPU for the device scripts: half of what
ccl-health-links measured just before (a healthy node passes, a fault still
shows), written into the reference file given.
    python3 benchmarks/device/_links_reference.py CAPTURE REFERENCE.yaml SCRIPT"""
import sys

import yaml

from ccl_health.evidence import copymatrix as links

capture, ref, script = sys.argv[1:4]
res = links.parse_links(open(capture).read())
kinds = {}
for ln in res.links:
    kinds.setdefault(ln.kind, []).append(ln.gbps)
doc = yaml.safe_load(open(ref))
part = doc['partitions']['gpu']
part['peer_copy'] = {
    'size': '256MiB', 'tolerance': 0.2,
    'source': f'this GPU, half of what ccl-health-links measured just before '
              f'({script})',
    'gbps': {k: round(min(v) / 2, 1) for k, v in kinds.items()}}
yaml.safe_dump(doc, open(ref, 'w'), sort_keys=False)
print(part['peer_copy'])

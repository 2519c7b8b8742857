"""ccl-health-links' output for any number of GPUs, written from the
program's printf formats (builders/src/ccl_health_links.cu): the matrices
of more GPUs than a lent machine had."""


def matrix_text(n, gbps, no_peer=()):
    """ccl-health-links' output for n GPUs (its printf formats), gbps[(a,
    b)] per direction."""
    out = ['# ccl-health-links 1: copy-engine bandwidth of every GPU pair '
           '(CUDA runtime 13000, driver 13000)', f'# gpus {n}']
    out += [f'# gpu {i} 0000:{0x19 + i:02X}:00.0 NVIDIA H200'
            for i in range(n)]
    out.append('# bytes 268435456 repeats 5 warmup 1')
    bad = {p for q in no_peer for p in (q, q[::-1])}
    out += [f'# peer {a} {b} {"no" if (a, b) in bad else "yes"}'
            for a in range(n) for b in range(n) if a != b]
    out += ['# init 1.100 s', '# src dst bytes seconds GB/s']
    rows = 0
    for a in range(n):
        for b in range(a + 1, n):
            if (a, b) in bad:
                continue
            for s, d in ((a, b), (b, a)):
                g = gbps.get((s, d), 386.0)
                out.append(f'{s} {d} 268435456 {268435456 / g / 1e9:.6f} '
                           f'{g:.2f}')
                rows += 1
    out.append(f'# done {rows} directions in 0.140 s (total 1.240 s)')
    return '\n'.join(out) + '\n'

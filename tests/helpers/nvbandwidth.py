"""nvbandwidth's text output, built from its own format strings
(output.cpp, inline_common.h), as the GPU links' tests feed it."""

WRITE = 'device_to_device_memcpy_write_ce'
READ = 'device_to_device_memcpy_read_ce'
WRITE_DESC = 'memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)'
READ_DESC = 'memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)'


def nvb_matrix(values):
    """``operator<<(ostream, PeerValueMatrix)`` of nvbandwidth's
    inline_common.h: the blank corner (``columnIdWidth`` = 2 spaces), the
    column indices ``setw(10)``, each row ``setw(2)`` then every value
    ``setw(10)`` (``std::fixed``, ``setprecision(2)`` from
    ``Output::addTestcaseResults``), ``N/A`` for an empty cell, a blank
    line, ``SUM <key> <sum>``."""
    n = len(values)
    out = ['  ' + ''.join(f'{c:>10}' for c in range(n))]
    total = 0.0
    for r, row in enumerate(values):
        cells = []
        for v in row:
            cells.append(f'{"N/A":>10}' if v is None else f'{v:>10.2f}')
            total += v or 0.0
        out.append(f'{r:>2}' + ''.join(cells))
    return out, total


def nvb_output(testcase, desc, values, extra_devices=()):
    """nvbandwidth's plain text (output.cpp): version, note, CUDA and
    driver versions, the devices (``printGPUs``: host name, ``Device i:
    <name> (<domain>:<bus>:<device>)``), ``Running <key>.``, the
    description and the matrix, as ``addTestcaseResults`` prints them."""
    lines = ['nvbandwidth Version: v0.8', 'Built from Git version: v0.8', '',
             'NOTE: The reported results may not reflect the full '
             'capabilities of the platform.',
             'Performance can vary with software drivers, hardware clocks, '
             'and system topology.', '',
             'CUDA Runtime Version: 13000', 'CUDA Driver Version: 13000',
             'Driver Version: 580.159.04', '', 'node-a']
    for i in range(len(values)):
        lines.append(f'Device {i}: NVIDIA H200 (00000000:{0x19 + i:02x}:00)')
    lines += list(extra_devices) + ['', f'Running {testcase}.', desc]
    matrix, total = nvb_matrix(values)
    lines += matrix + ['', f'SUM {testcase} {total:.2f}', '']
    return '\n'.join(lines) + '\n'

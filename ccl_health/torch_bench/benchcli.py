"""The command line: ``python -m ccl_health.torch_bench <mode> ...``, one
subcommand per benchmark (bandwidth, first-call, replay, train)."""

import argparse
import sys

from ccl_health import CclHealthError
from ccl_health.sitedata.transports import NAMES as TRANSPORTS

from ccl_health.torch_bench.bandwidth import DEFAULT_COLLECTIVES, cmd_bandwidth
from ccl_health.torch_bench.first_call import cmd_first_call
from ccl_health.torch_bench.output import TOOL, TYPE_NAMES
from ccl_health.torch_bench.replay import cmd_replay
from ccl_health.torch_bench.train import TRAIN_MODELS, cmd_train


def _package_doc():
    """The first paragraph of the package's docstring (the modes, ranks and
    rendezvous are described there)."""
    return (sys.modules[__package__].__doc__ or '').split('\n\n')[0]


def build_parser():
    ap = argparse.ArgumentParser(prog=f'python -m {TOOL}',
                                 description=_package_doc())
    sub = ap.add_subparsers(dest='mode', required=True)

    def common(p):
        p.add_argument('--json', help='write the results here (rank 0)')
        p.add_argument('--transport', choices=TRANSPORTS,
                       help='the transport the environment sets up '
                       '(default: read from NCCL_P2P_DISABLE, ...)')
        p.add_argument('--ideal-busbw', type=float, metavar='GB/s',
                       help='the ideal busbw, instead of the link facts')
        p.add_argument('--nvlink-gen', type=int, help='NVLink generation '
                       '(default: from the GPU architecture)')
        p.add_argument('--nvlink-links', type=int, help='NVLink links per '
                       'GPU (default: nvidia-smi topo -m)')
        p.add_argument('--nic-gbps', type=float, help='NIC line rate, Gb/s, '
                       'per GPU (default: /sys/class/net)')
        p.add_argument('--device', choices=['cuda', 'cpu'], default='cuda',
                       help='cpu: gloo on the CPU, to try this tool without '
                       'a GPU (the timings then mean nothing for the links)')

    p = sub.add_parser('bandwidth', help='busbw per size and collective')
    common(p)
    p.add_argument('--sizes', default='1M:1G',
                   help='MIN:MAX[:FACTOR] or A,B,C (default 1M:1G)')
    p.add_argument('--step-factor', type=int, default=2)
    p.add_argument('--collectives', default=','.join(DEFAULT_COLLECTIVES))
    p.add_argument('--dtype', default='float32',
                   choices=sorted(TYPE_NAMES))
    p.add_argument('--iters', type=int, default=20)
    p.add_argument('--warmup', type=int, default=5)
    p.add_argument('--no-check', action='store_true',
                   help='skip the one-call correctness check')
    p.set_defaults(func=cmd_bandwidth)

    p = sub.add_parser('first-call', help='init + first collective vs '
                       'the second')
    common(p)
    p.add_argument('--loops', type=int, default=5)
    p.add_argument('--backend', choices=['nccl', 'mpi4py'], default='nccl')
    p.set_defaults(func=cmd_first_call)

    p = sub.add_parser('replay', help='replay a communication pattern CSV')
    common(p)
    p.add_argument('--pattern', required=True)
    p.add_argument('--iters', type=int, default=20)
    p.add_argument('--warmup', type=int, default=5)
    p.add_argument('--csv', help='also write the pattern with the measured '
                   'columns appended')
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser('train', help='a small DDP training loop: samples/s, '
                       'step time, NCCL share of the step')
    common(p)
    p.add_argument('--model', choices=sorted(TRAIN_MODELS), default='comm',
                   help='comm: a wide MLP, small batch (the all_reduce '
                   'dominates); compute: deep convolutions, large batch '
                   '(default comm)')
    p.add_argument('--steps', type=int, default=20, help='timed steps')
    p.add_argument('--warmup', type=int, default=5, help='untimed steps '
                   'first')
    p.add_argument('--profile-steps', type=int, default=5,
                   help='steps under torch.profiler after the timed ones '
                   '(0: none, no NCCL share)')
    p.add_argument('--batch', type=int, help='samples per rank and step '
                   '(default: the model\'s)')
    p.add_argument('--width', type=int, help='MLP width or convolution '
                   'channels (default: the model\'s)')
    p.add_argument('--depth', type=int, help='hidden layers (default: the '
                   'model\'s)')
    p.set_defaults(func=cmd_train)
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    for name in ('iters', 'loops'):
        if getattr(args, name, 1) < 1:
            print(f'{TOOL}: error: --{name} must be >= 1', file=sys.stderr)
            return 2
    try:
        return args.func(args)
    except CclHealthError as err:
        print(f'{TOOL}: error: {err}', file=sys.stderr)
        return 2


if __name__ == '__main__':       # python -m ccl_health.torch_bench.benchcli ...
    sys.exit(main())

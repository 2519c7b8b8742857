"""Who this process is: its rank, the world size and its place on the node
from the launcher's variables (Open MPI, Slurm, torchrun, PMI), and
:class:`Dist`, one process of the job with its GPU and
``torch.distributed`` process group (torch imported there, not here)."""

import os
import re

from ccl_health import CclHealthError


def dist_env(env=None):
    """(rank, world size, local rank, local size, launcher) from Open MPI,
    Slurm or torchrun variables; (0, 1, 0, 1, 'none') when started alone."""
    env = os.environ if env is None else env
    for name, r, w, lr, ls in (
            ('mpirun', 'OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE',
             'OMPI_COMM_WORLD_LOCAL_RANK', 'OMPI_COMM_WORLD_LOCAL_SIZE'),
            ('srun', 'SLURM_PROCID', 'SLURM_NTASKS', 'SLURM_LOCALID',
             'SLURM_NTASKS_PER_NODE'),
            ('torchrun', 'RANK', 'WORLD_SIZE', 'LOCAL_RANK',
             'LOCAL_WORLD_SIZE'),
            ('pmi', 'PMI_RANK', 'PMI_SIZE', 'MPI_LOCALRANKID',
             'MPI_LOCALNRANKS')):
        if env.get(r, '') != '' and env.get(w, '') != '':
            try:
                rank, world = int(env[r]), int(env[w])
                local = int(env.get(lr) or (rank if world == 1 else 0))
                # SLURM_NTASKS_PER_NODE may read "4" or be unset
                m = re.match(r'^(\d+)', env.get(ls, ''))
                lsize = int(m.group(1)) if m else None
            except ValueError:
                raise CclHealthError(f'{r}={env.get(r)!r}, {w}='
                                     f'{env.get(w)!r}: not integers') \
                    from None
            if not 0 <= rank < world:
                raise CclHealthError(f'{r}={rank} is not below {w}={world}')
            return rank, world, local, lsize or world, name
    return 0, 1, 0, 1, 'none'


class Dist:
    """One process of the job: rank, GPU, process group."""

    def __init__(self, device='cuda'):
        import torch
        import torch.distributed as dist
        self.torch, self.dist = torch, dist
        (self.rank, self.world, self.local_rank, self.local_size,
         self.launcher) = dist_env()
        os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
        os.environ.setdefault('MASTER_PORT', '29500')
        self.base_port = int(os.environ['MASTER_PORT'])
        self.cuda = device != 'cpu'
        if not self.cuda:
            # gloo on the CPU: the logic of this tool without a GPU (tests);
            # the timings say nothing about a GPU's links
            self.backend, self.device = 'gloo', torch.device('cpu')
            self.gpu, self.arch = 'cpu', 'cpu'
            return
        if not torch.cuda.is_available():
            raise CclHealthError('torch sees no GPU (torch.cuda.is_available'
                                 '() is False)')
        ngpu = torch.cuda.device_count()
        self.device = torch.device('cuda', self.local_rank % ngpu)
        torch.cuda.set_device(self.device)
        props = torch.cuda.get_device_properties(self.device)
        self.gpu = props.name
        self.arch = (props.gcnArchName.split(':')[0] if getattr(
            torch.version, 'hip', None) and hasattr(props, 'gcnArchName')
            else f'sm_{props.major}{props.minor}')
        self.backend = 'nccl'

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def init(self, port=None):
        if port is not None:
            os.environ['MASTER_PORT'] = str(port)
        self.dist.init_process_group(self.backend, init_method='env://',
                                     rank=self.rank, world_size=self.world)

    def done(self):
        if self.dist.is_initialized():
            self.dist.destroy_process_group()

    def versions(self):
        torch = self.torch
        try:
            v = torch.cuda.nccl.version()
            nccl = '.'.join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:          # noqa: BLE001 (no NCCL in this build)
            nccl = None
        return {'torch_version': torch.__version__,
                'nccl_version': nccl if self.cuda else None,
                'library': 'gloo' if not self.cuda else 'RCCL' if getattr(
                    torch.version, 'hip', None) else 'NCCL',
                'cuda_version': torch.version.cuda,
                'hip_version': getattr(torch.version, 'hip', None)}

    def gather_strings(self, text):
        out = [None] * self.world
        self.dist.all_gather_object(out, text)
        return out

    def reduce_max(self, values):
        t = self.torch.tensor(values, dtype=self.torch.float64,
                              device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return t.tolist()

    def mean(self, value):
        t = self.torch.tensor([value], dtype=self.torch.float64,
                              device=self.device)
        self.dist.all_reduce(t)
        return t.item() / self.world

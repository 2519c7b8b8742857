"""Another process keeping the GPU busy (a torch matmul loop), optionally
holding a share of its memory: python3 busy.py READY_FILE [--hold FRACTION]
[--idle].  Writes its pid to READY_FILE once it has started; runs until
killed."""
import os
import sys
import time

import torch

ready = sys.argv[1]
hold = float(sys.argv[sys.argv.index('--hold') + 1]) if '--hold' in sys.argv \
    else 0.0
idle = '--idle' in sys.argv
x = torch.randn(8192, 8192, device='cuda')
keep = None
if hold:
    free, total = torch.cuda.mem_get_info()
    keep = torch.empty(int(total * hold), dtype=torch.uint8, device='cuda')
y = x @ x
torch.cuda.synchronize()
with open(ready, 'w') as fp:
    fp.write(str(os.getpid()))
while True:
    if idle:
        time.sleep(1)
    else:
        for _ in range(20):
            y = x @ x
        torch.cuda.synchronize()

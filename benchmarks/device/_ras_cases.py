"""The cases of benchmarks/device/ras_hang_on_device.sh (issue 44), on 4
GPUs (RAS_NP: another count, eight_gpus.sh's 8), one MPI rank per GPU, a
bare all_reduce_perf sweep:

  stop   one rank (RAS_STOP_RANK, default 2) SIGSTOPped mid-sweep; RAS
         asked as the job script asks it (``python -m
         ccl_health.evidence.ras --watch``), twice; the case
         assembled as the sweep's time-limit path does and judged: a HANG
         naming that rank, its GPU and pid
  kill   one rank SIGKILLed mid-sweep; the launcher's and the ranks' output
         judged: a crash naming the first rank that exited
  fleet  the ranks as two "nodes" (NCCL_HOSTID per half of the ranks), the
         last rank (of the second) stopped; judged as the fleet's pair
         step: a hang naming the rank and its node
Every output, debug log and RAS answer is kept under KEEP/<case>;
KEEP/ras-cases.json has each case's line and whether it named the rank
that was stopped or killed (``ok``).
Usage: python3 _ras_cases.py NCCL_TESTS_BUILD KEEP"""

import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.getcwd())
from ccl_health.evidence import nccltests, ras            # noqa: E402
from ccl_health.evidence.debuglog import debug_log_files  # noqa: E402
from ccl_health.judge import assemble                     # noqa: E402
from ccl_health.judge.casejudge import judge                  # noqa: E402

B, K = sys.argv[1], sys.argv[2]
NP = int(os.environ.get('RAS_NP', '4'))
STOP = int(os.environ.get('RAS_STOP_RANK', '2'))
MPI = ['mpirun', '--allow-run-as-root', '--bind-to', 'none', '-np', str(NP)]
PASS_ON = ['NCCL_NVLS_ENABLE', 'NCCL_DEBUG', 'NCCL_DEBUG_SUBSYS',
           'NCCL_DEBUG_FILE', 'NCCL_RAS_ADDR']
SWEEP = ['-b', '1M', '-e', '8G', '-f', '2', '-g', '1', '-n', '200', '-w', '5']
results = []


def start(tag, binary, extra=None):
    d = os.path.join(K, tag)
    os.makedirs(d, exist_ok=True)
    env = dict(os.environ, NCCL_NVLS_ENABLE='0', NCCL_DEBUG='INFO',
               NCCL_DEBUG_SUBSYS='INIT,NET',
               NCCL_DEBUG_FILE=f'{d}/nccl-debug.%h.%p.log',
               NCCL_RAS_ADDR=ras.free_address(), **(extra or {}))
    cmd = MPI + sum((['-x', v] for v in PASS_ON + list(extra or {})), []) \
        + ['stdbuf', '-oL', binary] + SWEEP
    with open(f'{d}/cmd.txt', 'w') as fp:
        fp.write(' '.join(cmd) + '\n' + json.dumps(
            {k: env[k] for k in PASS_ON + list(extra or {})}) + '\n')
    out, err = open(f'{d}/stdout.txt', 'w'), open(f'{d}/stderr.txt', 'w')
    p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env,
                         start_new_session=True)
    return d, env, p


def text(d, name='stdout.txt'):
    with open(os.path.join(d, name), errors='replace') as fp:
        return fp.read()


def wait_rows(d, p, rows, bound=90):
    t0 = time.monotonic()
    while time.monotonic() - t0 < bound and p.poll() is None:
        res = nccltests.parse(text(d))
        if len(res.rows) >= rows and res.rank_pids:
            return res
        time.sleep(0.2)
    raise SystemExit(f'{d}: {rows} rows not printed within {bound} s '
                     f'(exit {p.poll()})')


def pid_of(res, rank):
    return dict(zip(res.rank_ids, res.rank_pids))[rank]


def listener(env):
    """The pid holding RAS's port (one process of the job listens; a
    stopped listener cannot answer: that case is the reason's, not a
    naming), from ``ss``; None where it cannot tell."""
    import re
    port = ras.address(env)[1]
    try:
        out = subprocess.run(['ss', '-ltnpH', f'sport = :{port}'],
                             capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'pid=(\d+)', out)
    return int(m.group(1)) if m else None


def victim_of(res, env, wanted):
    """``wanted``, or the next rank where ``wanted`` holds RAS's port."""
    held = listener(env)
    for r in [wanted] + [r for r in range(NP) if r != wanted]:
        if pid_of(res, r) != held:
            return r, held
    return wanted, held


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def note(case, line, ok, **more):
    results.append(dict(case=case, line=line, ok=ok, **more))
    print(f'{case}\t{"OK" if ok else "NOT OK"}\t{line}', flush=True)


def ask_watch(d, env, name):
    """RAS asked as the sweep's job script asks it."""
    t0 = time.monotonic()
    subprocess.run([sys.executable, '-m', 'ccl_health.evidence.ras',
                    '--watch', f'{d}/{name}.json'], env=env, timeout=60)
    got = ras.read_watch(f'{d}/{name}.json')
    with open(f'{d}/{name}.txt', 'w') as fp:
        fp.write(got.text if got else '(no answer file)\n')
    print(f'  {name}: {time.monotonic() - t0:.2f} s, '
          f'{got.why if got and got.why else "answered"}', flush=True)
    return got


def expect(reason, rank, res):
    pid = pid_of(res, rank)
    return f'rank {rank} (' in reason and f'GPU {rank}, pid {pid})' in reason


# -- stop: a HANG naming the stopped rank -----------------------------------
d, env, p = start('stop', f'{B}/all_reduce_perf')
res = wait_rows(d, p, 6)
t0 = time.monotonic()
victim, held = victim_of(res, env, STOP)
os.kill(pid_of(res, victim), signal.SIGSTOP)
time.sleep(5)
first = ask_watch(d, env, 'ras-1')
time.sleep(10)
answer = ask_watch(d, env, 'ras-2')
waited = time.monotonic() - t0
att = assemble.attempt(text(d), debug_log_files(d), None,
                       killed=f'all_reduce_perf did not finish within '
                       f'{waited:.0f} s of rank {victim} being stopped '
                       f'(killed)', ras=answer, transport='intra')
kill_group(p)
j = judge(assemble.case([att], what='all_reduce_perf', transport='intra',
                        collective='all_reduce', nodes=1, gpus_per_node=NP))
note('stop', f'{str(j.verdict).upper()} {j.reason}',
     str(j.verdict) == 'hang' and expect(j.reason, victim, res),
     stopped_rank=victim, stopped_pid=pid_of(res, victim),
     ras_listener_pid=held, first_answer_seconds=first and first.seconds)

# -- kill: a crash naming the killed rank -----------------------------------
d, env, p = start('kill', f'{B}/all_reduce_perf')
res = wait_rows(d, p, 6)
victim = 1
os.kill(pid_of(res, victim), signal.SIGKILL)
after = ask_watch(d, env, 'ras-after-kill')        # kept, not judged
try:
    rc = p.wait(90)
except subprocess.TimeoutExpired:
    kill_group(p)
    rc = None
out = text(d)
att = assemble.attempt(out, debug_log_files(d), rc, transport='intra',
                       launcher_text=out + '\n' + text(d, 'stderr.txt'))
j = judge(assemble.case([att], what='all_reduce_perf', transport='intra',
                        collective='all_reduce', nodes=1, gpus_per_node=NP))
note('kill', f'{str(j.verdict).upper()} {j.reason}',
     str(j.verdict) == 'crash' and 'first to exit: ' in j.reason and
     expect(j.reason.split('first to exit: ', 1)[1], victim, res),
     exit_status=rc, killed_pid=pid_of(res, victim))

# -- fleet: two "nodes", a pair step that hangs names the rank and node ------
from ccl_health.fleet.rounds import Raw, Step, judge_step  # noqa: E402
wrap = os.path.join(K, 'hostid-wrap.sh')
with open(wrap, 'w') as fp:
    fp.write('#!/bin/bash\nr=${OMPI_COMM_WORLD_RANK:-0}\n'
             f'export NCCL_HOSTID=fleet-node-$(( r / {NP // 2} ))\n'
             f'exec {B}/all_reduce_perf "$@"\n')
os.chmod(wrap, 0o755)
d, env, p = start('fleet', wrap)
res = wait_rows(d, p, 4)
victim, held = victim_of(res, env, NP - 1)
os.kill(pid_of(res, victim), signal.SIGSTOP)
time.sleep(5)
answer = ask_watch(d, env, 'ras')
kill_group(p)
step = Step('pair', ('fleet-node-0', 'fleet-node-1'), 60.0)
raw = Raw(step, None, text(d), text(d, 'stderr.txt'), killed=True,
          ras=answer, debug_logs=debug_log_files(d))
v, reason, _ = judge_step(raw, 1 << 20, 60.0)
note('fleet', f'{str(v).upper()} {reason}',
     str(v) == 'hang' and expect(reason, victim, res),
     stopped_rank=victim, stopped_pid=pid_of(res, victim),
     ras_listener_pid=held)

with open(os.path.join(K, 'ras-cases.json'), 'w') as fp:
    json.dump(results, fp, indent=1)
sys.exit(0 if all(r['ok'] for r in results) else 1)

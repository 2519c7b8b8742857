/* ccl-health-links: the copy-engine bandwidth of every GPU pair of a node,
 * in one process (the node health hook's link check, ccl_health/hook/check.py).
 *
 *   ccl-health-links [-b BYTES] [-n REPEATS] [-w WARMUP]
 *
 * Enables peer access where cudaDeviceCanAccessPeer allows it (a pair that
 * cannot is reported, not measured), then, pair after pair, copies BYTES
 * (default 256M; K/M/G suffixes are powers of 1024) with
 * cudaMemcpyPeerAsync in both directions at once on two streams (one on
 * each GPU), WARMUP untimed copies then REPEATS copies timed with events.
 * With one GPU it measures the copy inside the GPU and host<->device
 * copies from / to pinned memory instead.  The first and last 4 KiB of
 * every received buffer are checked against the sender's byte pattern.
 *
 * Output (parsed by ccl_health/evidence/copymatrix.py): header lines starting with '#',
 * one line per measured direction
 *
 *   SRC DST BYTES SECONDS GB/s     (SRC/DST: GPU index or "host";
 *                                   SECONDS: one copy, the mean of REPEATS;
 *                                   GB/s = BYTES / SECONDS / 1e9)
 *
 * and a closing "# done ..." line.  Exit 0: every measurement made; 1: a
 * CUDA / HIP error or a wrong byte (one "# error: ..." line names the call
 * and the GPU); 2: a bad option.
 *
 * Compiled with -DCCL_HEALTH_PROBE and linked with NCCL (or RCCL) the same
 * source is ccl-health-probe, the hook's one probe process (issue 42):
 *
 *   ccl-health-probe [-b BYTES|0] [-n REPEATS] [-w WARMUP]
 *                    [-a BYTES|0] [-i ITERS] [-W WARMUP] [-O 0|1] [-S]
 *
 * CUDA / HIP starts once: the copy matrix above (-b 0: none), then, after
 * the line "# ccl-health-probe all_reduce", NCCL's all_reduce (float, sum)
 * of -a BYTES (default 1G; 0: none) over every visible GPU from this one
 * process (ncclCommInitAll, one stream per GPU, group calls; each GPU's
 * buffers made and filled in a thread of its own meanwhile): -W untimed
 * then -i timed iterations out of place, then -i in place (nccl-tests
 * warms up once, before the out-of-place pass).  The result is
 * checked on the GPUs: rank r sends (r + 1) * (1 + i % 13) at element i,
 * every element received must be n (n + 1) / 2 * (1 + i % 13) (exact in
 * float), counted by a kernel.  That part is printed in nccl-tests' own
 * table format (ccl_health/evidence/nccltests.py reads it): its banner
 * "# ccl-health-probe version ...", the rank lines, one row with #wrong,
 * "# Out of bounds values", "# Avg bus bandwidth"; an NCCL / CUDA error
 * there is nccl-tests' "Test NCCL failure" / "Test CUDA failure" line
 * (exit 1).  NCCL's own debug log goes where NCCL_DEBUG_FILE says.
 * "# nccl init S s" says how long ncclCommInitAll took, "# all_reduce
 * phases: ..." where the rest of the all_reduce's time went.  -S: started
 * ahead, its options come on standard input (wait_for_go below).  -O 1 makes the
 * communicators in a thread WHILE the copy matrix runs (its start-up
 * hidden behind the copies); -O 0, the default, after it: nothing else
 * runs on the GPUs while the copies are timed.  -O 1 stays off until the
 * device shows it leaves the copy matrix's GB/s as they are
 * (benchmarks/device/hook_timing.sh times both).
 *
 * Built with nvcc (or hipcc -x hip, gpu_compat.h) by builders/nccl_tests.py
 * into the nccl-tests / rccl-tests install prefix: bin/ccl-health-links and
 * bin/ccl-health-probe. */
#include "gpu_compat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <string>
#include <thread>
#include <vector>
#ifdef CCL_HEALTH_PROBE
#include <unistd.h>
#define USAGE "ccl-health-probe [-b BYTES|0] [-n REPEATS] [-w WARMUP] " \
    "[-a BYTES|0] [-i ITERS] [-W WARMUP] [-O 0|1] [-S]"
#else
#define USAGE "ccl-health-links [-b BYTES] [-n REPEATS] [-w WARMUP]"
#endif

#define VERSION 1
#define CHECK_BYTES 4096

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double t_start;

static void fail(const char *call, int gpu, cudaError_t err, int line) {
    char where[32] = "";
    if (gpu >= 0) snprintf(where, sizeof where, " on GPU %d", gpu);
    printf("# error: %s failed%s: %s (ccl_health_links.cu:%d, %.3f s)\n",
           call, where, cudaGetErrorString(err), line, now() - t_start);
    fflush(stdout);
    exit(1);
}

#define CHECK(call, gpu) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) fail(#call, (gpu), e_, __LINE__); } while (0)

static void usage_error(const char *msg, const char *arg) {
    printf("# usage error: %s%s%s (usage: " USAGE ")\n", msg,
           arg ? ": " : "", arg ? arg : "");
    exit(2);
}

static size_t parse_bytes(const char *s, int zero_ok) {
    char *end;
    if (zero_ok && !strcmp(s, "0")) return 0;
    double v = strtod(s, &end);
    double mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mult = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mult = 1024.0 * 1024 * 1024, end++;
    if (end == s || *end != '\0' || !(v > 0)) usage_error("bad size", s);
    size_t bytes = (size_t)(v * mult);
    if (bytes < 2 * CHECK_BYTES) usage_error("size below 8K", s);
    return bytes;
}

static int parse_count(const char *s, int min) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < min || v > 1000000)
        usage_error("bad count", s);
    return (int)v;
}

struct Gpu {
    char *send;   /* filled with this GPU's byte pattern */
    char *recv;   /* what the other side sent */
    cudaStream_t stream;
    cudaEvent_t start, stop;
};

static unsigned char pattern(int gpu) { return (unsigned char)(0x5a ^ (gpu + 1)); }

/* The first and last CHECK_BYTES of a received buffer hold `expect`. */
static void check_received(const char *buf, size_t bytes, unsigned char expect,
                           int on_gpu, const char *what) {
    static unsigned char host[2 * CHECK_BYTES];
    CHECK(cudaSetDevice(on_gpu < 0 ? 0 : on_gpu), on_gpu);
    cudaMemcpyKind kind = on_gpu < 0 ? cudaMemcpyHostToHost : cudaMemcpyDeviceToHost;
    CHECK(cudaMemcpy(host, buf, CHECK_BYTES, kind), on_gpu);
    CHECK(cudaMemcpy(host + CHECK_BYTES, buf + bytes - CHECK_BYTES, CHECK_BYTES,
                     kind), on_gpu);
    for (int i = 0; i < 2 * CHECK_BYTES; i++) {
        if (host[i] != expect) {
            size_t off = i < CHECK_BYTES ? (size_t)i : bytes - 2 * CHECK_BYTES + i;
            printf("# error: wrong data after the copy %s: byte %zu is 0x%02x, "
                   "expected 0x%02x\n", what, off, host[i], expect);
            fflush(stdout);
            exit(1);
        }
    }
}

/* Time `repeats` copies queued on `stream` between its two events. */
static double elapsed(Gpu &g, int gpu, int repeats) {
    float ms = 0;
    CHECK(cudaEventSynchronize(g.stop), gpu);
    CHECK(cudaEventElapsedTime(&ms, g.start, g.stop), gpu);
    return ms * 1e-3 / repeats;
}

static void row(const char *src, const char *dst, size_t bytes, double s) {
    printf("%s %s %zu %.6f %.2f\n", src, dst, bytes, s, s > 0 ? bytes / s / 1e9 : 0.0);
}

/* Every visible GPU's context made at once, one thread each (made one
 * after another, they are most of the start-up on a node of 4 or 8 GPUs);
 * an error here is named again by the first call that needs the GPU.
 * `min_gpus`: the fewest GPUs worth threads (2; 1 where the contexts are
 * made while the program waits for its go, -S). */
static void start_contexts(int min_gpus) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < min_gpus) return;
    std::vector<std::thread> started;
    for (int d = 0; d < n; d++)
        started.emplace_back([d] {
            if (cudaSetDevice(d) == cudaSuccess) (void)cudaFree(0);
        });
    for (auto &t : started) t.join();
}

/* What must end before the copies are timed (ccl-health-probe: NCCL's
 * communicators started before the go, -S, unless -O 1). */
static void before_timed_copies(void);

/* The copy matrix of every visible GPU pair (the output above). */
static void copy_matrix(size_t bytes, int repeats, int warmup) {
    int n = 0, drv = 0, rt = 0;
    CHECK(cudaGetDeviceCount(&n), -1);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    printf("# ccl-health-links %d: copy-engine bandwidth of every GPU pair "
           "(%s runtime %d, driver %d)\n", VERSION, GPU_RUNTIME, rt, drv);
    printf("# gpus %d\n", n);
    std::vector<Gpu> g(n);
    for (int d = 0; d < n; d++) {
        cudaDeviceProp prop;
        char bus[64] = "?";
        CHECK(cudaSetDevice(d), d);
        CHECK(cudaGetDeviceProperties(&prop, d), d);
        CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, d), d);
        printf("# gpu %d %s %s\n", d, bus, prop.name);
    }
    printf("# bytes %zu repeats %d warmup %d\n", bytes, repeats, warmup);
    /* peer access, both ways of every pair */
    std::vector<char> peer(n * n, 0);
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            if (a == b) continue;
            int can = 0;
            CHECK(cudaDeviceCanAccessPeer(&can, a, b), a);
            if (can) {
                CHECK(cudaSetDevice(a), a);
                cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
                if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
                else if (e != cudaSuccess) fail("cudaDeviceEnablePeerAccess", a, e, __LINE__);
            }
            peer[a * n + b] = (char)can;
            printf("# peer %d %d %s\n", a, b, can ? "yes" : "no");
        }
    for (int d = 0; d < n; d++) {
        CHECK(cudaSetDevice(d), d);
        CHECK(cudaMalloc((void **)&g[d].send, bytes), d);
        CHECK(cudaMalloc((void **)&g[d].recv, bytes), d);
        CHECK(cudaMemset(g[d].send, pattern(d), bytes), d);
        CHECK(cudaMemset(g[d].recv, 0, bytes), d);
        CHECK(cudaStreamCreateWithFlags(&g[d].stream, cudaStreamNonBlocking), d);
        CHECK(cudaEventCreate(&g[d].start), d);
        CHECK(cudaEventCreate(&g[d].stop), d);
        CHECK(cudaDeviceSynchronize(), d);
    }
    before_timed_copies();
    double t_ready = now();
    printf("# init %.3f s\n", t_ready - t_start);
    printf("# src dst bytes seconds GB/s\n");
    fflush(stdout);
    int rows = 0;
    char sa[16], sb[16];
    if (n == 1) {
        /* inside the GPU, then host <-> device through pinned memory */
        Gpu &x = g[0];
        char *host;
        CHECK(cudaSetDevice(0), 0);
        CHECK(cudaMallocHost((void **)&host, bytes), 0);
        memset(host, 0, bytes);
        for (int i = 0; i < warmup; i++)
            CHECK(cudaMemcpyAsync(x.recv, x.send, bytes, cudaMemcpyDeviceToDevice, x.stream), 0);
        CHECK(cudaEventRecord(x.start, x.stream), 0);
        for (int i = 0; i < repeats; i++)
            CHECK(cudaMemcpyAsync(x.recv, x.send, bytes, cudaMemcpyDeviceToDevice, x.stream), 0);
        CHECK(cudaEventRecord(x.stop, x.stream), 0);
        row("0", "0", bytes, elapsed(x, 0, repeats)); rows++;
        check_received(x.recv, bytes, pattern(0), 0, "inside GPU 0");
        /* device -> host: the host buffer receives GPU 0's pattern */
        for (int i = 0; i < warmup; i++)
            CHECK(cudaMemcpyAsync(host, x.send, bytes, cudaMemcpyDeviceToHost, x.stream), 0);
        CHECK(cudaEventRecord(x.start, x.stream), 0);
        for (int i = 0; i < repeats; i++)
            CHECK(cudaMemcpyAsync(host, x.send, bytes, cudaMemcpyDeviceToHost, x.stream), 0);
        CHECK(cudaEventRecord(x.stop, x.stream), 0);
        row("0", "host", bytes, elapsed(x, 0, repeats)); rows++;
        check_received(host, bytes, pattern(0), -1, "GPU 0 -> host");
        /* host -> device: the host buffer's bytes (GPU 0's pattern) again */
        CHECK(cudaMemset(x.recv, 0, bytes), 0);
        CHECK(cudaDeviceSynchronize(), 0);
        for (int i = 0; i < warmup; i++)
            CHECK(cudaMemcpyAsync(x.recv, host, bytes, cudaMemcpyHostToDevice, x.stream), 0);
        CHECK(cudaEventRecord(x.start, x.stream), 0);
        for (int i = 0; i < repeats; i++)
            CHECK(cudaMemcpyAsync(x.recv, host, bytes, cudaMemcpyHostToDevice, x.stream), 0);
        CHECK(cudaEventRecord(x.stop, x.stream), 0);
        row("host", "0", bytes, elapsed(x, 0, repeats)); rows++;
        check_received(x.recv, bytes, pattern(0), 0, "host -> GPU 0");
        CHECK(cudaFreeHost(host), 0);
    }
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            if (!peer[a * n + b] || !peer[b * n + a]) continue;  /* reported above */
            /* both directions at once: a's stream pushes a->b, b's b->a */
            for (int i = 0; i < warmup; i++) {
                CHECK(cudaMemcpyPeerAsync(g[b].recv, b, g[a].send, a, bytes, g[a].stream), a);
                CHECK(cudaMemcpyPeerAsync(g[a].recv, a, g[b].send, b, bytes, g[b].stream), b);
            }
            CHECK(cudaSetDevice(a), a);
            CHECK(cudaEventRecord(g[a].start, g[a].stream), a);
            CHECK(cudaSetDevice(b), b);
            CHECK(cudaEventRecord(g[b].start, g[b].stream), b);
            for (int i = 0; i < repeats; i++) {
                CHECK(cudaMemcpyPeerAsync(g[b].recv, b, g[a].send, a, bytes, g[a].stream), a);
                CHECK(cudaMemcpyPeerAsync(g[a].recv, a, g[b].send, b, bytes, g[b].stream), b);
            }
            CHECK(cudaSetDevice(a), a);
            CHECK(cudaEventRecord(g[a].stop, g[a].stream), a);
            CHECK(cudaSetDevice(b), b);
            CHECK(cudaEventRecord(g[b].stop, g[b].stream), b);
            double ab = elapsed(g[a], a, repeats), ba = elapsed(g[b], b, repeats);
            snprintf(sa, sizeof sa, "%d", a);
            snprintf(sb, sizeof sb, "%d", b);
            row(sa, sb, bytes, ab);
            row(sb, sa, bytes, ba);
            fflush(stdout);
            rows += 2;
            char what[64];
            snprintf(what, sizeof what, "GPU %d -> GPU %d", a, b);
            check_received(g[b].recv, bytes, pattern(a), b, what);
            snprintf(what, sizeof what, "GPU %d -> GPU %d", b, a);
            check_received(g[a].recv, bytes, pattern(b), a, what);
        }
    double t_end = now();
    printf("# done %d directions in %.3f s (total %.3f s)\n", rows,
           t_end - t_ready, t_end - t_start);
    fflush(stdout);
    for (int d = 0; d < n; d++) {      /* the all_reduce's memory next */
        CHECK(cudaSetDevice(d), d);
        CHECK(cudaFree(g[d].send), d);
        CHECK(cudaFree(g[d].recv), d);
        CHECK(cudaStreamDestroy(g[d].stream), d);
        CHECK(cudaEventDestroy(g[d].start), d);
        CHECK(cudaEventDestroy(g[d].stop), d);
    }
}

#ifndef CCL_HEALTH_PROBE
static void before_timed_copies(void) {}
#else
/* -- the all_reduce of every visible GPU (ccl-health-probe) -------------- */

static char host_name[256] = "localhost";

/* nccl-tests' own failure lines (src/common.h), which its reader knows */
#define NCHECK(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { \
    printf("%s: Test NCCL failure ccl_health_links.cu:%d '%s' (%s, %.3f s)\n", \
           host_name, __LINE__, ncclGetErrorString(r_), #call, now() - t_start); \
    fflush(stdout); exit(1); } } while (0)
#define ACHECK(call, gpu) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    printf("%s: Test %s failure ccl_health_links.cu:%d '%s' (%s on GPU %d, %.3f s)\n", \
           host_name, GPU_RUNTIME, __LINE__, cudaGetErrorString(e_), #call, \
           (gpu), now() - t_start); fflush(stdout); exit(1); } } while (0)

/* element i of rank r's input: (r + 1) * (1 + i % 13); of the sum over n
 * ranks: n (n + 1) / 2 * (1 + i % 13), exact in float */
__global__ void fill_values(float *p, size_t count, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)blockDim.x * gridDim.x)
        p[i] = scale * (float)(1 + i % 13);
}

__global__ void count_wrong(const float *p, size_t count, float scale,
                            unsigned long long *wrong) {
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)blockDim.x * gridDim.x)
        if (p[i] != scale * (float)(1 + i % 13)) mine++;
    if (mine) atomicAdd(wrong, mine);
}

struct Rank {
    float *send, *recv;
    unsigned long long *wrong;
    cudaStream_t stream;
    ncclComm_t comm;
};

/* `iters` all_reduces of every rank, each a group; the mean seconds of one */
static double timed(std::vector<Rank> &r, size_t count, int iters, int in_place) {
    int n = (int)r.size();
    double t0 = now();
    for (int it = 0; it < iters; it++) {
        NCHECK(ncclGroupStart());
        for (int d = 0; d < n; d++)
            NCHECK(ncclAllReduce(in_place ? r[d].recv : r[d].send, r[d].recv,
                                 count, ncclFloat, ncclSum, r[d].comm, r[d].stream));
        NCHECK(ncclGroupEnd());
    }
    for (int d = 0; d < n; d++) {
        ACHECK(cudaSetDevice(d), d);
        ACHECK(cudaStreamSynchronize(r[d].stream), d);
    }
    return iters ? (now() - t0) / iters : 0.0;
}

/* the elements of every rank's result that are not the expected sum */
static unsigned long long wrong_elements(std::vector<Rank> &r, size_t count) {
    int n = (int)r.size();
    unsigned long long total = 0;
    float sum = n * (n + 1) / 2.0f;
    for (int d = 0; d < n; d++) {
        unsigned long long w = 0;
        ACHECK(cudaSetDevice(d), d);
        ACHECK(cudaMemsetAsync(r[d].wrong, 0, sizeof w, r[d].stream), d);
        count_wrong<<<1024, 256, 0, r[d].stream>>>(r[d].recv, count, sum, r[d].wrong);
        ACHECK(cudaGetLastError(), d);
        ACHECK(cudaMemcpyAsync(&w, r[d].wrong, sizeof w, cudaMemcpyDeviceToHost,
                               r[d].stream), d);
        ACHECK(cudaStreamSynchronize(r[d].stream), d);
        total += w;
    }
    return total;
}

static void fill(std::vector<Rank> &r, size_t count, int into_recv) {
    for (int d = 0; d < (int)r.size(); d++) {
        ACHECK(cudaSetDevice(d), d);
        fill_values<<<1024, 256, 0, r[d].stream>>>(into_recv ? r[d].recv : r[d].send,
                                                   count, (float)(d + 1));
        ACHECK(cudaGetLastError(), d);
        ACHECK(cudaStreamSynchronize(r[d].stream), d);
    }
}

/* One GPU's buffers made and its input filled, in a thread of its own
 * while NCCL's communicators are made (issue 42: they cost as much as the
 * all_reduce itself when made after them, one GPU after another); the
 * first failing call and its error are kept for the main thread to name
 * (nccl-tests' "Test CUDA failure" line, exit 1). */
struct Prepared {
    cudaError_t err = cudaSuccess;
    const char *what = "";
};

#define PCHECK(call) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) { p->err = e_; p->what = #call; return; } } while (0)

static void prepare(Rank *r, int d, size_t bytes, size_t count, Prepared *p) {
    PCHECK(cudaSetDevice(d));
    PCHECK(cudaMalloc((void **)&r->send, bytes));
    PCHECK(cudaMalloc((void **)&r->recv, bytes));
    PCHECK(cudaMalloc((void **)&r->wrong, sizeof(unsigned long long)));
    PCHECK(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
    fill_values<<<1024, 256, 0, r->stream>>>(r->send, count, (float)(d + 1));
    PCHECK(cudaGetLastError());
    PCHECK(cudaStreamSynchronize(r->stream));
}

/* NCCL's communicators of every visible GPU (ncclCommInitAll), made in a
 * thread during the copy matrix (-O 1) or by all_reduce itself; never
 * destroyed at exit (a thread still running then must not end the process
 * with std::terminate: an error of the copies exits 1 as before). */
struct NcclInit {
    std::vector<ncclComm_t> comms;
    ncclResult_t res = ncclSuccess;
    double seconds = 0;
    std::thread thread;
    const char *when = "";       /* its "# nccl init" line's words */
};
static NcclInit *nccl_init = nullptr;
/* -O 1: the communicators are made while the copies run */
static int nccl_during_copies = 0;

static void init_comms(NcclInit *init) {
    int n = 0;
    double t = now();
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        init->res = ncclUnhandledCudaError;
        return;
    }
    init->comms.resize(n);
    std::vector<int> devs(n);
    for (int d = 0; d < n; d++) devs[d] = d;
    init->res = ncclCommInitAll(init->comms.data(), n, devs.data());
    init->seconds = now() - t;
}

/* ncclCommInitAll in a thread of its own from now on */
static void start_nccl(const char *when) {
    nccl_init = new NcclInit;
    nccl_init->when = when;
    nccl_init->thread = std::thread(init_comms, nccl_init);
}

static void before_timed_copies(void) {
    if (!nccl_init || nccl_during_copies || !nccl_init->thread.joinable()) return;
    double t = now();
    /* a hang from here on is NCCL's, not the copies' (the hook reads it so) */
    printf("# waiting for NCCL's communicators (ncclCommInitAll, "
           "started before the go)\n");
    fflush(stdout);
    nccl_init->thread.join();
    printf("# nccl init (started before the go) waited for %.3f s before the copies\n",
           now() - t);
}

static void all_reduce(size_t bytes, int iters, int warmup) {
    int n = 0, lib = 0;
    gethostname(host_name, sizeof host_name - 1);
    size_t count = bytes / sizeof(float);
    bytes = count * sizeof(float);
    printf("# ccl-health-probe all_reduce\n");
    ncclGetVersion(&lib);
    printf("# ccl-health-probe version %d %s-headers=%d %s-library=%d\n", VERSION,
           NCCL_NAME, NCCL_VERSION_CODE, NCCL_NAME, lib);
    printf("# Collective test starting: all_reduce_perf\n");
    ACHECK(cudaGetDeviceCount(&n), -1);
    printf("# nThread 1 nGpus %d minBytes %zu maxBytes %zu step: 1048576(bytes) "
           "warmup iters: %d iters: %d agg iters: 1 validation: 1 graph: 0\n",
           n, bytes, bytes, warmup, iters);
    printf("#\n# Using devices\n");
    for (int d = 0; d < n; d++) {
        cudaDeviceProp prop;
        char bus[64] = "?";
        ACHECK(cudaGetDeviceProperties(&prop, d), d);
        ACHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, d), d);
        printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s\n", d,
               (int)getpid(), host_name, d, bus, prop.name);
    }
    fflush(stdout);
    std::vector<Rank> r(n);
    std::vector<Prepared> prepared(n);
    double t_buffers = now();
    std::vector<std::thread> preparing;
    for (int d = 0; d < n; d++)
        preparing.emplace_back(prepare, &r[d], d, bytes, count, &prepared[d]);
    if (nccl_init == nullptr) {
        nccl_init = new NcclInit;
        init_comms(nccl_init);
    } else if (nccl_init->thread.joinable()) nccl_init->thread.join();
    for (auto &t : preparing) t.join();
    double t_ready = now();
    for (int d = 0; d < n; d++)
        if (prepared[d].err != cudaSuccess) {
            printf("%s: Test %s failure ccl_health_links.cu:%d '%s' (%s on GPU %d, "
                   "%.3f s)\n", host_name, GPU_RUNTIME, __LINE__,
                   cudaGetErrorString(prepared[d].err), prepared[d].what, d,
                   now() - t_start);
            fflush(stdout);
            exit(1);
        }
    NCHECK(nccl_init->res);
    if ((int)nccl_init->comms.size() != n) NCHECK(ncclInvalidUsage);
    std::vector<ncclComm_t> &comms = nccl_init->comms;
    printf("# nccl init %.3f s%s\n", nccl_init->seconds, nccl_init->when);
    fflush(stdout);
    for (int d = 0; d < n; d++) r[d].comm = comms[d];
    /* out of place: the input stays, the result of the last one is checked;
     * the warm-up only here, once, as nccl-tests warms up (its TimeTest) */
    double t0 = now();
    timed(r, count, warmup, 0);
    double t_warm = now();
    double t_out = timed(r, count, iters, 0);
    double t1 = now();
    unsigned long long w_out = wrong_elements(r, count);
    /* in place: timed, then the input written again and one run checked
     * (nccl-tests' BenchTime) */
    double t2 = now();
    fill(r, count, 1);
    double t_in = timed(r, count, iters, 1);
    double t3 = now();
    fill(r, count, 1);
    timed(r, count, 1, 1);
    unsigned long long w_in = wrong_elements(r, count);
    double t4 = now();
    printf("# all_reduce phases: buffers %.3f s (beside nccl init), warmup %.3f s, "
           "out-of-place %.3f s, in-place %.3f s, checks %.3f s\n",
           t_ready - t_buffers, t_warm - t0, t1 - t_warm, t3 - t2,
           (t2 - t1) + (t4 - t3));
    double factor = n > 1 ? 2.0 * (n - 1) / n : 0.0;   /* nccl-tests' busbw */
    double alg_out = t_out > 0 ? bytes / t_out / 1e9 : 0.0;
    double alg_in = t_in > 0 ? bytes / t_in / 1e9 : 0.0;
    printf("#\n#                                                              "
           "out-of-place                       in-place          \n");
    printf("#       size         count      type   redop    root     time   "
           "algbw   busbw  #wrong     time   algbw   busbw  #wrong \n");
    printf("#        (B)    (elements)                               (us)  "
           "(GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         \n");
    printf("%12zu  %12zu  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f  %6llu  %7.2f  %6.2f  "
           "%6.2f  %6llu\n", bytes, count, "float", "sum", -1, t_out * 1e6, alg_out,
           alg_out * factor, w_out, t_in * 1e6, alg_in, alg_in * factor, w_in);
    printf("# Out of bounds values : %llu %s\n", w_out + w_in,
           w_out + w_in ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n", (alg_out + alg_in) / 2 * factor);
    printf("#\n# Collective test concluded: all_reduce_perf\n");
    printf("# probe total %.3f s\n", now() - t_start);
    fflush(stdout);
    // no ncclCommDestroy: main ends the process at once (quick_exit below)
}
#endif

struct Options {
    size_t bytes = 256u << 20;
    int repeats = 5, warmup = 1;
#ifdef CCL_HEALTH_PROBE
    size_t ar_bytes = (size_t)1 << 30;
    int ar_iters = 10, ar_warmup = 2, overlap = 0, wait_go = 0;
#endif
};

/* argv[first..argc) into `o` (a usage error exits 2) */
static void parse_options(int argc, char **argv, int first, Options &o) {
    for (int i = first; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: " USAGE "\n");
            exit(0);
        }
#ifdef CCL_HEALTH_PROBE
        if (!strcmp(argv[i], "-S")) { o.wait_go = 1; continue; }
#endif
        if (i + 1 >= argc) usage_error("option without a value", argv[i]);
#ifdef CCL_HEALTH_PROBE
        if (!strcmp(argv[i], "-b")) o.bytes = parse_bytes(argv[++i], 1);
        else if (!strcmp(argv[i], "-a")) o.ar_bytes = parse_bytes(argv[++i], 1);
        else if (!strcmp(argv[i], "-i")) o.ar_iters = parse_count(argv[++i], 1);
        else if (!strcmp(argv[i], "-W")) o.ar_warmup = parse_count(argv[++i], 0);
        else if (!strcmp(argv[i], "-O")) o.overlap = parse_count(argv[++i], 0) != 0;
#else
        if (!strcmp(argv[i], "-b")) o.bytes = parse_bytes(argv[++i], 0);
#endif
        else if (!strcmp(argv[i], "-n")) o.repeats = parse_count(argv[++i], 1);
        else if (!strcmp(argv[i], "-w")) o.warmup = parse_count(argv[++i], 0);
        else usage_error("unknown option", argv[i]);
    }
}

#ifdef CCL_HEALTH_PROBE
/* -S: started ahead of its work (issue 42: the hook starts it before it
 * has read its site, so that CUDA starts while Python works).  CUDA's
 * driver starts at once; then the program reads standard input:
 *
 *   env NAME=VALUE     set in its environment (the hook sends only variables
 *   unset NAME         nothing reads before the start: ccl_health/hook/
 *                      probes.py, LATE_PREFIXES)
 *   start [nccl]       every visible GPU's context made, one thread each,
 *                      and with "nccl" NCCL's communicators (ncclCommInitAll)
 *                      in a thread of their own, while it waits for its go;
 *                      they end before the copies are timed, unless -O 1
 *   go [OPTIONS]       the options above; the work begins (a go without a
 *                      start starts first)
 *
 * The variables are set before any thread of its own runs.  The end of
 * input without "go": exit 3, nothing measured, nothing printed (the hook
 * did not want it).  Its timings count from the go; the line "# early S s
 * before the go, contexts T s after it" says how long it waited and how
 * much of the contexts' start was left then. */
static void wait_for_go(Options &o) {
    static char line[1 << 16];
    std::vector<std::string> sets, unsets;
    double t0 = now();
    int count = 0;
    (void)cudaGetDeviceCount(&count);      /* the driver starts now */
    std::thread contexts;
    bool begun = false;
    auto begin = [&](bool nccl) {
        if (begun) return;
        begun = true;
        for (auto &u : unsets) unsetenv(u.c_str());
        for (auto &kv : sets) {
            size_t eq = kv.find('=');
            setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
        }
        contexts = std::thread(start_contexts, 1);
        if (nccl) start_nccl(" (started before the go)");
    };
    for (;;) {
        if (!fgets(line, sizeof line, stdin)) {
            fflush(NULL);
            _exit(3);             /* not wanted: no thread waited for */
        }
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n') line[--len] = '\0';
        if (!strncmp(line, "env ", 4) && !begun) {
            const char *eq = strchr(line + 4, '=');
            if (!eq || eq == line + 4) usage_error("bad env line", line);
            sets.push_back(line + 4);
        } else if (!strncmp(line, "unset ", 6) && !begun) {
            if (!line[6]) usage_error("bad unset line", line);
            unsets.push_back(line + 6);
        } else if (!strcmp(line, "start") || !strcmp(line, "start nccl")) {
            begin(line[5] != '\0');
        } else if (!strcmp(line, "go") || !strncmp(line, "go ", 3)) {
            break;
        } else usage_error("unknown line on stdin", line);
    }
    double t_go = now();
    std::vector<char *> words{(char *)"go"};
    for (char *w = strtok(line + 2, " \t"); w; w = strtok(nullptr, " \t"))
        words.push_back(w);
    Options given;
    parse_options((int)words.size(), words.data(), 1, given);
    given.wait_go = 1;
    o = given;
    begin(false);
    contexts.join();
    t_start = t_go;        /* its timings count from the go */
    printf("# early %.3f s before the go, contexts %.3f s after it\n",
           t_go - t0, now() - t_go);
}
#endif

int main(int argc, char **argv) {
    t_start = now();
    Options o;
    parse_options(argc, argv, 1, o);
#ifdef CCL_HEALTH_PROBE
    if (o.wait_go) wait_for_go(o);
    else
#endif
    start_contexts(2);
#ifdef CCL_HEALTH_PROBE
    nccl_during_copies = o.overlap;
    if (o.overlap && o.ar_bytes && o.bytes && nccl_init == nullptr)
        start_nccl(" (during the copy matrix)");
#endif
    if (o.bytes) copy_matrix(o.bytes, o.repeats, o.warmup);
#ifdef CCL_HEALTH_PROBE
    if (o.ar_bytes) all_reduce(o.ar_bytes, o.ar_iters, o.ar_warmup);
    // everything is measured and printed: end here, without tearing down
    // NCCL's communicators and every GPU's context one by one (the driver
    // frees a process's contexts when it ends); every stream flushed first
    // (the output and NCCL's debug file)
    fflush(NULL);
    _exit(0);
#endif
    return 0;
}

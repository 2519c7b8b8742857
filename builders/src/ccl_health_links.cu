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
 * Built with nvcc (or hipcc -x hip, gpu_compat.h) by builders/nccl_tests.py
 * into the nccl-tests / rccl-tests install prefix: bin/ccl-health-links. */
#include "gpu_compat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

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
    printf("# usage error: %s%s%s (usage: ccl-health-links [-b BYTES] "
           "[-n REPEATS] [-w WARMUP])\n", msg, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

static size_t parse_bytes(const char *s) {
    char *end;
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

int main(int argc, char **argv) {
    t_start = now();
    size_t bytes = 256u << 20;
    int repeats = 5, warmup = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: ccl-health-links [-b BYTES] [-n REPEATS] [-w WARMUP]\n");
            return 0;
        }
        if (i + 1 >= argc) usage_error("option without a value", argv[i]);
        if (!strcmp(argv[i], "-b")) bytes = parse_bytes(argv[++i]);
        else if (!strcmp(argv[i], "-n")) repeats = parse_count(argv[++i], 1);
        else if (!strcmp(argv[i], "-w")) warmup = parse_count(argv[++i], 0);
        else usage_error("unknown option", argv[i]);
    }
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
    return 0;
}

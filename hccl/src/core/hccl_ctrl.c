/*
 * Control segments and the waits on their flags (protocol in hccl_internal.h).
 *
 * Who exports: each rank creates its segment (memfd) and offers it through the
 * vmm broker before bootstrap; the token travels in the bootstrap table.
 * Who maps: every rank fetches and maps every peer's segment (same-process
 * peers included: the broker dups the fd locally). Lifetime: unmapped at
 * HcclCommDestroy; the memory goes away with the last mapping.
 *
 * A wait polls the peer's flag ZCCL_SPIN_ITERS times (64 while yields are
 * off: zc_yield_is_off), then yields (while yields are short: zc_yield),
 * then sleeps on its futex (shared, so a writer in another process wakes
 * it) in 100 ms slices, checking between slices that the peer is alive
 * (pidfd readable = exited), that no peer flagged an error, and the exec
 * timeout. With 4 ranks on 2 cores this is what keeps everyone moving: a spinning waiter would
 * steal the core of the rank it waits for.
 */
#include "core/hccl_internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zc/config.h"
#include "zc/log.h"
#include "zc/place.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"

#define ZH_SLICE_NS 100000000ull
#define ZH_YIELD_ITERS 256u
#define ZH_SPIN_MAX_NS 20000ull

/* Ranks of one process share one mapping of each control segment, so their
 * atomics on a flag use one address (TSan and any address-based tool can
 * see the release/acquire pairs); the mapping is refcounted: its owner and
 * every same-process peer hold one reference. */
#define ZH_CTRL_MAPS 1024
typedef struct {
    uint64_t token;
    zh_ctrl_t *ctrl;
    size_t bytes;
    int refs;
} zh_ctrl_map_t;
static pthread_mutex_t zh_ctrl_maps_lock = PTHREAD_MUTEX_INITIALIZER;
static zh_ctrl_map_t zh_ctrl_maps[ZH_CTRL_MAPS];

static int zh_ctrl_map_add(uint64_t token, zh_ctrl_t *ctrl, size_t bytes)
{
    int ok = 0;
    pthread_mutex_lock(&zh_ctrl_maps_lock);
    for (int i = 0; i < ZH_CTRL_MAPS && !ok; i++) {
        if (zh_ctrl_maps[i].refs == 0) {
            zh_ctrl_maps[i] = (zh_ctrl_map_t){token, ctrl, bytes, 1};
            ok = 1;
        }
    }
    pthread_mutex_unlock(&zh_ctrl_maps_lock);
    return ok ? ZC_OK : ZC_ERR_OVERLIMIT;
}

static zh_ctrl_t *zh_ctrl_map_ref(uint64_t token, size_t bytes)
{
    zh_ctrl_t *found = NULL;
    pthread_mutex_lock(&zh_ctrl_maps_lock);
    for (int i = 0; i < ZH_CTRL_MAPS && found == NULL; i++) {
        if (zh_ctrl_maps[i].refs > 0 && zh_ctrl_maps[i].token == token &&
            zh_ctrl_maps[i].bytes == bytes) {
            zh_ctrl_maps[i].refs++;
            found = zh_ctrl_maps[i].ctrl;
        }
    }
    pthread_mutex_unlock(&zh_ctrl_maps_lock);
    return found;
}

static void zh_ctrl_map_unref(zh_ctrl_t *ctrl)
{
    size_t last = 0;
    pthread_mutex_lock(&zh_ctrl_maps_lock);
    for (int i = 0; i < ZH_CTRL_MAPS; i++) {
        if (zh_ctrl_maps[i].refs > 0 && zh_ctrl_maps[i].ctrl == ctrl) {
            last = --zh_ctrl_maps[i].refs == 0 ? zh_ctrl_maps[i].bytes : 0;
            break;
        }
    }
    pthread_mutex_unlock(&zh_ctrl_maps_lock);
    if (last != 0) {
        munmap(ctrl, last);
    }
}

static int zh_pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

zh_ctrl_layout_t zh_ctrl_layout(uint32_t nranks)
{
    zh_ctrl_layout_t l = {.slots = nranks};
    l.v_off = ZC_ALIGN_UP(sizeof(zh_ctrl_t), ZC_CACHELINE);
    l.p2p_off =
        ZC_ALIGN_UP(l.v_off + 2u * ZH_V_ARRAYS * (size_t)nranks * sizeof(uint64_t), ZC_CACHELINE);
    l.bytes = ZC_ALIGN_UP(l.p2p_off + (size_t)nranks * sizeof(zh_p2p_t), 4096);
    return l;
}

int zh_ctrl_check_local(const zh_comm_t *c, int n)
{
    uint64_t max = zc_config()->max_local_ranks;
    if ((uint64_t)n > max) {
        ZC_WARN(ZC_SUB_INIT,
                "rank %d: %d ranks of the communicator on one host (at most %llu: "
                "ZCCL_MAX_LOCAL_RANKS)",
                c->rank, n, (unsigned long long)max);
        return ZC_ERR_INVAL;
    }
    return ZC_OK;
}

int zh_comm_tables(zh_comm_t *c)
{
    size_t n = (size_t)c->nranks;
    zh_op_scratch_t *s = &c->scratch;
    c->peers = calloc(n, sizeof(*c->peers));
    c->verdicts = calloc(n, sizeof(*c->verdicts));
    c->peer_pids = calloc(2 * n, sizeof(*c->peer_pids));
    /* the scratch's pointer arrays in one block: 5 + ZH_V_ARRAYS of them */
    void **block = calloc((5 + ZH_V_ARRAYS) * n, sizeof(void *));
    s->each = calloc(n, sizeof(*s->each));
    if (c->peers == NULL || c->verdicts == NULL || c->peer_pids == NULL || block == NULL ||
        s->each == NULL) {
        free(block);
        zh_comm_tables_free(c);
        ZC_WARN(ZC_SUB_INIT, "rank %d: out of memory for the tables of %d ranks", c->rank,
                c->nranks);
        return ZC_ERR_NOMEM;
    }
    c->xproc_pids = c->peer_pids + n;
    for (size_t r = 0; r < n; r++) {
        c->peers[r].pidfd = -1; /* calloc's 0 is a real fd: zh_ctrl_destroy closes pidfd >= 0 */
    }
    s->post = (const zh_post_t **)(void *)block;
    s->desc = (const zh_desc_t **)(void *)(block + n);
    s->in = (const void **)(void *)(block + 2 * n);
    s->out = block + 3 * n;
    s->ccl = block + 4 * n;
    for (int i = 0; i < ZH_V_ARRAYS; i++) {
        s->v[i] = (const uint64_t **)(void *)(block + (5 + (size_t)i) * n);
    }
    return ZC_OK;
}

void zh_comm_tables_free(zh_comm_t *c)
{
    free(c->peers);
    free(c->verdicts);
    free(c->peer_pids);
    free((void *)c->scratch.post);
    free(c->scratch.each);
    c->peers = NULL;
    c->verdicts = NULL;
    c->peer_pids = NULL;
    c->xproc_pids = NULL;
    memset(&c->scratch, 0, sizeof(c->scratch));
}

int zh_ctrl_create(zh_comm_t *c)
{
    c->lay = zh_ctrl_layout((uint32_t)c->nranks);
    size_t sz = c->lay.bytes;
    int fd = memfd_create("zccl-ctrl", MFD_CLOEXEC);
    if (fd < 0) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: memfd_create for the control segment failed: %s", c->rank,
                strerror(errno));
        return ZC_ERR_SYS;
    }
    if (ftruncate(fd, (off_t)sz) != 0) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: ftruncate(%zu) of the control segment failed: %s", c->rank,
                sz, strerror(errno));
        close(fd);
        return ZC_ERR_NOMEM;
    }
    void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: mapping the control segment failed: %s", c->rank,
                strerror(errno));
        close(fd);
        return ZC_ERR_NOMEM;
    }
    zh_ctrl_t *ctrl = p;
    ctrl->version = ZH_CTRL_VERSION;
    ctrl->rank = (uint32_t)c->rank;
    ctrl->nranks = c->lay.slots;
    atomic_init(&ctrl->cpu, -1);
    c->cpu = -1;
    /* Peers allowed are unknown before bootstrap; the token is 42 random bits
     * and the broker still checks the uid, so pid validation is off. */
    int st = zccl_broker_offer(fd, sz, 0, &c->ctrl_token);
    if (st != ZC_OK) {
        munmap(p, sz);
        close(fd);
        return st;
    }
    st = zh_ctrl_map_add(c->ctrl_token, ctrl, sz);
    if (st != ZC_OK) {
        (void)zccl_broker_withdraw(c->ctrl_token);
        c->ctrl_token = 0;
        munmap(p, sz);
        close(fd);
        return st;
    }
    c->ctrl = ctrl;
    c->ctrl_fd = fd;
    return ZC_OK;
}

/* Rank r's mapped segment names the version, rank and rank count this comm
 * expects (its size was checked before it was mapped). */
static int zh_ctrl_check_peer(const zh_comm_t *c, int r)
{
    const zh_ctrl_t *s = c->peers[r].ctrl;
    uint32_t want = (uint32_t)(c->ctrl_ranks != NULL ? c->ctrl_ranks[r] : r);
    if (s->version != ZH_CTRL_VERSION || s->rank != want || s->nranks != c->lay.slots) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: control segment of rank %d has version %u rank %u of %u",
                c->rank, r, s->version, s->rank, s->nranks);
        return ZC_ERR_INTERNAL;
    }
    return ZC_OK;
}

/* Map rank r's segment (another process's) and check it is one of this
 * comm: exactly the layout's size (a segment of another rank count or a
 * hostile one is refused before anything in it is read), version and rank. */
static int zh_ctrl_map_peer(zh_comm_t *c, int r)
{
    zh_peer_t *p = &c->peers[r];
    size_t sz = c->lay.bytes;
    int fd = -1;
    size_t got = 0;
    int st = zccl_broker_fetch(p->ctrl_token, &fd, &got);
    if (st != ZC_OK) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: cannot fetch the control segment of rank %d (pid %d)",
                c->rank, r, (int)p->pid);
        return st;
    }
    if (got != sz) {
        close(fd);
        ZC_WARN(ZC_SUB_COMM,
                "rank %d: control segment of rank %d is %zu bytes, not the %zu of %u ranks: "
                "refused",
                c->rank, r, got, sz, c->lay.slots);
        return ZC_ERR_INTERNAL;
    }
    void *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: cannot map the control segment of rank %d (size %zu): %s",
                c->rank, r, got, strerror(errno));
        return ZC_ERR_NOMEM;
    }
    p->ctrl = m;
    ZC_CHECK(zh_ctrl_check_peer(c, r));
    p->pidfd = zh_pidfd_open(p->pid);
    return ZC_OK;
}

int zh_ctrl_attach_peers(zh_comm_t *c, const zh_boot_entry_t *table)
{
    for (int r = 0; r < c->nranks; r++) {
        zh_peer_t *p = &c->peers[r];
        p->pid = table[r].pid;
        p->ctrl_token = table[r].ctrl_token;
        p->same_proc = table[r].pid == (int32_t)getpid();
        p->pidfd = -1;
        if (r == c->rank) {
            p->ctrl = c->ctrl;
            continue;
        }
        c->peer_pids[c->npeer_pids++] = p->pid;
        if (!p->same_proc) {
            c->xproc_pids[c->nxproc_pids++] = p->pid;
            ZC_CHECK(zh_ctrl_map_peer(c, r));
            continue;
        }
        p->ctrl = zh_ctrl_map_ref(p->ctrl_token, c->lay.bytes);
        if (p->ctrl == NULL) {
            ZC_WARN(ZC_SUB_COMM,
                    "rank %d: no %zu-byte control segment of rank %d in this process (token %llx)",
                    c->rank, c->lay.bytes, r, (unsigned long long)p->ctrl_token);
            return ZC_ERR_INTERNAL;
        }
        ZC_CHECK(zh_ctrl_check_peer(c, r));
    }
    for (int r = 0; r < c->nranks; r++) {
        c->verdicts[r] = c->peers[r].ctrl->verdict;
    }
    c->reuse.verdict_out = c->ctrl->verdict;
    c->reuse.verdict_in = c->verdicts;
    c->reuse.verdict_ranks = c->nranks;
    return ZC_OK;
}

void zh_ctrl_destroy(zh_comm_t *c)
{
    size_t sz = c->lay.bytes;
    c->reuse.verdict_out = NULL;
    c->reuse.verdict_ranks = 0;
    for (int r = 0; r < c->nranks; r++) {
        zh_peer_t *p = &c->peers[r];
        if (r != c->rank && p->ctrl != NULL) {
            if (p->same_proc) {
                zh_ctrl_map_unref(p->ctrl);
            } else {
                munmap(p->ctrl, sz);
            }
        }
        p->ctrl = NULL;
        if (p->pidfd >= 0) {
            close(p->pidfd);
            p->pidfd = -1;
        }
    }
    if (c->ctrl != NULL) {
        zh_flag_post(&c->ctrl->closed, 1); /* peers waiting for me give up at once */
    }
    if (c->ctrl_token != 0) {
        (void)zccl_broker_withdraw(c->ctrl_token);
        c->ctrl_token = 0;
    }
    if (c->ctrl != NULL) {
        zh_ctrl_map_unref(c->ctrl);
        c->ctrl = NULL;
    }
    if (c->ctrl_fd >= 0) {
        close(c->ctrl_fd);
        c->ctrl_fd = -1;
    }
}

void zh_flag_post(zh_flag_t *f, uint32_t value)
{
    atomic_store_explicit(&f->value, value, memory_order_seq_cst);
    if (atomic_load_explicit(&f->sleepers, memory_order_seq_cst) != 0) {
        zc_futex_wake(&f->value, INT32_MAX);
    }
}

/* The post of a barrier (every op past the inline size ends with one)
 * without the full fence of zh_flag_post: that fence waits for the line to
 * come back from the peers that polled it, a round trip between cores on
 * every post (perf log 2026-12-07, "Small ops: the fences of the posts").
 * Those who sleep on a bar flag fence instead (zh_comm_sleep, decision
 * 0037). Only the compiler is kept from reading the count before storing
 * the value. */
static void zh_bar_post(zh_comm_t *c)
{
    zh_flag_t *f = &c->ctrl->bar;
    if (!c->fast_post) {
        zh_flag_post(f, c->bar_count);
        return;
    }
    atomic_store_explicit(&f->value, c->bar_count, memory_order_release);
    atomic_signal_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&f->sleepers, memory_order_relaxed) != 0) {
        zc_futex_wake(&f->value, INT32_MAX);
    }
}

/* A lost wake's cost when a sleeper could not fence its peers. */
#define ZH_UNFENCED_SLEEP_NS 1000000ull

void zh_flag_sleep(zh_flag_t *f, uint32_t target, uint64_t ns, int fence)
{
    /* Dekker with zh_flag_post: sleepers counted before value is read, both
     * seq_cst, so a post either sees my count or I see its value. With
     * zh_bar_post the writer has no fence: zc_fence_peers gives it one
     * between my count and my read. */
    atomic_fetch_add_explicit(&f->sleepers, 1, memory_order_seq_cst);
    if (fence && zc_fence_peers() != 0 && ns > ZH_UNFENCED_SLEEP_NS) {
        ns = ZH_UNFENCED_SLEEP_NS;
    }
    uint32_t v = atomic_load_explicit(&f->value, memory_order_seq_cst);
    if (!zh_reached(v, target)) {
        (void)zc_futex_wait(&f->value, v, ns);
    }
    atomic_fetch_sub_explicit(&f->sleepers, 1, memory_order_seq_cst);
}

/* A sleep of a wait for peer's flag f. While a busy task shares the cores
 * (yields off) the scheduler tends to wake a sleeper on the CPU of the peer
 * that woke it, and to leave both ranks there: each CPU's busy task weighs
 * more than two ranks that sleep between ops, so the other CPU never looks
 * the lighter. Stacked, each op waits for the peer to get the CPU this rank
 * holds, 3-5x slower than a CPU apart (docs/perf-log.md, 2026-12-06 "Busy
 * cores: ranks stacked on one CPU"). So such a sleep keeps the thread off
 * the CPU the peer last posted from (zc_cpu_fence_up: its affinity mask
 * loses that CPU until the wake; a thread already there moves at once). The
 * mask is narrowed only while the thread sleeps in here, so nothing it
 * starts inherits it. */
void zh_comm_sleep(zh_comm_t *c, int peer, zh_flag_t *f, uint32_t target, uint64_t ns)
{
    zc_cpu_fence_t fence = {.up = 0};
    if (c->spread && peer != c->rank && zc_yield_is_off()) {
        (void)zc_cpu_fence_up(
            &fence, atomic_load_explicit(&c->peers[peer].ctrl->cpu, memory_order_relaxed));
    }
    /* a peer's barrier flag may be posted without a fence (zh_bar_post) */
    zh_flag_sleep(f, target, ns, !c->oversub && f == &c->peers[peer].ctrl->bar);
    zc_cpu_fence_lift(&fence);
}

static int zh_peer_dead(const zh_peer_t *p)
{
    if (p->pidfd < 0) {
        return p->same_proc ? 0 : (kill(p->pid, 0) != 0 && errno == ESRCH);
    }
    struct pollfd pfd = {.fd = p->pidfd, .events = POLLIN};
    return poll(&pfd, 1, 0) > 0;
}

int zh_peer_gone(zh_comm_t *c, int peer)
{
    /* closed first: a destroy posts it before the process can exit */
    return atomic_load_explicit(&c->peers[peer].ctrl->closed.value, memory_order_acquire) != 0 ||
           zh_peer_dead(&c->peers[peer]);
}

void zh_comm_fail(zh_comm_t *c, int st)
{
    HcclResult r = zh_result(st);
    int expect = HCCL_SUCCESS;
    atomic_compare_exchange_strong(&c->async_error, &expect, (int)r);
    if (c->ctrl == NULL) {
        if (zh_comm_inner(c) != c) {
            zh_comm_fail(zh_comm_inner(c), st); /* spans hosts: my host's ranks fail at once */
        }
        return;
    }
    if (atomic_load_explicit(&c->ctrl->error.value, memory_order_relaxed) == 0) {
        zh_flag_post(&c->ctrl->error, (uint32_t)r);
    }
}

/* Any peer's error flag set: fail with ZC_ERR_REMOTE. */
static int zh_peer_error(zh_comm_t *c, int *who)
{
    for (int r = 0; r < c->nranks; r++) {
        if (r != c->rank &&
            atomic_load_explicit(&c->peers[r].ctrl->error.value, memory_order_relaxed) != 0) {
            *who = r;
            return 1;
        }
    }
    return 0;
}

/* Wait until peer's flag (at flag_offset in its segment) reaches target.
 * *start (0: not yet) is when the wait of this barrier began, read from the
 * clock only once some wait goes on: a clock read (dearer still on a VM)
 * costs more than a wait that finds every flag set. */
static int zh_wait_one(zh_comm_t *c, int peer, size_t flag_offset, uint32_t target, uint64_t *start)
{
    zh_peer_t *p = &c->peers[peer];
    zh_flag_t *f = (zh_flag_t *)(void *)((char *)p->ctrl + flag_offset);
    uint64_t until = 0;
    for (uint32_t i = 0; i < c->spin_iters; i++) {
        if (zh_reached(atomic_load_explicit(&f->value, memory_order_acquire), target)) {
            return ZC_OK;
        }
        zc_cpu_relax();
        /* Bound the spin in time too: on a busy host the peer may need this
         * very core, and a pause costs 10 to 150 cycles depending on the CPU. */
        if (i % 64 == 63) {
            uint64_t now = zc_time_ns();
            *start = *start != 0 ? *start : now;
            until = until != 0 ? until : now + ZH_SPIN_MAX_NS;
            if (now > until || zc_yield_is_off()) {
                break;
            }
        }
    }
    *start = *start != 0 ? *start : zc_time_ns();
    /* Yield phase: lets a peer that shares this core run (4 ranks on 2
     * cores), and costs one syscall per poll when nobody else is runnable. */
    for (uint32_t i = 0; i < ZH_YIELD_ITERS; i++) {
        if (zh_reached(atomic_load_explicit(&f->value, memory_order_acquire), target)) {
            return ZC_OK;
        }
        if (!zc_yield()) {
            break;
        }
    }
    for (;;) {
        uint32_t v = atomic_load_explicit(&f->value, memory_order_acquire);
        if (zh_reached(v, target)) {
            return ZC_OK;
        }
        (void)zc_yield(); /* a peer that shares the core goes first (nothing once yields are off) */
        zh_comm_sleep(c, peer, f, target, ZH_SLICE_NS);
        if (zh_reached(atomic_load_explicit(&f->value, memory_order_acquire), target)) {
            return ZC_OK;
        }
        /* A peer that posted what I wait for and then left (exited or
         * destroyed its comm, having no duty left) is no failure: its exit
         * is seen after its posts, so look at the flag once more after
         * seeing it gone, and only then fail. */
        int st = zh_wait_check(c, peer, *start);
        if (st == ZC_OK && zh_peer_gone(c, peer)) {
            if (zh_reached(atomic_load_explicit(&f->value, memory_order_acquire), target)) {
                return ZC_OK;
            }
            st = zh_peer_left(c, peer);
        }
        if (st != ZC_OK) {
            ZC_WARN(ZC_SUB_COMM, "rank %d: gave up waiting for rank %d (flag %u, want %u)", c->rank,
                    peer, atomic_load_explicit(&f->value, memory_order_relaxed), target);
            return st;
        }
    }
}

/* The status a waiter fails with when rank who raised its error flag. */
static int zh_peer_error_status(zh_comm_t *c, int who, int peer)
{
    unsigned e = atomic_load_explicit(&c->peers[who].ctrl->error.value, memory_order_relaxed);
    if (e == HCCL_E_PARA) {
        return ZC_ERR_INVAL; /* a misuse seen there: the same verdict here */
    }
    if (e == HCCL_E_TIMEOUT && peer >= 0 && peer != who &&
        atomic_load_explicit(&c->peers[peer].ctrl->error.value, memory_order_relaxed) == 0) {
        return ZC_ERR_TIMEOUT; /* the rank I wait for is late for both of us */
    }
    return ZC_ERR_REMOTE;
}

int zh_peer_left(zh_comm_t *c, int peer)
{
    if (atomic_load_explicit(&c->peers[peer].ctrl->closed.value, memory_order_acquire) != 0) {
        ZC_WARN(ZC_SUB_COMM,
                "rank %d: peer rank %d destroyed its communicator while this rank "
                "waits for it",
                c->rank, peer);
        return ZC_ERR_REMOTE;
    }
    if (zh_peer_dead(&c->peers[peer])) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: peer rank %d (pid %d) died", c->rank, peer,
                (int)c->peers[peer].pid);
        return ZC_ERR_REMOTE;
    }
    return ZC_OK;
}

int zh_wait_check(zh_comm_t *c, int peer, uint64_t start)
{
    int who = -1;
    if (zh_peer_error(c, &who)) {
        int st = zh_peer_error_status(c, who, peer);
        ZC_WARN(ZC_SUB_COMM, "rank %d: peer rank %d failed (error %u)", c->rank, who,
                atomic_load_explicit(&c->peers[who].ctrl->error.value, memory_order_relaxed));
        return st;
    }
    if (peer >= 0 && atomic_load_explicit(&c->waiting_seq, memory_order_relaxed) != 0) {
        int st = zh_mix_check(c, peer, start, 0, 0);
        if (st != ZC_OK) {
            return st;
        }
    }
    if (c->exec_timeout_ns != 0 && zc_time_ns() - start > c->exec_timeout_ns) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: waited %llu s for rank %d: exec timeout", c->rank,
                (unsigned long long)(c->exec_timeout_ns / 1000000000ull), peer);
        return ZC_ERR_TIMEOUT;
    }
    return ZC_OK;
}

/* How long a wait lasts before a send/recv-against-collective picture is
 * taken for a deadlock: issue calls of a rank follow each other within
 * microseconds, so a picture that still holds then is not a race. */
#define ZH_MIX_GRACE_NS 500000000ull

static int zh_after(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) > 0;
}

int zh_mix_check(zh_comm_t *c, int peer, uint64_t start, int send, uint32_t p2p_seq)
{
    if (peer < 0 || zc_time_ns() - start < ZH_MIX_GRACE_NS) {
        return ZC_OK;
    }
    zh_ctrl_t *pc = c->peers[peer].ctrl;
    zh_p2p_t *theirs = zh_ctrl_p2p(c, pc, c->rank);
    zh_p2p_t *mine = zh_ctrl_p2p(c, c->ctrl, peer);
    uint32_t p_coll = atomic_load_explicit(&pc->issued.value, memory_order_acquire);
    uint32_t m_coll = atomic_load_explicit(&c->ctrl->issued.value, memory_order_acquire);
    if (p2p_seq == 0) {
        /* My collective k waits for peer: it has not issued k, but it issued
         * a send or receive with me that I have not (and never will before
         * k, which it must finish first): a mismatch. */
        uint32_t k = atomic_load_explicit(&c->waiting_seq, memory_order_relaxed);
        uint32_t ps = atomic_load_explicit(&theirs->issued_send, memory_order_acquire);
        uint32_t pr = atomic_load_explicit(&theirs->issued_recv, memory_order_acquire);
        uint32_t ms = atomic_load_explicit(&mine->issued_send, memory_order_acquire);
        uint32_t mr = atomic_load_explicit(&mine->issued_recv, memory_order_acquire);
        if (k == 0 || !zh_after(k, p_coll) || (!zh_after(ps, mr) && !zh_after(pr, ms))) {
            return ZC_OK;
        }
        ZC_WARN(ZC_SUB_COLL,
                "rank %d: op %u (a collective) waits for rank %d, which issued a %s "
                "with this rank instead (ops must match in issue order); failing",
                c->rank, k, peer, zh_after(ps, mr) ? "Send" : "Recv");
    } else {
        /* My message p2p_seq with peer waits: the peer has not issued its
         * side, and it issued a collective that I have not. */
        uint32_t their = atomic_load_explicit(send ? &theirs->issued_recv : &theirs->issued_send,
                                              memory_order_acquire);
        if (!zh_after(p2p_seq, their) || !zh_after(p_coll, m_coll)) {
            return ZC_OK;
        }
        ZC_WARN(ZC_SUB_COLL,
                "rank %d: %s #%u with rank %d waits, but rank %d issued collective "
                "op %u instead (ops must match in issue order); failing",
                c->rank, send ? "Send" : "Recv", p2p_seq, peer, peer, p_coll);
    }
    zh_comm_fail(c, ZC_ERR_INVAL);
    return ZC_ERR_INVAL;
}

/* The latest op rank q posted (its post slots hold the last two). */
static uint32_t zh_diag_posted(zh_comm_t *c, int q, const zh_post_t **last)
{
    const zh_post_t *p = c->peers[q].ctrl->post;
    uint32_t a = atomic_load_explicit(&p[0].value, memory_order_acquire);
    uint32_t b = atomic_load_explicit(&p[1].value, memory_order_acquire);
    uint32_t v = (int32_t)(a - b) >= 0 ? a : b;
    *last = &p[v & 1u];
    return v;
}

/* Has rank q posted op seq? */
static int zh_diag_reached(zh_comm_t *c, int q, uint32_t seq)
{
    const zh_post_t *last = NULL;
    return (int32_t)(zh_diag_posted(c, q, &last) - seq) >= 0;
}

/* Append "lo" or "lo-hi" ranges of the ranks that posted op seq to buf. */
static void zh_diag_ranks(zh_comm_t *c, uint32_t seq, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int r = 0; r < c->nranks && o + 16 < cap; r++) {
        if (!zh_diag_reached(c, r, seq) || (r > 0 && zh_diag_reached(c, r - 1, seq))) {
            continue;
        }
        int hi = r;
        while (hi + 1 < c->nranks && zh_diag_reached(c, hi + 1, seq)) {
            hi++;
        }
        const char *sep = o > 0 ? "," : "";
        o += (size_t)(hi > r ? snprintf(buf + o, cap - o, "%s%d-%d", sep, r, hi)
                             : snprintf(buf + o, cap - o, "%s%d", sep, r));
    }
}

/* Everyone posted: the op is stuck after its entry (exit barrier). */
static void zh_diag_barrier(zh_comm_t *c, uint32_t seq, const char *why)
{
    uint32_t mine = atomic_load_explicit(&c->ctrl->bar.value, memory_order_relaxed);
    for (int q = 0; q < c->nranks; q++) {
        uint32_t b = atomic_load_explicit(&c->peers[q].ctrl->bar.value, memory_order_relaxed);
        if ((int32_t)(b - mine) < 0) {
            ZC_WARN(ZC_SUB_COMM,
                    "zccl diag: rank %d: op %u %s: rank %d posted op %u but "
                    "has not reached its barrier %u (it is at %u)",
                    c->rank, seq, why, q, seq, mine, b);
        }
    }
}

void zh_diag_report(zh_comm_t *c, uint32_t seq, const char *why)
{
    /* Read again where needed rather than kept in arrays: a diagnosis of
     * peers still moving, on a path that allocates nothing. */
    int late = 0;
    char who[256];
    zh_diag_ranks(c, seq, who, sizeof(who));
    for (int q = 0; q < c->nranks; q++) {
        const zh_post_t *last = NULL;
        uint32_t v = zh_diag_posted(c, q, &last);
        if ((int32_t)(v - seq) >= 0) {
            continue;
        }
        late++;
        if (v == 0) {
            ZC_WARN(ZC_SUB_COMM,
                    "zccl diag: rank %d: op %u %s: rank %d has not reached op %u "
                    "(it posted no op yet); reached by rank(s) %s",
                    c->rank, seq, why, q, seq, who);
            continue;
        }
        ZC_WARN(ZC_SUB_COMM,
                "zccl diag: rank %d: op %u %s: rank %d has not reached op %u (last "
                "posted op %u: %s count %llu dtype %d); reached by rank(s) %s",
                c->rank, seq, why, q, seq, v, zh_op_name(last->kind),
                (unsigned long long)last->count, (int)last->dtype, who);
    }
    if (late == 0) {
        zh_diag_barrier(c, seq, why);
    }
}

int zh_wait_peers(zh_comm_t *c, size_t flag_offset, uint32_t target)
{
    uint64_t start = 0;
    for (int r = 0; r < c->nranks; r++) {
        if (r == c->rank) {
            continue;
        }
        int st = zh_wait_one(c, r, flag_offset, target, &start);
        if (st != ZC_OK) {
            return st;
        }
    }
    return ZC_OK;
}

int zh_barrier(zh_comm_t *c)
{
    c->bar_count++;
    zh_bar_post(c);
    if (c->nranks == 1) {
        return ZC_OK;
    }
    return zh_wait_peers(c, offsetof(zh_ctrl_t, bar), c->bar_count);
}

int zh_ctrl_barrier(zh_comm_t *c)
{
    c->ctrl_count++;
    zh_flag_post(&c->ctrl->ctrl, c->ctrl_count);
    if (c->nranks == 1) {
        return ZC_OK;
    }
    int st = zh_wait_peers(c, offsetof(zh_ctrl_t, ctrl), c->ctrl_count);
    if (st == ZC_ERR_REMOTE || st == ZC_ERR_TIMEOUT) {
        zh_comm_fail(c, st); /* the comm is broken, as after a failed op */
    }
    return st;
}

/* Seqlock over my ranges/blocks: peers read them only inside ops, while I
 * change them only between ops, but the seqlock makes a torn read impossible
 * even for a misbehaving program. */
void zh_table_begin(zh_comm_t *c)
{
    unsigned v = atomic_load_explicit(&c->ctrl->table.value, memory_order_relaxed);
    atomic_store_explicit(&c->ctrl->table.value, v + 1, memory_order_seq_cst);
}

void zh_table_end(zh_comm_t *c)
{
    unsigned v = atomic_load_explicit(&c->ctrl->table.value, memory_order_relaxed);
    atomic_store_explicit(&c->ctrl->table.value, v + 1, memory_order_release);
}

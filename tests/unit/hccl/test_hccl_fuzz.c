/*
 * Fuzzing the two sockets a zccl process serves, with a bounded, seeded
 * random loop each, then checking that real clients are still served:
 *
 *  - the root listener (HcclGetRootInfo): its address is read from the root
 *    info as a client would (hccl_boot.h: IP string at offset 0, the record
 *    at 64). Every connection first gets the challenge; FZ_ROOT_ITERS
 *    connections then send random bytes, hellos with a wrong proof (another
 *    session's unique id), truncated hellos with the right proof, wrong
 *    magic or version, or nothing. None of these may join or fail the
 *    rendezvous; the only answer any may get is a refusal (ZC_ERR_INVAL).
 *    Then a silent client holds a connection open while two thread ranks
 *    run a real HcclCommInitRootInfo on the same root info and an
 *    AllReduce: it must work, without waiting for the silent client.
 *    Finally, a hello with the right proof but an impossible rank must fail
 *    the whole rendezvous at once (HCCL_E_PARA for the real ranks, no wait
 *    for the connect timeout).
 *  - the broker of this process ("\0zccl-broker-<pid>-<nonce>", SOCK_SEQPACKET):
 *    FZ_BROKER_ITERS connections send random bytes, random 16-byte requests,
 *    valid headers with random tokens, wrong versions or ops, truncated or
 *    oversized copies of a valid request for a real offer, valid requests
 *    with an fd attached, or nothing. Every answer must be well formed and
 *    carry an fd only for a valid request of a real offer (then with the
 *    offered content); the process must hold exactly the fds it held before
 *    (the broker runs in this process, so a leaked fd shows). Then a forked
 *    child fetches the offer and imports an exported physical allocation
 *    through the broker and checks their contents.
 * The wire layout comes from hccl_boot.h (a unit test may know it).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hccl/hccl.h"
#include "boot/hccl_boot.h"
#include "share/vmm_share.h"
#include "zc/status.h"
#include "zccl/vmm_ext.h"
#include "zt_phys.h"

#define FZ_ROOT_ITERS 400
#define FZ_BROKER_ITERS 600
#define FZ_SEED 0x5eedf00dULL
#define FZ_SEG 8192

static uint64_t fz_state = FZ_SEED;

static uint64_t fz_rand(void)
{
    uint64_t z = (fz_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void fz_fill(void *buf, size_t n)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < n; i++) {
        p[i] = (unsigned char)fz_rand();
    }
}

static uint64_t fz_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int fz_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) {
        return -1;
    }
    int n = 0;
    while (readdir(d) != NULL) {
        n++;
    }
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own fd */
}

/* ---- root listener ---------------------------------------------------------------- */

/* Connect and read the challenge; returns the socket or -1. */
static int fz_root_connect(const HcclRootInfo *ri, zh_chal_t *ch)
{
    zh_rootrec_t rec;
    memcpy(&rec, ri->internal + ZH_RI_OFFSET, sizeof(rec));
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(rec.port);
    if (inet_pton(AF_INET, ri->internal, &sa.sin_addr) != 1) {
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        recv(fd, ch, sizeof(*ch), MSG_WAITALL) != (ssize_t)sizeof(*ch) ||
        ch->magic != ZH_MSG_CHAL) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A hello for ri answering ch; right_proof = 0 gives it a wrong proof. */
static void fz_hello(const HcclRootInfo *ri, const zh_chal_t *ch, zh_hello_t *h, int right_proof)
{
    zh_rootrec_t rec;
    memcpy(&rec, ri->internal + ZH_RI_OFFSET, sizeof(rec));
    fz_fill(h, sizeof(*h));
    h->magic = ZH_MSG_HELLO;
    h->version = ZH_BOOT_VERSION;
    if (right_proof) {
        zh_hello_mac(rec.uuid, ch->nonce, h, h->mac);
    } else {
        uint8_t other[16];
        fz_fill(other, sizeof(other));
        zh_hello_mac(other, ch->nonce, h, h->mac);
    }
}

/* One garbage connection; returns 0 or -1 when the listener misbehaved. */
static int fz_root_garbage(const HcclRootInfo *ri, int kind)
{
    zh_chal_t ch;
    int fd = fz_root_connect(ri, &ch);
    if (fd < 0) {
        fprintf(stderr, "root fuzz: connect or challenge failed (%s)\n", strerror(errno));
        return -1;
    }
    unsigned char buf[512];
    size_t n = 0;
    zh_hello_t h;
    switch (kind) {
    case 0: /* random bytes, any length */
        n = fz_rand() % sizeof(buf);
        fz_fill(buf, n);
        break;
    case 1: /* a whole hello with the proof of another session */
        fz_hello(ri, &ch, &h, 0);
        memcpy(buf, &h, sizeof(h));
        n = sizeof(h);
        break;
    case 2: /* the right proof, cut short */
        fz_hello(ri, &ch, &h, 1);
        memcpy(buf, &h, sizeof(h));
        n = fz_rand() % sizeof(h);
        break;
    case 3: /* wrong magic (the proof was made before the change) */
        fz_hello(ri, &ch, &h, 1);
        h.magic ^= 1u + (uint32_t)(fz_rand() % 0xffff);
        memcpy(buf, &h, sizeof(h));
        n = sizeof(h);
        break;
    case 4: /* another version */
        fz_hello(ri, &ch, &h, 0);
        h.version = ZH_BOOT_VERSION + 1 + (uint32_t)(fz_rand() % 1000);
        memcpy(buf, &h, sizeof(h));
        n = sizeof(h);
        break;
    default: /* nothing at all */
        break;
    }
    if (n > 0) {
        (void)send(fd, buf, n, MSG_NOSIGNAL);
    }
    shutdown(fd, SHUT_WR);
    /* The listener answers garbage with nothing or a refusal, never a table. */
    ssize_t r = recv(fd, buf, sizeof(buf), MSG_WAITALL);
    close(fd);
    zh_reply_t rep;
    memcpy(&rep, buf, sizeof(rep));
    if (r == 0 || (r == (ssize_t)sizeof(rep) && n >= sizeof(zh_hello_t) &&
                   rep.magic == ZH_MSG_TABLE && rep.status == ZC_ERR_INVAL)) {
        return 0;
    }
    fprintf(stderr, "root fuzz: kind %d (%zu bytes) got a %zd-byte answer\n", kind, n, r);
    return -1;
}

typedef struct {
    const HcclRootInfo *ri;
    int rank;
    int nranks;
    HcclResult init;
    int op;
} fz_rank_t;

static void *fz_rank_main(void *p)
{
    fz_rank_t *a = p;
    HcclComm comm = NULL;
    aclrtStream s = NULL;
    a->op = -1;
    if (aclrtSetDevice(0) != ACL_SUCCESS || aclrtCreateStream(&s) != ACL_SUCCESS) {
        return NULL;
    }
    a->init = HcclCommInitRootInfo((uint32_t)a->nranks, a->ri, (uint32_t)a->rank, &comm);
    if (a->init == HCCL_SUCCESS) {
        int32_t in[64];
        int32_t out[64];
        for (int i = 0; i < 64; i++) {
            in[i] = a->rank + i;
        }
        a->op = (int)HcclAllReduce(in, out, 64, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, s);
        if (a->op == 0) {
            a->op = (int)aclrtSynchronizeStream(s);
        }
        for (int i = 0; i < 64 && a->op == 0; i++) {
            a->op = out[i] != 1 + 2 * i; /* ranks 0 and 1 */
        }
        (void)HcclCommDestroy(comm);
    }
    aclrtDestroyStream(s);
    return NULL;
}

/* Two thread ranks on ri; fills res[2]. */
static void fz_two_ranks(const HcclRootInfo *ri, fz_rank_t *res)
{
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        res[r] = (fz_rank_t){ri, r, 2, HCCL_E_INTERNAL, -1};
        assert_int_equal(pthread_create(&th[r], NULL, fz_rank_main, &res[r]), 0);
    }
    for (int r = 0; r < 2; r++) {
        pthread_join(th[r], NULL);
    }
}

static void test_root_fuzz(void **state)
{
    (void)state;
    HcclRootInfo ri;
    assert_int_equal(HcclGetRootInfo(&ri), HCCL_SUCCESS);
    int bad = 0;
    int kinds[6] = {0};
    for (int i = 0; i < FZ_ROOT_ITERS; i++) {
        int kind = (int)(fz_rand() % 6);
        kinds[kind]++;
        bad += fz_root_garbage(&ri, kind) != 0;
    }
    /* A silent client holds a connection while the real ranks join. */
    zh_chal_t ch;
    int silent = fz_root_connect(&ri, &ch);
    assert_true(silent >= 0);
    uint64_t t0 = fz_now_ms();
    fz_rank_t res[2];
    fz_two_ranks(&ri, res);
    uint64_t took = fz_now_ms() - t0;
    close(silent);
    printf("root fuzz: %d connections (random %d, foreign id %d, truncated %d, bad magic %d, "
           "bad version %d, empty %d), %d not handled; real init after it: %d/%d, op %d/%d, "
           "%llu ms with a silent client\n",
           FZ_ROOT_ITERS, kinds[0], kinds[1], kinds[2], kinds[3], kinds[4], kinds[5], bad,
           (int)res[0].init, (int)res[1].init, res[0].op, res[1].op, (unsigned long long)took);
    fflush(stdout);
    assert_int_equal(bad, 0);
    assert_int_equal(res[0].init, HCCL_SUCCESS);
    assert_int_equal(res[1].init, HCCL_SUCCESS);
    assert_int_equal(res[0].op, 0);
    assert_int_equal(res[1].op, 0);
    assert_true(took < 5000); /* never the silent client's hello timeout per rank */
}

/* A hello that knows the unique id but names an impossible rank fails the
 * rendezvous for everyone at once. */
static void test_root_poisoned_hello(void **state)
{
    (void)state;
    HcclRootInfo ri;
    assert_int_equal(HcclGetRootInfo(&ri), HCCL_SUCCESS);
    zh_chal_t ch;
    int fd = fz_root_connect(&ri, &ch);
    assert_true(fd >= 0);
    zh_hello_t h;
    fz_hello(&ri, &ch, &h, 1);
    h.nranks = 2;
    h.rank = 7;
    zh_rootrec_t rec;
    memcpy(&rec, ri.internal + ZH_RI_OFFSET, sizeof(rec));
    zh_hello_mac(rec.uuid, ch.nonce, &h, h.mac);
    assert_int_equal(send(fd, &h, sizeof(h), MSG_NOSIGNAL), (ssize_t)sizeof(h));
    unsigned char ans[16];
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ssize_t n = recv(fd, ans, sizeof(ans), MSG_WAITALL);
    close(fd);
    int32_t status = 0;
    if (n >= 8) {
        memcpy(&status, ans + 4, sizeof(status));
    }
    uint64_t t0 = fz_now_ms();
    fz_rank_t res[2];
    fz_two_ranks(&ri, res);
    uint64_t took = fz_now_ms() - t0;
    printf("poisoned hello: answer %zd bytes, status %d; real ranks then got %d/%d in %llu ms\n", n,
           (int)status, (int)res[0].init, (int)res[1].init, (unsigned long long)took);
    assert_int_equal(n, 16);
    assert_int_equal(status, ZC_ERR_INVAL);
    assert_int_equal(res[0].init, HCCL_E_PARA);
    assert_int_equal(res[1].init, HCCL_E_PARA);
    assert_true(took < 1000);
}

/* ---- broker ------------------------------------------------------------------------ */

typedef struct {
    uint64_t token; /* offer of fz_seg */
    int expect_fd;  /* a valid request for it was sent */
} fz_req_t;

/* A token of this process's broker: it names the broker's socket. */
static uint64_t fz_broker_token;

static int fz_broker_connect(void)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) {
        return -1;
    }
    struct timeval tv = {5, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    /* The broker's abstract name: "\0zccl-broker-<pid>-<nonce>", no trailing NUL. */
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    int k = snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "zccl-broker-%d-%05x",
                     (int)getpid(), (unsigned)zccl_broker_token_nonce(fz_broker_token));
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
    if (connect(s, (struct sockaddr *)&addr, len) != 0) {
        close(s);
        return -1;
    }
    return s;
}

/* Send buf (n bytes, with fd attached when pass_fd >= 0); read the answer.
 * Returns 0 when the answer is acceptable for what was sent. */
static int fz_broker_exchange(const void *buf, size_t n, int pass_fd, int valid,
                              const unsigned char *want, int *answered)
{
    int s = fz_broker_connect();
    if (s < 0) {
        fprintf(stderr, "broker fuzz: connect failed (%s)\n", strerror(errno));
        return -1;
    }
    struct iovec iov = {.iov_base = (void *)(uintptr_t)buf, .iov_len = n};
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(4 * sizeof(int))];
    } ctl;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (pass_fd >= 0) {
        memset(&ctl, 0, sizeof(ctl));
        msg.msg_control = ctl.b;
        msg.msg_controllen = CMSG_SPACE(sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    if (n != (size_t)-1) {
        (void)sendmsg(s, &msg, MSG_NOSIGNAL);
    } else {
        shutdown(s, SHUT_WR); /* hang up at once (a silent client costs the broker 2 s) */
    }
    char rb[64];
    struct iovec riov = {.iov_base = rb, .iov_len = sizeof(rb)};
    struct msghdr rm = {
        .msg_iov = &riov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b)};
    memset(&ctl, 0, sizeof(ctl));
    ssize_t r = recvmsg(s, &rm, MSG_CMSG_CLOEXEC);
    close(s);
    int got = -1;
    int nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&rm); c != NULL; c = CMSG_NXTHDR(&rm, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < k; i++) {
                int f;
                memcpy(&f, CMSG_DATA(c) + (size_t)i * sizeof(int), sizeof(int));
                if (got < 0) {
                    got = f;
                } else {
                    close(f);
                }
                nfds++;
            }
        }
    }
    int ok = 1;
    vmm_broker_resp_t resp;
    memset(&resp, 0, sizeof(resp));
    if (r > 0) {
        memcpy(&resp, rb, (size_t)r < sizeof(resp) ? (size_t)r : sizeof(resp));
    }
    *answered = r > 0;
    if (r <= 0) {
        /* No answer: only for a connection that sent nothing (or an empty record). */
        ok = n == 0 || n == (size_t)-1;
    } else if (r != (ssize_t)sizeof(resp) || resp.magic != VMM_BROKER_MAGIC ||
               resp.version != VMM_BROKER_VERSION) {
        ok = 0;
    } else if (valid) {
        ok = resp.status == ZC_OK && nfds == 1 && resp.size == FZ_SEG;
        unsigned char head[16];
        ok = ok && pread(got, head, sizeof(head), 0) == (ssize_t)sizeof(head) &&
             memcmp(head, want, sizeof(head)) == 0;
    } else {
        ok = resp.status != ZC_OK && nfds == 0;
    }
    if (!ok) {
        fprintf(stderr,
                "broker fuzz: %zu-byte request (valid %d) got %zd bytes, status %d, "
                "%d fds\n",
                n, valid, r, (int)resp.status, nfds);
    }
    if (got >= 0) {
        close(got);
    }
    return ok ? 0 : -1;
}

static int fz_broker_case(int kind, uint64_t token, const unsigned char *want, int spare_fd,
                          int *answered)
{
    unsigned char buf[128];
    vmm_broker_req_t req = {VMM_BROKER_MAGIC, VMM_BROKER_VERSION, VMM_BROKER_OP_FETCH, token};
    size_t n = 0;
    int valid = 0;
    int pass = -1;
    switch (kind) {
    case 0: /* random bytes of any length (0 is an empty record) */
        n = fz_rand() % 100;
        fz_fill(buf, n);
        break;
    case 1: /* a request-sized random record */
        n = sizeof(req);
        fz_fill(buf, n);
        break;
    case 2: /* well formed, random token */
        req.token = fz_rand();
        memcpy(buf, &req, sizeof(req));
        n = sizeof(req);
        break;
    case 3: /* another version or op */
        if (fz_rand() & 1) {
            req.version = (uint16_t)(VMM_BROKER_VERSION + 1 + fz_rand() % 100);
        } else {
            req.op = (uint16_t)(VMM_BROKER_OP_FETCH + 1 + fz_rand() % 100);
        }
        memcpy(buf, &req, sizeof(req));
        n = sizeof(req);
        break;
    case 4: /* a valid request with trailing junk */
        n = sizeof(req) + 1 + fz_rand() % 64;
        fz_fill(buf, n);
        memcpy(buf, &req, sizeof(req));
        break;
    case 5: /* a valid request, cut short */
        memcpy(buf, &req, sizeof(req));
        n = 1 + fz_rand() % (sizeof(req) - 1);
        break;
    case 6: /* a valid request with an fd attached (the broker must drop it) */
        memcpy(buf, &req, sizeof(req));
        n = sizeof(req);
        valid = 1;
        pass = spare_fd;
        break;
    case 7: /* a valid request */
        memcpy(buf, &req, sizeof(req));
        n = sizeof(req);
        valid = 1;
        break;
    default: /* connect, send nothing, hang up */
        n = (size_t)-1;
        break;
    }
    return fz_broker_exchange(buf, n, pass, valid, want, answered);
}

/* The child: fetch the raw offer and import the exported allocation. */
static int fz_child_imports(uint64_t seg_token, uint64_t phys_token, size_t gran)
{
    int fd = -1;
    size_t size = 0;
    if (zccl_broker_fetch(seg_token, &fd, &size) != ZC_OK || size != FZ_SEG) {
        return 1;
    }
    unsigned char head[16];
    int bad = pread(fd, head, sizeof(head), 0) != (ssize_t)sizeof(head) || head[0] != 0xa5 ||
              head[15] != 0xa5 + 15;
    close(fd);
    aclrtDrvMemHandle h = NULL;
    void *va = NULL;
    if (aclInit(NULL) != ACL_SUCCESS ||
        aclrtMemImportFromShareableHandle(phys_token, 0, &h) != ACL_SUCCESS ||
        aclrtReserveMemAddress(&va, gran, 0, NULL, 0) != ACL_SUCCESS ||
        aclrtMapMem(va, gran, 0, h, 0) != ACL_SUCCESS) {
        return 1;
    }
    bad |= ((unsigned char *)va)[0] != 0x3c || ((unsigned char *)va)[gran - 1] != 0xc3;
    bad |= aclrtUnmapMem(va) != ACL_SUCCESS || aclrtFreePhysical(h) != ACL_SUCCESS ||
           aclrtReleaseMemAddress(va) != ACL_SUCCESS;
    return bad;
}

static void test_broker_fuzz(void **state)
{
    (void)state;
    aclError ie = aclInit(NULL);
    assert_true(ie == ACL_SUCCESS || ie == ACL_ERROR_REPEAT_INITIALIZE);
    /* A raw offer with known content starts this process's broker. */
    int seg = memfd_create("fz-seg", MFD_CLOEXEC);
    assert_true(seg >= 0);
    assert_int_equal(ftruncate(seg, FZ_SEG), 0);
    unsigned char want[16];
    for (int i = 0; i < 16; i++) {
        want[i] = (unsigned char)(0xa5 + i);
    }
    assert_int_equal(pwrite(seg, want, sizeof(want), 0), (ssize_t)sizeof(want));
    uint64_t token = 0;
    assert_int_equal(zccl_broker_offer(seg, FZ_SEG, 0, &token), ZC_OK);
    fz_broker_token = token;
    /* A physical allocation exported to anyone of this uid. */
    aclrtPhysicalMemProp prop = zt_phys_prop(0, ACL_HBM_MEM_HUGE);
    size_t gran = 0;
    assert_int_equal(
        aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &gran),
        ACL_SUCCESS);
    aclrtDrvMemHandle h = NULL;
    void *va = NULL;
    uint64_t ptoken = 0;
    assert_int_equal(aclrtMallocPhysical(&h, gran, &prop, 0), ACL_SUCCESS);
    assert_int_equal(aclrtReserveMemAddress(&va, gran, 0, NULL, 0), ACL_SUCCESS);
    assert_int_equal(aclrtMapMem(va, gran, 0, h, 0), ACL_SUCCESS);
    ((unsigned char *)va)[0] = 0x3c;
    ((unsigned char *)va)[gran - 1] = 0xc3;
    assert_int_equal(aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE,
                                                     ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
                                                     &ptoken),
                     ACL_SUCCESS);
    int spare = memfd_create("fz-spare", MFD_CLOEXEC);
    assert_true(spare >= 0);

    int fds0 = fz_count_fds();
    int bad = 0;
    int answered = 0;
    int kinds[9] = {0};
    for (int i = 0; i < FZ_BROKER_ITERS; i++) {
        int kind = (int)(fz_rand() % 9);
        int a = 0;
        kinds[kind]++;
        bad += fz_broker_case(kind, token, want, spare, &a) != 0;
        answered += a;
    }
    /* The broker may still be closing the last connection. */
    int fds1 = fz_count_fds();
    for (int i = 0; i < 100 && fds1 != fds0; i++) {
        usleep(10000);
        fds1 = fz_count_fds();
    }
    fflush(stdout);
    fflush(stderr);
    pid_t kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        _exit(fz_child_imports(token, ptoken, gran));
    }
    int st = 0;
    assert_int_equal(waitpid(kid, &st, 0), kid);
    printf("broker fuzz: %d requests (random %d, random-16 %d, unknown token %d, version/op %d, "
           "oversized %d, truncated %d, with fd %d, valid %d, empty %d), %d answered, %d wrong; "
           "fds %d -> %d; child import after it: %s\n",
           FZ_BROKER_ITERS, kinds[0], kinds[1], kinds[2], kinds[3], kinds[4], kinds[5], kinds[6],
           kinds[7], kinds[8], answered, bad, fds0, fds1,
           WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "FAILED");
    fflush(stdout);
    assert_int_equal(bad, 0);
    assert_int_equal(fds1, fds0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(zccl_broker_withdraw(token), ZC_OK);
    close(seg);
    close(spare);
    assert_int_equal(aclrtUnmapMem(va), ACL_SUCCESS);
    assert_int_equal(aclrtFreePhysical(h), ACL_SUCCESS);
    assert_int_equal(aclrtReleaseMemAddress(va), ACL_SUCCESS);
}

int main(void)
{
    /* Fuzzed root infos keep listening this long at most. */
    setenv("HCCL_CONNECT_TIMEOUT", "20", 1);
    const struct CMUnitTest tests[] = {
        /* Broker first: root listeners are threads with sockets of their own
         * that close on their own schedule, which would blur its fd count. */
        cmocka_unit_test(test_broker_fuzz),
        cmocka_unit_test(test_root_fuzz),
        cmocka_unit_test(test_root_poisoned_hello),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

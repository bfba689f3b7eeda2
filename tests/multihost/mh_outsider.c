/*
 * The outsider of the security tests across hosts: a program on a host of
 * its own (a third namespace) that holds nothing of the communicator but
 * the ranks' UCX worker addresses (interface, IP and port: what anyone who
 * scans the ranks' hosts learns) and sends them what an attacker would.
 *
 *   mh_outsider tags NSEQ LEN STEP   for seq 1..NSEQ, one message of LEN
 *                                    bytes (0x7f) with tag
 *                                    ZH_TAG_COLL(seq, src, STEP) to each victim
 *   mh_outsider flood COUNT LEN      COUNT messages of LEN bytes with random
 *                                    tags to each victim
 *   mh_outsider conns COUNT IP PORT  COUNT TCP connections to IP:PORT that
 *                                    never send a byte (no victim lines; IP
 *                                    and PORT "-": a line "IP PORT" on stdin)
 *
 * stdin: one line per victim, "SRC HEXADDR" (SRC: the rank the tags name as
 * the sender, the victim's counterpart), then an empty line. When every
 * message was sent (or posted, for those UCX sends by rendezvous) it prints
 * "injected" and keeps driving its worker (a rendezvous send is read when
 * the victim matches it) until stdin closes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include "hier/hccl_net.h"

#define MO_VICTIMS 16
#define MO_INFLIGHT 64

static ucp_worker_h mo_worker;

static double mo_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void mo_ep_error(void *arg, ucp_ep_h ep, ucs_status_t s)
{
    (void)arg;
    (void)ep;
    fprintf(stderr, "mh_outsider: endpoint failed: %s\n", ucs_status_string(s));
}

static int mo_hex(const char *h, uint8_t *out, size_t cap, size_t *len)
{
    size_t n = strlen(h);
    if (n % 2 != 0 || n / 2 > cap) {
        return -1;
    }
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1) {
            return -1;
        }
        out[i] = (uint8_t)v;
    }
    *len = n / 2;
    return 0;
}

/* Drive the worker until at most keep of q[0..n) are pending; returns them. */
static int mo_settle(void **q, int n, int keep, double limit_s)
{
    double end = mo_now() + limit_s;
    for (;;) {
        ucp_worker_progress(mo_worker);
        int pending = 0;
        for (int i = 0; i < n; i++) {
            if (q[i] != NULL && ucp_request_check_status(q[i]) != UCS_INPROGRESS) {
                ucp_request_free(q[i]);
                q[i] = NULL;
            }
            pending += q[i] != NULL;
        }
        if (pending <= keep || mo_now() > end) {
            return pending;
        }
    }
}

/* A free slot of q, or -1. */
static int mo_slot(void **q)
{
    for (int i = 0; i < MO_INFLIGHT; i++) {
        if (q[i] == NULL) {
            return i;
        }
    }
    return -1;
}

/* Hold until stdin closes (the test is over). */
static void mo_hold(void)
{
    for (;;) {
        if (mo_worker != NULL) {
            ucp_worker_progress(mo_worker);
        }
        struct pollfd pf = {.fd = 0, .events = POLLIN};
        if (poll(&pf, 1, mo_worker != NULL ? 0 : 100) > 0) {
            return;
        }
        usleep(100);
    }
}

/* count silent connections to ip:port (non-blocking; given a second to
 * complete their handshakes), held until stdin closes. */
static int mo_conns(long count, const char *ip, int port)
{
    struct rlimit rl = {(rlim_t)count + 64, (rlim_t)count + 64};
    (void)setrlimit(RLIMIT_NOFILE, &rl);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
        return 2;
    }
    double t0 = mo_now();
    long made = 0;
    for (long k = 0; k < count; k++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            fprintf(stderr, "mh_outsider: socket %ld: %s\n", k, strerror(errno));
            break;
        }
        made += connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS;
    }
    usleep(1000000);
    fprintf(stderr, "mh_outsider: %ld silent connections to %s:%d started in %.2f s\n", made, ip,
            port, mo_now() - t0);
    printf("injected\n");
    fflush(stdout);
    mo_hold();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "conns") == 0) {
        char ip[64];
        int port = 0;
        if (strcmp(argv[3], "-") == 0) { /* "IP PORT" on stdin */
            if (scanf("%63s %d", ip, &port) != 2) {
                return 2;
            }
        } else {
            snprintf(ip, sizeof(ip), "%s", argv[3]);
            port = atoi(argv[4]);
        }
        return mo_conns(atol(argv[2]), ip, port);
    }
    int tags = argc == 5 && strcmp(argv[1], "tags") == 0;
    int flood = argc == 4 && strcmp(argv[1], "flood") == 0;
    if (!tags && !flood) {
        fprintf(stderr, "usage: %s tags NSEQ LEN STEP | flood COUNT LEN | conns COUNT IP PORT\n",
                argv[0]);
        return 2;
    }
    long count = atol(argv[2]);
    size_t len = (size_t)atol(argv[3]);
    uint32_t step = tags ? (uint32_t)strtoul(argv[4], NULL, 0) : 0;
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG};
    ucp_context_h ctx;
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    if (ucp_init(&p, NULL, &ctx) != UCS_OK || ucp_worker_create(ctx, &wp, &mo_worker) != UCS_OK) {
        fprintf(stderr, "mh_outsider: UCX init failed\n");
        return 1;
    }
    ucp_ep_h ep[MO_VICTIMS];
    int src[MO_VICTIMS];
    int nv = 0;
    char line[16384];
    static uint8_t addr[8192];
    while (nv < MO_VICTIMS && fgets(line, sizeof(line), stdin) != NULL && line[0] != '\n') {
        char hex[16384];
        size_t alen = 0;
        if (sscanf(line, "%d %16383s", &src[nv], hex) != 2 ||
            mo_hex(hex, addr, sizeof(addr), &alen) != 0) {
            fprintf(stderr, "mh_outsider: bad victim line\n");
            return 1;
        }
        ucp_ep_params_t ep_p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                              UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                              UCP_EP_PARAM_FIELD_ERR_HANDLER,
                                .address = (const ucp_address_t *)addr,
                                .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                                .err_handler = {.cb = mo_ep_error, .arg = NULL}};
        if (ucp_ep_create(mo_worker, &ep_p, &ep[nv]) != UCS_OK) {
            fprintf(stderr, "mh_outsider: endpoint to victim %d failed\n", nv);
            return 1;
        }
        nv++;
    }
    char *buf = malloc(len > 0 ? len : 1);
    void **q = calloc(MO_INFLIGHT, sizeof(void *));
    if (buf == NULL || q == NULL) {
        return 1;
    }
    memset(buf, 0x7f, len);
    double t0 = mo_now();
    long sent = 0;
    srand((unsigned)getpid());
    for (int v = 0; v < nv; v++) {
        for (long k = 0; k < count; k++) {
            uint64_t tag = tags ? ZH_TAG_COLL(k + 1, src[v], step)
                                : ((uint64_t)rand() << 33) ^ ((uint64_t)rand() << 11) ^ (uint64_t)k;
            ucp_request_param_t rp = {.op_attr_mask = 0};
            ucs_status_ptr_t s = ucp_tag_send_nbx(ep[v], buf, len, tag, &rp);
            if (UCS_PTR_IS_ERR(s)) {
                fprintf(stderr, "mh_outsider: send failed: %s\n",
                        ucs_status_string(UCS_PTR_STATUS(s)));
                break;
            }
            sent++;
            if (UCS_PTR_IS_PTR(s)) {
                int slot = mo_slot(q);
                if (slot < 0) {
                    mo_settle(q, MO_INFLIGHT, MO_INFLIGHT - 1, 5.0);
                    slot = mo_slot(q);
                }
                if (slot < 0) {
                    ucp_request_free(q[0]); /* stuck: left to UCX */
                    slot = 0;
                }
                q[slot] = s;
            }
        }
    }
    int left = mo_settle(q, MO_INFLIGHT, 0, tags ? 0.5 : 20.0);
    fprintf(stderr, "mh_outsider: %ld messages of %zu bytes to %d victims in %.2f s (%d pending)\n",
            sent, len, nv, mo_now() - t0, left);
    printf("injected\n");
    fflush(stdout);
    mo_hold();
    _exit(0); /* no clean-up: an outsider's endpoints just vanish */
}

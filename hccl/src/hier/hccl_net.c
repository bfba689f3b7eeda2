/*
 * The inter-host transport on UCX (protocol in hccl_net.h).
 *
 * libucp is opened with dlopen the first time a communicator spans hosts,
 * never before: loading UCX's libraries runs their constructors (signal
 * handlers for error reports, memory hooks), which a program whose
 * communicators all lie on one host must not get. The handful of UCP calls
 * used are resolved once into a table.
 *
 * Endpoints: with up to ZH_NET_EAGER_MAX ranks on other hosts every
 * endpoint is created at init; beyond that each is created on the first
 * transfer with its peer (either way), from the address list kept since
 * init. 1,024 ranks on 16 hosts would otherwise open 960 endpoints per rank
 * (with tcp a connection each, ~10^6 in all) where the hierarchical
 * collectives talk to a few peers per host.
 */
#include "hier/hccl_net.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include "zc/export.h"
#include "zc/log.h"
#include "zc/status.h"
#include "zc/sync.h"

#define ZH_NET_SPIN 256u
#define ZH_NET_REAP_NS 1000000000ull
#define ZH_NET_EAGER_MAX 64
/* Unexpected messages looked at per progress round. */
#define ZH_NET_DRAIN_MAX 256

/* ---- libucp, opened on first use ------------------------------------------------------ */

#define ZH_UCP_FUNCS(X)                                                                            \
    X(ucp_config_read)                                                                             \
    X(ucp_config_release)                                                                          \
    X(ucp_init_version)                                                                            \
    X(ucp_cleanup)                                                                                 \
    X(ucp_worker_create)                                                                           \
    X(ucp_worker_destroy)                                                                          \
    X(ucp_worker_get_address)                                                                      \
    X(ucp_worker_release_address)                                                                  \
    X(ucp_worker_progress)                                                                         \
    X(ucp_ep_create)                                                                               \
    X(ucp_ep_close_nbx)                                                                            \
    X(ucp_ep_print_info)                                                                           \
    X(ucp_tag_send_nbx)                                                                            \
    X(ucp_tag_recv_nbx)                                                                            \
    X(ucp_tag_recv_request_test)                                                                   \
    X(ucp_tag_probe_nb)                                                                            \
    X(ucp_tag_msg_recv_nbx)                                                                        \
    X(ucp_request_check_status)                                                                    \
    X(ucp_request_cancel)                                                                          \
    X(ucp_request_free)                                                                            \
    X(ucs_status_string)

static struct {
#define ZH_UCP_FIELD(f) __typeof__(f) *f;
    ZH_UCP_FUNCS(ZH_UCP_FIELD)
#undef ZH_UCP_FIELD
} zh_ucp;
static pthread_once_t zh_ucp_once = PTHREAD_ONCE_INIT;
static int zh_ucp_status = ZC_ERR_NOT_SUPPORT;

static void zh_ucp_load(void)
{
    void *h = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        ZC_WARN(ZC_SUB_COMM, "cannot load UCX (libucp.so.0) for the inter-host tier: %s",
                dlerror());
        return;
    }
#define ZH_UCP_SYM(f)                                                                              \
    *(void **)&zh_ucp.f = dlsym(h, #f);                                                            \
    if (zh_ucp.f == NULL) {                                                                        \
        ZC_WARN(ZC_SUB_COMM, "UCX lacks %s: too old for zccl's inter-host tier", #f);              \
        return;                                                                                    \
    }
    ZH_UCP_FUNCS(ZH_UCP_SYM)
#undef ZH_UCP_SYM
    zh_ucp_status = ZC_OK;
}

/* ---- context, worker, endpoints ------------------------------------------------------- */

typedef struct {
    ucp_ep_h ep;
    uint32_t addr_off; /* its worker address in the kept list; addr_len 0: on this host */
    uint32_t addr_len;
    int failed;         /* set by the error handler: every request on it failed */
    const int *closing; /* the net is being destroyed: peers closing is expected */
    char tl[32];
} zh_net_peer_t;

struct zh_net {
    int rank;
    int nranks;
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_address_t *addr;
    size_t addr_len;
    zh_net_peer_t *peer; /* by rank; ep NULL for ranks on this host */
    uint8_t *addrs;      /* the address list from init, while endpoints are lazy */
    int closing;
    uint8_t key[16];        /* the communicator's secret (zh_net_connect) */
    uint16_t mark;          /* bits 63..48 of every member's tag */
    uint64_t dropped;       /* messages dropped as not from a member */
    unsigned char sink[64]; /* where a dropped message's first bytes go */
};

static int zh_net_fail(const zh_net_t *n, const char *what, ucs_status_t s)
{
    ZC_WARN(ZC_SUB_COMM, "rank %d: UCX %s failed: %s", n->rank, what, zh_ucp.ucs_status_string(s));
    return s == UCS_ERR_NO_MEMORY ? ZC_ERR_NOMEM : ZC_ERR_SYS;
}

int zh_net_create(int rank, int nranks, zh_net_t **out, const void **addr, size_t *len)
{
    pthread_once(&zh_ucp_once, zh_ucp_load);
    if (zh_ucp_status != ZC_OK) {
        return zh_ucp_status;
    }
    zh_net_t *n = calloc(1, sizeof(*n));
    zh_net_peer_t *peers = calloc((size_t)nranks, sizeof(*peers));
    if (n == NULL || peers == NULL) {
        free(n);
        free(peers);
        return ZC_ERR_NOMEM;
    }
    n->rank = rank;
    n->nranks = nranks;
    n->peer = peers;
    ucp_config_t *cfg = NULL;
    ucs_status_t s = zh_ucp.ucp_config_read(NULL, NULL, &cfg); /* UCX_* as the user set them */
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG};
    if (s == UCS_OK) {
        s = zh_ucp.ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, &p, cfg, &n->ctx);
        zh_ucp.ucp_config_release(cfg);
    }
    if (s != UCS_OK) {
        int st = zh_net_fail(n, "context init", s);
        zh_net_destroy(n, 1);
        return st;
    }
    /* Ops of a comm run one at a time, on whichever stream worker: serialized. */
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    s = zh_ucp.ucp_worker_create(n->ctx, &wp, &n->worker);
    if (s == UCS_OK) {
        s = zh_ucp.ucp_worker_get_address(n->worker, &n->addr, &n->addr_len);
    }
    if (s != UCS_OK) {
        int st = zh_net_fail(n, "worker create", s);
        zh_net_destroy(n, 1);
        return st;
    }
    *out = n;
    *addr = n->addr;
    *len = n->addr_len;
    return ZC_OK;
}

static void zh_net_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    zh_net_peer_t *p = arg;
    (void)ep;
    if (!p->failed && *p->closing) {
        ZC_INFO(ZC_SUB_COMM, "UCX endpoint (%s) closed by its peer: %s", p->tl,
                zh_ucp.ucs_status_string(status));
    } else if (!p->failed) {
        ZC_WARN(ZC_SUB_COMM, "UCX endpoint (%s) failed: %s", p->tl,
                zh_ucp.ucs_status_string(status));
    }
    p->failed = 1;
}

/* The transports of the endpoint's lanes, from UCX's own description. */
static void zh_net_describe(zh_net_t *n, zh_net_peer_t *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    snprintf(p->tl, sizeof(p->tl), "?");
    if (f == NULL) {
        return;
    }
    zh_ucp.ucp_ep_print_info(p->ep, f);
    fclose(f);
    /* Lines read "#   lane[0]:  1:tcp/veth1.0 md[0] ... tag" */
    const char *l = text != NULL ? strstr(text, "lane[0]:") : NULL;
    const char *c = l != NULL ? strchr(l, ':') : NULL;
    c = c != NULL ? strchr(c + 1, ':') : NULL;
    if (c != NULL) {
        size_t k = strcspn(c + 1, " \n");
        snprintf(p->tl, sizeof(p->tl), "%.*s", (int)ZC_MIN(k, sizeof(p->tl) - 1), c + 1);
    }
    free(text);
    (void)n;
}

/* The endpoint to remote rank r from its worker address at a. */
static int zh_net_ep_open(zh_net_t *n, int r, const uint8_t *a)
{
    zh_net_peer_t *p = &n->peer[r];
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLER,
                          .address = (const ucp_address_t *)a,
                          .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                          .err_handler = {.cb = zh_net_ep_error, .arg = p}};
    ucs_status_t s = zh_ucp.ucp_ep_create(n->worker, &ep, &p->ep);
    if (s != UCS_OK) {
        p->ep = NULL;
        p->failed = 1; /* once: later transfers with r fail at once */
        return zh_net_fail(n, "endpoint create", s);
    }
    zh_net_describe(n, p);
    ZC_INFO(ZC_SUB_COMM, "rank %d: UCX endpoint to rank %d over %s", n->rank, r, p->tl);
    return ZC_OK;
}

int zh_net_connect(zh_net_t *n, const uint8_t key[16], const uint8_t *remote, const uint8_t *all,
                   size_t all_len)
{
    memcpy(n->key, key, sizeof(n->key));
    n->mark = zh_net_tag_mark(key);
    size_t off = 4u * (size_t)n->nranks;
    int nremote = 0;
    for (int r = 0; r < n->nranks; r++) {
        uint32_t len;
        memcpy(&len, all + 4u * (size_t)r, 4);
        if (off + len > all_len) {
            ZC_WARN(ZC_SUB_COMM, "rank %d: address list cut short at rank %d", n->rank, r);
            return ZC_ERR_IO;
        }
        if (remote[r] && len == 0) {
            ZC_WARN(ZC_SUB_COMM, "rank %d: rank %d (another host) sent no UCX address", n->rank, r);
            return ZC_ERR_INTERNAL;
        }
        n->peer[r].closing = &n->closing;
        n->peer[r].addr_off = (uint32_t)off;
        n->peer[r].addr_len = remote[r] ? len : 0;
        nremote += remote[r] != 0;
        off += len;
    }
    if (nremote > ZH_NET_EAGER_MAX) {
        n->addrs = malloc(all_len);
        if (n->addrs == NULL) {
            return ZC_ERR_NOMEM;
        }
        memcpy(n->addrs, all, all_len);
        return ZC_OK;
    }
    for (int r = 0; r < n->nranks; r++) {
        if (n->peer[r].addr_len > 0) {
            ZC_CHECK(zh_net_ep_open(n, r, all + n->peer[r].addr_off));
        }
    }
    return ZC_OK;
}

/* Peer's endpoint, opened now when lazy; NULL when there is none. */
static ucp_ep_h zh_net_ep(zh_net_t *n, int peer)
{
    zh_net_peer_t *p = &n->peer[peer];
    if (p->ep == NULL && !p->failed && p->addr_len > 0 && n->addrs != NULL) {
        (void)zh_net_ep_open(n, peer, n->addrs + p->addr_off);
    }
    return p->ep;
}

/* Close every endpoint at once and progress them together for at most
 * ZH_NET_REAP_NS (one after the other, a peer that never answers cost that
 * much per endpoint: 21 s of HcclCommDestroy at 2 x 36 ranks). */
static void zh_net_close_all(zh_net_t *n, int broken)
{
    ucs_status_ptr_t *req = calloc((size_t)n->nranks, sizeof(*req));
    for (int r = 0; r < n->nranks; r++) {
        zh_net_peer_t *p = &n->peer[r];
        if (p->ep == NULL) {
            continue;
        }
        ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                  .flags = broken || p->failed ? UCP_EP_CLOSE_FLAG_FORCE : 0};
        ucs_status_ptr_t q = zh_ucp.ucp_ep_close_nbx(p->ep, &cp);
        if (req != NULL && UCS_PTR_IS_PTR(q)) {
            req[r] = q;
        } else if (UCS_PTR_IS_PTR(q)) {
            zh_ucp.ucp_request_free(q); /* no memory to wait on it: released, left to UCX */
        }
    }
    uint64_t start = zc_time_ns();
    for (int busy = req != NULL; busy && zc_time_ns() - start <= ZH_NET_REAP_NS;) {
        zh_ucp.ucp_worker_progress(n->worker);
        busy = 0;
        for (int r = 0; r < n->nranks && !busy; r++) {
            busy = req[r] != NULL && zh_ucp.ucp_request_check_status(req[r]) == UCS_INPROGRESS;
        }
    }
    for (int r = 0; req != NULL && r < n->nranks; r++) {
        if (req[r] != NULL) {
            /* Released even when still in progress (UCX frees it when it
             * completes): ucp_worker_destroy asserts that every request of
             * its endpoints was released (72 ranks on 2 hosts hit it). */
            zh_ucp.ucp_request_free(req[r]);
        }
    }
    free(req);
}

void zh_net_destroy(zh_net_t *n, int broken)
{
    if (n == NULL) {
        return;
    }
    if (n->dropped > 0) {
        ZC_INFO(ZC_SUB_COMM, "rank %d: %llu messages from outside the communicator dropped",
                n->rank, (unsigned long long)n->dropped);
    }
    n->closing = 1;
    if (n->worker != NULL) {
        zh_net_close_all(n, broken);
    }
    if (n->addr != NULL) {
        zh_ucp.ucp_worker_release_address(n->worker, n->addr);
    }
    if (n->worker != NULL) {
        zh_ucp.ucp_worker_destroy(n->worker);
    }
    if (n->ctx != NULL) {
        zh_ucp.ucp_cleanup(n->ctx);
    }
    free(n->peer);
    free(n->addrs);
    free(n);
}

/* ---- requests --------------------------------------------------------------------------- */

static int zh_net_posted(zh_net_t *n, ucs_status_ptr_t sp, int peer, size_t bytes, int recv,
                         zh_net_req_t *r)
{
    r->recv = recv;
    r->peer = peer;
    r->bytes = bytes;
    r->status = ZC_OK;
    r->ucx = NULL;
    if (UCS_PTR_IS_ERR(sp)) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: UCX transfer with rank %d failed: %s", n->rank, peer,
                zh_ucp.ucs_status_string(UCS_PTR_STATUS(sp)));
        r->status = ZC_ERR_REMOTE;
        return r->status;
    }
    r->ucx = sp; /* NULL: done at once */
    return ZC_OK;
}

/* Drop every unexpected message without the communicator's mark: for each
 * bit of the mark, UCX finds the messages whose bit differs wherever they
 * lie in its queue (a probe with a one-bit mask). The first bytes land in
 * the sink, the rest is discarded by UCX (truncation), so a flood costs
 * what one progress round reads, not what it sends. */
static void zh_net_drain(zh_net_t *n)
{
    for (int b = 0; b < 16; b++) {
        uint64_t mask = 1ull << (48 + b);
        uint64_t foreign = ((uint64_t)(~n->mark >> b) & 1u) << (48 + b);
        for (int i = 0; i < ZH_NET_DRAIN_MAX; i++) {
            ucp_tag_recv_info_t info;
            ucp_tag_message_h m = zh_ucp.ucp_tag_probe_nb(n->worker, foreign, mask, 1, &info);
            if (m == NULL) {
                break;
            }
            ucp_request_param_t rp = {.op_attr_mask = 0};
            ucs_status_ptr_t q =
                zh_ucp.ucp_tag_msg_recv_nbx(n->worker, n->sink, sizeof(n->sink), m, &rp);
            if (UCS_PTR_IS_PTR(q)) {
                zh_ucp.ucp_request_free(q); /* UCX completes and releases it */
            }
            if (n->dropped++ == 0) {
                ZC_WARN(ZC_SUB_COMM,
                        "rank %d: dropped a message of %zu bytes without the communicator's "
                        "mark (tag 0x%016llx): someone outside the communicator reaches this "
                        "rank's UCX port; later ones are counted (logged at destroy)",
                        n->rank, info.length, (unsigned long long)info.sender_tag);
            }
        }
    }
}

int zh_net_isend(zh_net_t *n, int peer, uint64_t tag, const void *buf, size_t bytes,
                 zh_net_req_t *r)
{
    zh_net_peer_t *p = &n->peer[peer];
    if (zh_net_ep(n, peer) == NULL || p->failed) {
        r->ucx = NULL;
        r->peer = peer;
        r->recv = 0;
        r->status = ZC_ERR_REMOTE;
        return p->failed ? ZC_ERR_REMOTE : ZC_ERR_INTERNAL;
    }
    ucp_request_param_t rp = {.op_attr_mask = 0};
    return zh_net_posted(
        n, zh_ucp.ucp_tag_send_nbx(p->ep, buf, bytes, zh_net_tag_seal(n->key, tag), &rp), peer,
        bytes, 0, r);
}

int zh_net_irecv(zh_net_t *n, int peer, uint64_t tag, void *buf, size_t bytes, zh_net_req_t *r)
{
    /* The endpoint is opened for a receive too: its error handler is how a
     * dead sender is seen before the exec timeout. */
    (void)zh_net_ep(n, peer);
    ucp_request_param_t rp = {.op_attr_mask = 0};
    uint64_t wire = zh_net_tag_seal(n->key, tag);
    return zh_net_posted(n, zh_ucp.ucp_tag_recv_nbx(n->worker, buf, bytes, wire, ~0ull, &rp), peer,
                         bytes, 1, r);
}

/* Reap r if UCX is done with it; 1 when complete. */
static int zh_net_reap(zh_net_t *n, zh_net_req_t *r)
{
    if (r->ucx == NULL) {
        return 1;
    }
    ucs_status_t s = zh_ucp.ucp_request_check_status(r->ucx);
    if (s == UCS_INPROGRESS) {
        return 0;
    }
    if (s == UCS_OK && r->recv) {
        ucp_tag_recv_info_t info;
        if (zh_ucp.ucp_tag_recv_request_test(r->ucx, &info) == UCS_OK && info.length != r->bytes) {
            ZC_WARN(ZC_SUB_COMM, "rank %d: rank %d sent %zu bytes where %zu were expected", n->rank,
                    r->peer, info.length, r->bytes);
            r->status = ZC_ERR_INVAL;
        }
    } else if (s != UCS_OK && s != UCS_ERR_CANCELED) {
        ZC_WARN(ZC_SUB_COMM, "rank %d: UCX transfer with rank %d failed: %s", n->rank, r->peer,
                zh_ucp.ucs_status_string(s));
        r->status = s == UCS_ERR_MESSAGE_TRUNCATED ? ZC_ERR_INVAL : ZC_ERR_REMOTE;
    }
    zh_ucp.ucp_request_free(r->ucx);
    r->ucx = NULL;
    return 1;
}

int zh_net_test(zh_net_t *n, zh_net_req_t *r)
{
    if (r->ucx == NULL) {
        return 1;
    }
    zh_ucp.ucp_worker_progress(n->worker);
    return zh_net_reap(n, r);
}

void zh_net_cancel(zh_net_t *n, zh_net_req_t *r, int count)
{
    for (int i = 0; i < count; i++) {
        if (r[i].ucx != NULL) {
            zh_ucp.ucp_request_cancel(n->worker, r[i].ucx);
        }
    }
    uint64_t start = zc_time_ns();
    for (int i = 0; i < count; i++) {
        while (!zh_net_reap(n, &r[i]) && zc_time_ns() - start < ZH_NET_REAP_NS) {
            zh_ucp.ucp_worker_progress(n->worker);
        }
        if (r[i].ucx != NULL) {
            /* A send UCX cannot take back (the link is stuck): it only reads
             * the buffer; the endpoint's forced close at destroy ends it. */
            r[i].ucx = NULL;
        }
    }
}

/* The first failure among r's requests, or a failed endpoint they wait on. */
static int zh_net_failed(zh_net_t *n, zh_net_req_t *r, int count)
{
    for (int i = 0; i < count; i++) {
        if (r[i].status != ZC_OK) {
            return r[i].status;
        }
        if (r[i].ucx != NULL && n->peer[r[i].peer].failed) {
            ZC_WARN(ZC_SUB_COMM, "rank %d: the link to rank %d is gone", n->rank, r[i].peer);
            return ZC_ERR_REMOTE;
        }
    }
    return ZC_OK;
}

int zh_net_wait(zh_net_t *n, zh_net_req_t *r, int count, uint64_t timeout_ns, zh_net_abort_fn abort,
                void *arg)
{
    uint64_t start = 0;
    for (uint32_t it = 0;; it++) {
        int pending = 0;
        /* Drained after every round that read something (nothing else
         * adds to UCX's queue), so a flood costs one round's reads. */
        for (unsigned ev = 1; ev != 0;) {
            ev = zh_ucp.ucp_worker_progress(n->worker);
            if (ev != 0) {
                zh_net_drain(n);
            }
        }
        for (int i = 0; i < count; i++) {
            pending += !zh_net_reap(n, &r[i]);
        }
        int st = zh_net_failed(n, r, count);
        if (st == ZC_OK && pending == 0) {
            return ZC_OK;
        }
        if (st == ZC_OK && abort != NULL && (it & 63u) == 0 && abort(arg)) {
            st = ZC_ERR_REMOTE;
        }
        if (st == ZC_OK && it >= ZH_NET_SPIN) {
            uint64_t now = zc_time_ns();
            start = start == 0 ? now : start;
            if (timeout_ns != 0 && now - start > timeout_ns) {
                ZC_WARN(ZC_SUB_COMM,
                        "rank %d: %d transfers with other hosts still pending after "
                        "the exec timeout (%llu s)",
                        n->rank, pending, (unsigned long long)(timeout_ns / 1000000000ull));
                st = ZC_ERR_TIMEOUT;
            } else if (now - start > 1000000ull) {
                usleep(50); /* ranks may outnumber cores */
            } else {
                sched_yield();
            }
        }
        if (st != ZC_OK) {
            zh_net_cancel(n, r, count);
            return st;
        }
    }
}

const char *zh_net_transport(zh_net_t *n, int peer)
{
    return n->peer[peer].ep != NULL ? n->peer[peer].tl : "?";
}

const void *zh_net_address(const zh_net_t *n, size_t *len)
{
    *len = n->addr_len;
    return n->addr;
}

uint64_t zh_net_dropped(const zh_net_t *n)
{
    return n->dropped;
}

/*
 * Internals shared by the VMM, export/import, IPC-key and broker files of
 * libascendcl (vmm_phys.c, vmm_export.c, vmm_ipc.c, vmm_broker.c).
 *
 * Objects and who owns them:
 *  - A physical handle (vmm_phys_t) owns one memfd. aclrtMallocPhysical and
 *    the import calls create it with one user reference; Retain adds one and
 *    FreePhysical drops one. Each aclrtMapMem of it holds a map reference.
 *    The fd is closed and the handle forgotten when both counts are zero; the
 *    broker offer of its shareable handle is withdrawn when the user count
 *    reaches zero (new imports fail, existing imports keep their memory).
 *  - Reservations and the mappings inside them live in vmm_phys.c.
 *  - Broker offers (a dup of an fd each) live in vmm_broker.c.
 * Locking: one registry mutex (vmm_lock) guards handles, reservations,
 * mappings and the IPC key tables; the broker has its own mutex, always
 * taken after the registry mutex, never before. Both are taken around fork()
 * (vmm_broker.c registers the handlers), so a forked child finds them free.
 *
 * Broker wire protocol (SOCK_SEQPACKET, one request per connection): the
 * broker drops a client of another uid at accept, unanswered; the client
 * sends a vmm_broker_req_t (op FETCH), or a vmm_broker_range_req_t (op
 * FETCH_RANGE) for an offer made with a range, which is granted only when it
 * names exactly that range; the broker answers with a vmm_broker_resp_t,
 * carrying the fd with SCM_RIGHTS when status is ZC_OK. Anything else (wrong
 * length, magic, version or op) is answered with ZC_ERR_INVAL and the
 * connection is closed.
 */
#ifndef VMM_SHARE_H
#define VMM_SHARE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "acl/acl_base.h"

/* ---- broker protocol ------------------------------------------------------ */

#define VMM_BROKER_MAGIC 0x5a43424bu /* "ZCBK" */
#define VMM_BROKER_VERSION 2u
#define VMM_BROKER_OP_FETCH 1u
#define VMM_BROKER_OP_FETCH_RANGE 2u /* an offer made with a range: ask for exactly it */
/* Seconds a fetch may take in all: connect, request and answer, retried in
 * attempts of VMM_BROKER_ATTEMPT_MS while the owner is alive but slow. */
#define VMM_BROKER_CLIENT_TIMEOUT_S 5
#define VMM_BROKER_ATTEMPT_MS 1000
/* Milliseconds the broker gives one client, from accept, to send its request;
 * clients are served concurrently, at most VMM_BROKER_MAX_CLIENTS at once. */
#define VMM_BROKER_REQ_MS 500
#define VMM_BROKER_MAX_CLIENTS 64
/* Token: owner pid (22 bits) | broker nonce (20 bits) | offer serial (22 bits).
 * The nonce is the random part of the broker's socket name, so a fetcher that
 * holds a token knows the name and nobody can bind it in advance. */
#define VMM_TOKEN_PID_SHIFT 42
#define VMM_TOKEN_SERIAL_MASK ((UINT64_C(1) << VMM_TOKEN_PID_SHIFT) - 1)
#define VMM_TOKEN_NONCE_SHIFT 22
#define VMM_TOKEN_NONCE_MASK ((UINT32_C(1) << 20) - 1)
#define VMM_TOKEN_OFFER_MASK ((UINT64_C(1) << VMM_TOKEN_NONCE_SHIFT) - 1)

typedef struct {
    uint32_t magic;   /* VMM_BROKER_MAGIC */
    uint16_t version; /* VMM_BROKER_VERSION */
    uint16_t op;      /* VMM_BROKER_OP_FETCH */
    uint64_t token;   /* the offer asked for */
} vmm_broker_req_t;
_Static_assert(sizeof(vmm_broker_req_t) == 16, "broker request layout is fixed");

typedef struct {
    vmm_broker_req_t head; /* op VMM_BROKER_OP_FETCH_RANGE */
    uint64_t offset;       /* the range the asker's key names */
    uint64_t length;
} vmm_broker_range_req_t;
_Static_assert(sizeof(vmm_broker_range_req_t) == 32, "broker range request layout is fixed");

typedef struct {
    uint32_t magic;    /* VMM_BROKER_MAGIC */
    uint16_t version;  /* VMM_BROKER_VERSION */
    uint16_t reserved; /* 0 */
    int32_t status;    /* zc_status_t: ZC_OK (fd attached) or the refusal */
    uint32_t reserved2;
    uint64_t size;   /* bytes of the fd, when status is ZC_OK */
    uint64_t offset; /* the range granted inside the fd (0 and size for a plain fetch) */
    uint64_t length;
} vmm_broker_resp_t;
_Static_assert(sizeof(vmm_broker_resp_t) == 40, "broker response layout is fixed");

/**
 * Fill addr with the abstract socket name of the broker that made token:
 * "\0zccl-broker-<pid>-<nonce>" (nonce: 5 lowercase hex digits).
 * @return the address length to pass to bind/connect.
 */
socklen_t vmm_broker_addr(uint64_t token, struct sockaddr_un *addr);

/**
 * Offer [off, off+len) of fd (fsize bytes): the broker hands the fd only to
 * a VMM_BROKER_OP_FETCH_RANGE request naming exactly that range (a plain
 * fetch or another range is refused with ZC_ERR_INVAL), and importers map
 * only it. zccl_broker_offer offers all of an fd, for plain fetches.
 */
int vmm_broker_offer_range(int fd, size_t fsize, uint64_t off, uint64_t len, int validate_pid,
                           uint64_t *token);

/** Fetch the fd of a ranged offer, asking for [off, off+len); fsize: the fd's bytes. */
int vmm_broker_fetch_range(uint64_t token, uint64_t off, uint64_t len, int *fd, size_t *fsize);

/* What a fetcher asks: a plain fetch (ranged 0) or exactly [off, off+len). */
typedef struct {
    int ranged;
    uint64_t off;
    uint64_t len;
} vmm_ask_t;

/**
 * Check ask against an offer's range; ZC_OK or ZC_ERR_INVAL (logged, naming
 * who asked). Used by the broker and by local fetches.
 */
int vmm_offer_check_ask(int ranged, uint64_t off, uint64_t len, uint64_t token,
                        const vmm_ask_t *ask, int32_t pid);

/** Local fetch of one of this process's offers. Broker lock NOT held. */
int vmm_broker_fetch_local(uint64_t token, const vmm_ask_t *ask, int *fd, size_t *fsize);

/* The broker's fork steps: prepare takes its lock, parent releases it, child
 * drops the parent's socket and offers and releases it. vmm_fork.c calls them
 * inside the registry's steps. */
void vmm_broker_fork_prepare(void);
void vmm_broker_fork_parent(void);
void vmm_broker_fork_child(void);

/* ---- FABRIC shareable handle (aclrtMemFabricHandle, 128 bytes) ------------ */

#define VMM_FABRIC_MAGIC 0x5a434642u /* "ZCFB" */
#define VMM_FABRIC_VERSION 1u

/* A DEFAULT handle (the token) plus the exporter's host identity, so an
 * import on another host fails clearly instead of asking a stranger. */
typedef struct {
    uint32_t magic;   /* VMM_FABRIC_MAGIC */
    uint32_t version; /* VMM_FABRIC_VERSION */
    uint64_t token;   /* the broker offer */
    uint64_t host_id; /* zc_host_id() of the exporter */
    uint64_t size;    /* bytes of the physical allocation */
    uint8_t reserved[96];
} vmm_fabric_t;
_Static_assert(sizeof(vmm_fabric_t) == 128, "fabric handle is 128 bytes");

/* ---- registry ------------------------------------------------------------- */

typedef struct vmm_phys vmm_phys_t;
struct vmm_phys {
    vmm_phys_t *next;
    int fd;             /* the memfd; owned */
    size_t size;        /* bytes, a multiple of the granularity */
    int dev;            /* device id whose memory it is, -1 for host memory */
    int numa;           /* NUMA node its pages prefer, -1 for none */
    unsigned refs;      /* user references (alloc/import 1, +1 per retain) */
    unsigned maps;      /* live aclrtMapMem mappings */
    uint64_t token;     /* broker offer of its shareable handle, 0 if none */
    uint64_t src_token; /* shareable handle it was imported from, 0 if local */
};

void vmm_lock(void);
void vmm_unlock(void);
void vmm_fork_prepare_registry(void);
void vmm_fork_parent_registry(void);
void vmm_fork_child_registry(void);
/** Child side of fork for the IPC key tables (registry lock held). */
void vmm_ipc_fork_child(void);

/** The live handle h (user references > 0) or NULL. Registry lock held. */
vmm_phys_t *vmm_phys_find(aclrtDrvMemHandle h);

/** The live handle whose shareable handle is token, or NULL. Registry lock held. */
vmm_phys_t *vmm_phys_find_token(uint64_t token);

/**
 * Wrap fd (ownership passes to the handle, also on failure) of size bytes in a
 * new handle with one user reference. Registry lock NOT held.
 * @return ACL_SUCCESS or ACL_ERROR_RT_MEMORY_ALLOCATION.
 */
aclError vmm_phys_wrap(int fd, size_t size, int dev, int numa, uint64_t src_token,
                       aclrtDrvMemHandle *out);

/**
 * The VMM mapping that contains ptr: its handle's fd (owned by the handle),
 * the offset of ptr in that fd and the bytes of the mapping from ptr on.
 * Registry lock held. @return 0 when found, -1 otherwise.
 */
int vmm_map_lookup(const void *ptr, int *fd, size_t *offset, size_t *avail);

/** True when token names an offer made by this process (its pid is ours). */
int vmm_token_is_mine(uint64_t token);

#endif /* VMM_SHARE_H */

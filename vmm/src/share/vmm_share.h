/*
 * Internals shared by the export/import, IPC-key and broker files of
 * libascendcl (vmm_export.c, vmm_ipc.c, vmm_broker.c, vmm_broker_fetch.c);
 * the memory registry they use is mem/vmm_registry.h (its lock is taken
 * before the broker's, never after).
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
 * clients are served concurrently, at most VMM_BROKER_MAX_CLIENTS at once:
 * every peer of a communicator of 1,024 ranks on one host (which all fetch
 * a rank's control segment at init), and a margin. It is also the listening
 * socket's backlog. */
#define VMM_BROKER_REQ_MS 500
#define VMM_BROKER_MAX_CLIENTS 1088
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

/* ---- tokens and IPC keys ---------------------------------------------------- */

/** True when token names an offer made by this process (its pid is ours). */
int vmm_token_is_mine(uint64_t token);

/** Fork child: forget the exported IPC keys, whose offers were the parent's.
 *  Registry lock held (vmm_ipc.c). */
void vmm_ipc_fork_child(void);

/**
 * aclrtFree of [base, base+size) (an aclrtMalloc block): withdraw the broker
 * offers of IPC keys exported from it. Registry lock NOT held. (vmm_ipc.c)
 */
void vmm_ipc_mem_freed(uintptr_t base, size_t size);

/**
 * A physical handle's last user reference went: withdraw the offer of its
 * shareable handle token (0: none). Registry lock held. (vmm_export.c)
 */
void vmm_export_released(uint64_t token);

#endif /* VMM_SHARE_H */

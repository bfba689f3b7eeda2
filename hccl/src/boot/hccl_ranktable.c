/*
 * Rank-table init, the file: reading and checking CANN's rank-table JSON
 * (the rendezvous and the exported calls are hccl_ranktable_init.c).
 *
 * The file is CANN's rank-table JSON, in either published layout:
 *  - version "1.0" / "1.1" / "1.2": "server_list" of servers, each with a
 *    "server_id" and a "device" list of {"device_id", "rank_id"} (numbers
 *    written as strings, as CANN's samples do; plain numbers are accepted);
 *    "server_count", when present, must match.
 *  - version "2.0": "rank_count" and a "rank_list" of {"rank_id",
 *    "device_id", optional "local_id", "server_id", "level_list"}.
 Any number of servers (up to one per rank); the calling rank's server, when
 * its server id or host_ip is written as an IP address, must be this host.
 * Rank ids are distinct and below the rank count (so exactly 0..n-1), device
 * ids distinct on each server and below the device count.
 * Every refusal is HCCL_E_PARA (HCCL_E_OPEN_FILE_FAILURE for an unreadable
 * file) with one log line naming the file, the field and the value.
 */
#include "boot/hccl_ranktable.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <json-c/json.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "zc/config.h"
#include "zc/log.h"
#include "zc/sync.h"
#include "zccl/vmm_ext.h"

/* Field of object o into *v (NULL when absent); absent and required is an error. */
static int zh_rt_get(zh_rt_t *t, json_object *o, const char *field, const char *where, int required,
                     json_object **v)
{
    *v = NULL;
    if (!json_object_object_get_ex(o, field, v)) {
        *v = NULL;
        if (required) {
            ZH_RT_BAD(t, "field %s%s is missing", where, field);
            return ZC_ERR_INVAL;
        }
    }
    return ZC_OK;
}

/* A non-negative integer field, as a JSON number or a decimal string; -1 if absent. */
static int zh_rt_uint(zh_rt_t *t, json_object *o, const char *field, const char *where,
                      int required, int64_t *out)
{
    json_object *v = NULL;
    *out = -1;
    if (zh_rt_get(t, o, field, where, required, &v) != ZC_OK) {
        return ZC_ERR_INVAL;
    }
    if (v == NULL) {
        return ZC_OK;
    }
    const char *s = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
    if (json_object_is_type(v, json_type_int) && json_object_get_int64(v) >= 0 &&
        json_object_get_int64(v) <= INT32_MAX) {
        *out = json_object_get_int64(v);
        return ZC_OK;
    }
    if (json_object_is_type(v, json_type_string)) {
        const char *p = json_object_get_string(v);
        char *end = NULL;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (p[0] >= '0' && p[0] <= '9' && *end == '\0' && errno == 0 && x <= INT32_MAX) {
            *out = x;
            return ZC_OK;
        }
    }
    ZH_RT_BAD(t, "field %s%s: value %s is not a non-negative integer", where, field, s);
    return ZC_ERR_INVAL;
}

/* A string field; NULL when absent. */
static int zh_rt_str(zh_rt_t *t, json_object *o, const char *field, const char *where, int required,
                     const char **out)
{
    json_object *v = NULL;
    *out = NULL;
    if (zh_rt_get(t, o, field, where, required, &v) != ZC_OK) {
        return ZC_ERR_INVAL;
    }
    if (v == NULL) {
        return ZC_OK;
    }
    if (!json_object_is_type(v, json_type_string)) {
        ZH_RT_BAD(t, "field %s%s: value %s is not a string", where, field,
                  json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
        return ZC_ERR_INVAL;
    }
    *out = json_object_get_string(v);
    return ZC_OK;
}

/* An array field (required), with its length. */
static int zh_rt_array(zh_rt_t *t, json_object *o, const char *field, const char *where,
                       json_object **arr, size_t *n)
{
    if (!json_object_object_get_ex(o, field, arr)) {
        ZH_RT_BAD(t, "field %s%s is missing", where, field);
        return ZC_ERR_INVAL;
    }
    if (!json_object_is_type(*arr, json_type_array) || json_object_array_length(*arr) == 0) {
        ZH_RT_BAD(t, "field %s%s: value %.60s is not a non-empty array", where, field,
                  json_object_to_json_string_ext(*arr, JSON_C_TO_STRING_PLAIN));
        return ZC_ERR_INVAL;
    }
    *n = json_object_array_length(*arr);
    return ZC_OK;
}

/* Is s an IP address of another host? (A name such as "node_0" is not.) */
static int zh_rt_foreign_ip(const char *s)
{
    unsigned char a[16];
    int fam = inet_pton(AF_INET, s, a) == 1    ? AF_INET
              : inet_pton(AF_INET6, s, a) == 1 ? AF_INET6
                                               : 0;
    if (fam == 0) {
        return 0;
    }
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) {
        return 0;
    }
    int local = 0;
    for (struct ifaddrs *i = ifs; i != NULL && !local; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != fam) {
            continue;
        }
        const void *ip = fam == AF_INET
                             ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                             : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        local = memcmp(ip, a, fam == AF_INET ? 4 : 16) == 0;
    }
    freeifaddrs(ifs);
    return !local;
}

/* Refuse server s's server_id or host_ip when it is an IP address of another
 * host: the calling rank is on s. */
static int zh_rt_here(zh_rt_t *t, uint32_t s)
{
    const zh_rt_server_t *v = &t->server[s];
    const char *field = "server_id";
    const char *val = v->id;
    if (!zh_rt_foreign_ip(val)) {
        field = "host_ip";
        val = v->ip;
        if (!zh_rt_foreign_ip(val)) {
            return ZC_OK;
        }
    }
    ZH_RT_BAD(t,
              "field %s%s: value \"%s\" is not an address of this host (rank %u is on that "
              "server: a rank table for another host)",
              v->where, field, val, t->me);
    return ZC_ERR_INVAL;
}

/* The server named id (ip: its host_ip or NULL) into *idx, added when new; a
 * 1.x table (unique) lists each server once. */
static int zh_rt_server(zh_rt_t *t, const char *id, const char *ip, const char *where, int unique,
                        uint32_t *idx)
{
    id = id != NULL ? id : "";
    if (strlen(id) >= ZH_RT_ID_MAX || (ip != NULL && strlen(ip) >= ZH_RT_IP_MAX)) {
        ZH_RT_BAD(t, "field %s%s: value \"%.40s...\" is longer than %d bytes", where,
                  strlen(id) >= ZH_RT_ID_MAX ? "server_id" : "host_ip",
                  strlen(id) >= ZH_RT_ID_MAX ? id : ip,
                  (strlen(id) >= ZH_RT_ID_MAX ? ZH_RT_ID_MAX : ZH_RT_IP_MAX) - 1);
        return ZC_ERR_INVAL;
    }
    for (uint32_t s = 0; s < t->nservers; s++) {
        if (strcmp(t->server[s].id, id) == 0) {
            if (unique) {
                ZH_RT_BAD(t, "field %sserver_id: value \"%s\" is also %sserver_id", where, id,
                          t->server[s].where);
                return ZC_ERR_INVAL;
            }
            *idx = s;
            return ZC_OK;
        }
    }
    zh_rt_server_t *v = &t->server[t->nservers];
    snprintf(v->id, sizeof(v->id), "%s", id);
    snprintf(v->ip, sizeof(v->ip), "%s", ip != NULL ? ip : "");
    snprintf(v->where, sizeof(v->where), "%s", where);
    *idx = t->nservers++;
    return ZC_OK;
}

/* One rank entry {rank_id, device_id} on server s: range and uniqueness
 * checks (device ids are per server); a rank that is the caller's checks
 * the server is this host. */
static int zh_rt_rank(zh_rt_t *t, json_object *o, const char *where, uint32_t s)
{
    int64_t rank = -1;
    int64_t dev = -1;
    int st = zh_rt_uint(t, o, "rank_id", where, 1, &rank);
    if (st == ZC_OK) {
        st = zh_rt_uint(t, o, "device_id", where, 1, &dev);
    }
    if (st != ZC_OK) {
        return st;
    }
    if (rank >= (int64_t)t->nranks) {
        ZH_RT_BAD(t, "field %srank_id: value %lld is not below the rank count %u", where,
                  (long long)rank, t->nranks);
        return ZC_ERR_INVAL;
    }
    if (t->device[rank] >= 0) {
        ZH_RT_BAD(t, "field %srank_id: value %lld appears twice", where, (long long)rank);
        return ZC_ERR_INVAL;
    }
    uint32_t ndev = 0;
    if (aclrtGetDeviceCount(&ndev) == ACL_SUCCESS && dev >= (int64_t)ndev) {
        ZH_RT_BAD(t, "field %sdevice_id: value %lld: this host has %u devices (ZCCL_DEVICES)",
                  where, (long long)dev, ndev);
        return ZC_ERR_INVAL;
    }
    for (uint32_t r = 0; r < t->nranks; r++) {
        if (t->device[r] == dev && t->server_of[r] == s) {
            ZH_RT_BAD(t, "field %sdevice_id: value %lld is also rank %u's device", where,
                      (long long)dev, r);
            return ZC_ERR_INVAL;
        }
    }
    t->device[rank] = (int32_t)dev;
    t->server_of[rank] = s;
    return (uint64_t)rank == t->me ? zh_rt_here(t, s) : ZC_OK;
}

/* The top-level list field with its optional count field, which must match. */
static int zh_rt_list(zh_rt_t *t, json_object *root, const char *list, const char *count_field,
                      json_object **arr, size_t *n)
{
    int64_t count = -1;
    int st = zh_rt_array(t, root, list, "", arr, n);
    if (st == ZC_OK) {
        st = zh_rt_uint(t, root, count_field, "", 0, &count);
    }
    if (st == ZC_OK && count >= 0 && (uint64_t)count != *n) {
        ZH_RT_BAD(t, "field %s: value %lld but the list has %zu entries", count_field,
                  (long long)count, *n);
        st = ZC_ERR_INVAL;
    }
    return st;
}

static int zh_rt_max(zh_rt_t *t, size_t n)
{
    if (n > ZH_MAX_COMM_RANKS) {
        ZH_RT_BAD(t, "%zu ranks: at most %d", n, ZH_MAX_COMM_RANKS);
        return ZC_ERR_INVAL;
    }
    t->nranks = (uint32_t)n;
    return ZC_OK;
}

/* version 1.x: server_list[].device[] */
static int zh_rt_parse_v1(zh_rt_t *t, json_object *root)
{
    json_object *servers = NULL;
    size_t ns = 0;
    int st = zh_rt_list(t, root, "server_list", "server_count", &servers, &ns);
    size_t total = 0;
    for (size_t s = 0; s < ns && st == ZC_OK; s++) {
        json_object *devs = NULL;
        size_t nd = 0;
        char where[64];
        snprintf(where, sizeof(where), "server_list[%zu].", s);
        st = zh_rt_array(t, json_object_array_get_idx(servers, s), "device", where, &devs, &nd);
        total += nd;
    }
    if (st == ZC_OK) {
        st = zh_rt_max(t, total);
    }
    for (size_t s = 0; s < ns && st == ZC_OK; s++) {
        json_object *srv = json_object_array_get_idx(servers, s);
        json_object *devs = json_object_object_get(srv, "device");
        const char *id = NULL;
        const char *ip = NULL;
        char where[64];
        snprintf(where, sizeof(where), "server_list[%zu].", s);
        uint32_t idx = 0;
        st = zh_rt_str(t, srv, "server_id", where, 1, &id);
        if (st == ZC_OK) {
            st = zh_rt_str(t, srv, "host_ip", where, 0, &ip);
        }
        if (st == ZC_OK) {
            st = zh_rt_server(t, id, ip, where, 1, &idx);
        }
        for (size_t d = 0; d < json_object_array_length(devs) && st == ZC_OK; d++) {
            snprintf(where, sizeof(where), "server_list[%zu].device[%zu].", s, d);
            st = zh_rt_rank(t, json_object_array_get_idx(devs, d), where, idx);
        }
    }
    return st;
}

/* version 2.0: rank_list[] */
static int zh_rt_parse_v2(zh_rt_t *t, json_object *root)
{
    json_object *ranks = NULL;
    size_t n = 0;
    int st = zh_rt_list(t, root, "rank_list", "rank_count", &ranks, &n);
    if (st == ZC_OK) {
        st = zh_rt_max(t, n);
    }
    for (size_t i = 0; i < n && st == ZC_OK; i++) {
        json_object *o = json_object_array_get_idx(ranks, i);
        char where[64];
        snprintf(where, sizeof(where), "rank_list[%zu].", i);
        const char *id = NULL;
        int64_t local = -1;
        uint32_t idx = 0;
        st = zh_rt_str(t, o, "server_id", where, 0, &id);
        if (st == ZC_OK) {
            st = zh_rt_uint(t, o, "local_id", where, 0, &local);
        }
        if (st == ZC_OK) {
            st = zh_rt_server(t, id, NULL, where, 0, &idx);
        }
        if (st == ZC_OK) {
            st = zh_rt_rank(t, o, where, idx);
        }
    }
    /* Without a server_id a rank cannot be placed once others name servers. */
    for (uint32_t s = 0; s < t->nservers && st == ZC_OK && t->nservers > 1; s++) {
        if (t->server[s].id[0] == '\0') {
            ZH_RT_BAD(t, "field %sserver_id is missing (other ranks name their servers)",
                      t->server[s].where);
            st = ZC_ERR_INVAL;
        }
    }
    return st;
}

static int zh_rt_parse_root(zh_rt_t *t, json_object *root)
{
    const char *version = NULL;
    const char *status = NULL;
    if (!json_object_is_type(root, json_type_object)) {
        ZH_RT_BAD(t, "the top level is not a JSON object");
        return ZC_ERR_INVAL;
    }
    int st = zh_rt_str(t, root, "version", "", 1, &version);
    if (st == ZC_OK) {
        st = zh_rt_str(t, root, "status", "", 0, &status);
    }
    if (st == ZC_OK && status != NULL && strcmp(status, "completed") != 0) {
        ZH_RT_BAD(t, "field status: value \"%s\" (the table is usable only when \"completed\")",
                  status);
        st = ZC_ERR_INVAL;
    }
    for (int r = 0; r < ZH_MAX_COMM_RANKS; r++) {
        t->device[r] = -1;
    }
    t->nservers = 0;
    if (st != ZC_OK) {
        return st;
    }
    if (strcmp(version, "2.0") == 0) {
        st = zh_rt_parse_v2(t, root);
    } else if (strcmp(version, "1.0") == 0 || strcmp(version, "1.1") == 0 ||
               strcmp(version, "1.2") == 0) {
        st = zh_rt_parse_v1(t, root);
    } else {
        ZH_RT_BAD(t, "field version: value \"%s\" is not a known layout (1.0, 1.1, 1.2, 2.0)",
                  version);
        st = ZC_ERR_INVAL;
    }
    /* n entries with distinct ids below n: every rank 0..n-1 is present. */
    return st;
}

int zh_rt_server_ip(const zh_rt_t *t, uint32_t s, char ip[ZH_RT_IP_MAX])
{
    const zh_rt_server_t *v = &t->server[s];
    struct in_addr a;
    const char *lit = inet_pton(AF_INET, v->ip, &a) == 1   ? v->ip
                      : inet_pton(AF_INET, v->id, &a) == 1 ? v->id
                                                           : NULL;
    if (lit != NULL) {
        snprintf(ip, ZH_RT_IP_MAX, "%s", lit);
        return ZC_OK;
    }
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = v->id[0] != '\0' ? getaddrinfo(v->id, NULL, &hints, &res) : EAI_NONAME;
    if (rc != 0 || res == NULL) {
        ZH_RT_BAD(t,
                  "field %sserver_id: value \"%s\": no IPv4 address for this server (no "
                  "host_ip, not an IPv4 address, the name does not resolve: %s)",
                  v->where, v->id, gai_strerror(rc));
        return ZC_ERR_INVAL;
    }
    inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)res->ai_addr)->sin_addr, ip, ZH_RT_IP_MAX);
    freeaddrinfo(res);
    return ZC_OK;
}

/* Read the whole file (the hash of its bytes names the rendezvous). */
int zh_rt_read(const char *path, char **buf, long *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        ZC_WARN(ZC_SUB_INIT, "rank table %s: cannot open: %s", path, strerror(errno));
        return ZC_ERR_IO;
    }
    int st = ZC_OK;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n < 0 || n > ZH_RT_FILE_MAX || fseek(f, 0, SEEK_SET) != 0) {
        ZC_WARN(ZC_SUB_INIT, "rank table %s: size %ld is not readable or over %ld bytes", path, n,
                ZH_RT_FILE_MAX);
        st = ZC_ERR_INVAL;
    }
    char *b = st == ZC_OK ? malloc((size_t)n + 1) : NULL;
    if (st == ZC_OK && (b == NULL || fread(b, 1, (size_t)n, f) != (size_t)n)) {
        ZC_WARN(ZC_SUB_INIT, "rank table %s: cannot read %ld bytes", path, n);
        st = ZC_ERR_IO;
    }
    fclose(f);
    if (st != ZC_OK) {
        free(b);
        return st;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return ZC_OK;
}

int zh_rt_parse(zh_rt_t *t, const char *buf, long len)
{
    struct json_tokener *tok = json_tokener_new();
    if (tok == NULL) {
        return ZC_ERR_NOMEM;
    }
    json_object *root = json_tokener_parse_ex(tok, buf, (int)len);
    enum json_tokener_error je = json_tokener_get_error(tok);
    int st = ZC_OK;
    if (root == NULL || je != json_tokener_success ||
        (int)json_tokener_get_parse_end(tok) < (int)len) {
        /* trailing bytes after the value are only whitespace in a valid file */
        size_t off = json_tokener_get_parse_end(tok);
        while (root != NULL && off < (size_t)len && strchr(" \t\r\n", buf[off]) != NULL) {
            off++;
        }
        if (root == NULL || je != json_tokener_success || off < (size_t)len) {
            const char *why = je == json_tokener_continue  ? "unexpected end of file"
                              : je != json_tokener_success ? json_tokener_error_desc(je)
                                                           : "data after the top-level value";
            ZH_RT_BAD(t, "not valid JSON at byte %zu: %s", off, why);
            st = ZC_ERR_INVAL;
        }
    }
    if (st == ZC_OK) {
        st = zh_rt_parse_root(t, root);
    }
    json_object_put(root);
    json_tokener_free(tok);
    return st;
}

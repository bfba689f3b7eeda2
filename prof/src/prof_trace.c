/*
 * Trace files: Chrome trace-event JSON (the format Perfetto and
 * chrome://tracing open), one file per rank of this process.
 *
 * Each op is one complete event ("ph":"X") at its start time with its run
 * time as duration, in microseconds of CLOCK_MONOTONIC (the same clock in
 * every process of the host, so the files of all ranks line up when opened
 * together). The trace process ("pid") is the rank, the thread ("tid") a
 * stream, numbered in order of first use and named by metadata events. The
 * event's args carry the full record: rank, communicator, op, dtype, count,
 * bytes, path, stream, sequence number, issue / start / end times, result.
 * Copies are stamped with their device; they go to the file of the rank
 * whose ops ran on that device (or the process's only rank), else to a
 * "copies" file.
 */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zc/export.h"
#include "zc/log.h"

#define PROF_MAX_STREAMS 256
#define PROF_COPIES_RANK (-1)

static const char *prof_dtype_name(int d)
{
    static const char *const names[] = {
        "int8",   "int16", "int32", "fp16",   "fp32", "int64", "uint64",  "uint8",   "uint16",
        "uint32", "fp64",  "bfp16", "int128", "?",    "hif8",  "fp8e4m3", "fp8e5m2", "fp8e8m0",
    };
    if (d < 0) {
        return d == -1 ? "none" : "?";
    }
    return (size_t)d < sizeof(names) / sizeof(names[0]) ? names[d] : "?";
}

static const char *prof_path_name(int p)
{
    switch (p) {
    case ZCCL_PROF_PATH_ZERO_COPY:
        return "zero-copy";
    case ZCCL_PROF_PATH_INLINE:
        return "inline";
    case ZCCL_PROF_PATH_BUFFERED:
        return "buffered";
    case ZCCL_PROF_PATH_COPY:
        return "copy";
    case ZCCL_PROF_PATH_TX:
        return "msproftx";
    default:
        return "none";
    }
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void prof_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p);
        } else {
            fputc(*p, f);
        }
    }
    fputc('"', f);
}

static int prof_cmp_start(const void *a, const void *b)
{
    const zccl_prof_rec_t *x = a;
    const zccl_prof_rec_t *y = b;
    return x->t_start < y->t_start ? -1 : x->t_start > y->t_start;
}

static int prof_kept(const zccl_prof_rec_t *r, const prof_filter_t *f)
{
    if (f == NULL || (r->rank < 0 && r->device < 0)) {
        return 1;
    }
    for (uint32_t i = 0; i < f->ndevs; i++) {
        if ((int32_t)f->devs[i] == r->device) {
            return 1;
        }
    }
    return 0;
}

/* The file (rank) a record belongs to: its rank, or for a copy the rank that
 * ran ops on its device, or the only rank of the process. */
static int prof_owner(const zccl_prof_rec_t *r, const zccl_prof_rec_t *recs, size_t n)
{
    if (r->rank >= 0) {
        return r->rank;
    }
    int only = PROF_COPIES_RANK;
    int many = 0;
    for (size_t i = 0; i < n; i++) {
        if (recs[i].rank < 0) {
            continue;
        }
        if (recs[i].device == r->device) {
            return recs[i].rank;
        }
        if (only == PROF_COPIES_RANK) {
            only = recs[i].rank;
        } else if (only != recs[i].rank) {
            many = 1;
        }
    }
    return many ? PROF_COPIES_RANK : only;
}

static double prof_us(uint64_t ns)
{
    return (double)ns / 1000.0;
}

/* A mark ("ph":"i") or range of the program, named by its message. */
static void prof_tx_event(FILE *f, const zccl_prof_rec_t *r, int pid, int tid)
{
    int mark = r->t_end == r->t_start;
    fprintf(f, ",\n{\"ph\":\"%s\",\"cat\":\"msproftx\",\"name\":", mark ? "i" : "X");
    prof_json_str(f, r->comm);
    fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,", pid, tid, prof_us(r->t_start));
    if (mark) {
        fprintf(f, "\"s\":\"t\",");
    } else {
        fprintf(f, "\"dur\":%.3f,", prof_us(r->t_end - r->t_start));
    }
    fprintf(f, "\"args\":{\"kind\":\"%s\",\"device\":%d}}", r->op, (int)r->device);
}

static void prof_event(FILE *f, const zccl_prof_rec_t *r, int pid, int tid)
{
    if (r->path == ZCCL_PROF_PATH_TX) {
        prof_tx_event(f, r, pid, tid);
        return;
    }
    fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", r->rank >= 0 ? "hccl" : "copy");
    prof_json_str(f, r->op);
    fprintf(f,
            ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"rank\":%d,\"comm\":", pid,
            tid, prof_us(r->t_start), prof_us(r->t_end - r->t_start), (int)r->rank);
    prof_json_str(f, r->comm);
    fprintf(f, ",\"op\":");
    prof_json_str(f, r->op);
    fprintf(f,
            ",\"dtype\":\"%s\",\"count\":%llu,\"bytes\":%llu,\"send_bytes\":%llu,"
            "\"recv_bytes\":%llu,\"path\":\"%s\",\"stream\":\"0x%llx\",\"device\":%d,"
            "\"nranks\":%d,\"peer\":%d,\"seq\":%u,\"enqueue_us\":%.3f,\"start_us\":%.3f,"
            "\"end_us\":%.3f,\"result\":%d}}",
            prof_dtype_name(r->dtype), (unsigned long long)r->count,
            (unsigned long long)ZC_MAX(r->send_bytes, r->recv_bytes),
            (unsigned long long)r->send_bytes, (unsigned long long)r->recv_bytes,
            prof_path_name(r->path), (unsigned long long)r->stream, (int)r->device, (int)r->nranks,
            (int)r->peer, (unsigned)r->seq, prof_us(r->t_enq), prof_us(r->t_start),
            prof_us(r->t_end), (int)r->result);
}

/* Write the records owned by rank (owner[] says whose each is) to one file. */
static aclError prof_write_rank(const char *dir, unsigned run, int rank,
                                const zccl_prof_rec_t *recs, const int *owner, size_t n,
                                uint64_t dropped)
{
    char path[4200];
    char who[32];
    if (rank >= 0) {
        snprintf(who, sizeof(who), "%d", rank);
    } else {
        snprintf(who, sizeof(who), "copies");
    }
    snprintf(path, sizeof(path), "%s/zccl-rank%s-pid%d-%u.trace.json", dir, who, (int)getpid(),
             run);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        ZC_WARN(ZC_SUB_INIT, "profiling: cannot write %s: %s", path, strerror(errno));
        return ACL_ERROR_WRITE_FILE;
    }
    int pid = rank >= 0 ? rank : (int)getpid();
    fprintf(f,
            "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"zccl\",\"pid\":%d,"
            "\"dropped_records\":%llu},\n\"traceEvents\":[\n",
            (int)getpid(), (unsigned long long)dropped);
    fprintf(
        f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", pid);
    char pname[64];
    snprintf(pname, sizeof(pname), rank >= 0 ? "rank %s" : "%s (no rank)", who);
    prof_json_str(f, pname);
    fprintf(f,
            "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,"
            "\"args\":{\"sort_index\":%d}}",
            pid, rank >= 0 ? rank : 1 << 20);
    uint64_t streams[PROF_MAX_STREAMS];
    int nstreams = 0;
    for (size_t i = 0; i < n; i++) {
        if (owner[i] != rank) {
            continue;
        }
        int tid = 0;
        while (tid < nstreams && streams[tid] != recs[i].stream) {
            tid++;
        }
        if (tid == nstreams && nstreams < PROF_MAX_STREAMS) {
            streams[nstreams++] = recs[i].stream;
            if (recs[i].path == ZCCL_PROF_PATH_TX) {
                fprintf(f,
                        ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                        "\"args\":{\"name\":\"msproftx marks and ranges\"}}",
                        pid, tid + 1);
            } else {
                fprintf(f,
                        ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                        "\"args\":{\"name\":\"stream 0x%llx%s (device %d)\"}}",
                        pid, tid + 1, (unsigned long long)recs[i].stream,
                        recs[i].stream == 0 ? " default" : "", (int)recs[i].device);
            }
        }
        prof_event(f, &recs[i], pid, ZC_MIN(tid, PROF_MAX_STREAMS - 1) + 1);
    }
    fprintf(f, "\n]}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        ZC_WARN(ZC_SUB_INIT, "profiling: writing %s failed", path);
        return ACL_ERROR_WRITE_FILE;
    }
    ZC_INFO(ZC_SUB_INIT, "profiling: wrote %s", path);
    return ACL_SUCCESS;
}

aclError prof_trace_write(const char *dir, unsigned run, zccl_prof_rec_t *recs, size_t n,
                          uint64_t dropped, const prof_filter_t *filter)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (prof_kept(&recs[i], filter)) {
            recs[kept++] = recs[i];
        }
    }
    n = kept;
    qsort(recs, n, sizeof(*recs), prof_cmp_start);
    if (dropped != 0) {
        ZC_WARN(ZC_SUB_INIT, "profiling: %llu records did not fit the buffer and are missing",
                (unsigned long long)dropped);
    }
    int *owner = malloc((n != 0 ? n : 1) * sizeof(*owner));
    if (owner == NULL) {
        ZC_WARN(ZC_SUB_INIT, "profiling: out of memory writing %zu records", n);
        return ACL_ERROR_WRITE_FILE;
    }
    for (size_t i = 0; i < n; i++) {
        owner[i] = prof_owner(&recs[i], recs, n);
    }
    aclError rc = ACL_SUCCESS;
    for (size_t i = 0; i < n && rc == ACL_SUCCESS; i++) {
        int first = 1;
        for (size_t j = 0; j < i && first; j++) {
            first = owner[j] != owner[i];
        }
        if (first) {
            rc = prof_write_rank(dir, run, owner[i], recs, owner, n, dropped);
        }
    }
    free(owner);
    return rc;
}

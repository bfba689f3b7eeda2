/*
 * Every collective on a communicator that may span hosts, checked against a
 * serial reference: an ordinary zccl program, one process per rank, meant to
 * be started inside network namespaces (each one a "host").
 *
 * Launch: under mpirun (the root info goes out with MPI_Bcast), or, with
 * ZT_ROOTINFO=<file> ZT_RANK=<r> ZT_NRANKS=<n>, through a file that rank 0
 * writes and the others poll (any launcher that shares a directory).
 * ZT_HOSTS=<h>: fail unless the communicator spans exactly h hosts.
 * ZT_QUICK=1: fewer dtypes and counts.
 *
 * Data are small integers, exact in every type, so any reduction order gives
 * the reference exactly; a last case reduces random floats (where order
 * shows) and checks that every rank got the same bits. Prints one line per
 * failure and "mh_coll: rank R: N cases, F failures, B bytes to other hosts".
 * Exit status: 0 when every case passed.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hccl/hccl.h"
#include "core/hccl_test_api.h"
#include "zt_check.h"
#include "zt_launch.h"

#define MH_MAXR 64

typedef struct {
    zt_env_t env;
    int cases;
    int fails;
    int quick;
} mh_t;

static const int mh_dtypes[] = {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_FP32,
                                HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_BFP16, HCCL_DATA_TYPE_INT64,
                                HCCL_DATA_TYPE_FP64};
static const int mh_ops[] = {HCCL_REDUCE_SUM, HCCL_REDUCE_PROD, HCCL_REDUCE_MAX, HCCL_REDUCE_MIN};

/* Rank r's element i for op (PROD: 1, 2 or -1 so products stay exact). */
static double mh_val(int r, uint64_t i, int op, uint64_t salt)
{
    uint64_t k = (uint64_t)r * 7u + i * 3u + salt;
    if (op == HCCL_REDUCE_PROD) {
        return k % 5 == 0 ? 2.0 : k % 5 == 1 ? -1.0 : 1.0;
    }
    return (double)(int)(k % 11) - 5.0;
}

static void mh_put(void *buf, uint64_t i, int dtype, double v)
{
    switch (dtype) {
    case HCCL_DATA_TYPE_INT8:
        ((int8_t *)buf)[i] = (int8_t)(int64_t)v;
        break;
    case HCCL_DATA_TYPE_INT32:
        ((int32_t *)buf)[i] = (int32_t)(int64_t)v;
        break;
    case HCCL_DATA_TYPE_INT64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case HCCL_DATA_TYPE_FP32:
        ((float *)buf)[i] = (float)v;
        break;
    case HCCL_DATA_TYPE_FP64:
        ((double *)buf)[i] = v;
        break;
    case HCCL_DATA_TYPE_FP16:
        ((uint16_t *)buf)[i] = zt_fp16_from_float((float)v);
        break;
    default:
        ((uint16_t *)buf)[i] = zt_bf16_from_float((float)v);
        break;
    }
}

/* Wrap like the library: integer results modulo 2^bits. */
static double mh_wrap(int dtype, double v)
{
    char tmp[8];
    mh_put(tmp, 0, dtype, v);
    if (dtype == HCCL_DATA_TYPE_INT8) {
        return (double)((int8_t *)tmp)[0];
    }
    return v;
}

static double mh_reduce(int op, int n, uint64_t i, uint64_t salt, int dtype)
{
    double a = mh_val(0, i, op, salt);
    for (int r = 1; r < n; r++) {
        double b = mh_val(r, i, op, salt);
        a = op == HCCL_REDUCE_SUM    ? a + b
            : op == HCCL_REDUCE_PROD ? a * b
            : op == HCCL_REDUCE_MAX  ? (a > b ? a : b)
                                     : (a < b ? a : b);
    }
    return mh_wrap(dtype, a);
}

static void mh_fail(mh_t *m, const char *what, int dtype, int op, uint64_t count, int zc,
                    uint64_t at, const char *why)
{
    m->fails++;
    if (m->fails <= 20) {
        printf("mh_coll: rank %d: FAIL %s dtype %d op %d count %llu %s at %llu: %s\n", m->env.rank,
               what, dtype, op, (unsigned long long)count, zc ? "zero-copy" : "plain",
               (unsigned long long)at, why);
    }
}

/* Compare count elements of got with the expected values want(i). */
static int mh_check(mh_t *m, const char *what, const void *got, int dtype, int op, uint64_t count,
                    int zc, double (*want)(void *, uint64_t), void *arg)
{
    size_t es = zt_dtype_size(dtype);
    char w[8];
    for (uint64_t i = 0; i < count; i++) {
        mh_put(w, 0, dtype, want(arg, i));
        if (memcmp((const char *)got + i * es, w, es) != 0) {
            mh_fail(m, what, dtype, op, count, zc, i, "wrong value");
            return 1;
        }
    }
    return 0;
}

static int mh_sync(mh_t *m, HcclResult r, const char *what)
{
    aclError e = r == HCCL_SUCCESS ? aclrtSynchronizeStream(m->env.stream) : ACL_SUCCESS;
    if (r != HCCL_SUCCESS || e != ACL_SUCCESS) {
        printf("mh_coll: rank %d: FAIL %s: call %d, sync %d\n", m->env.rank, what, (int)r, (int)e);
        m->fails++;
        return 1;
    }
    m->cases++;
    return 0;
}

/* Buffers: send and recv halves of the plain or activated arena. */
static void mh_bufs(mh_t *m, int zc, char **send, char **recv)
{
    char *base = zc ? (char *)m->env.zc.va : (char *)m->env.plain;
    *send = base + 64;
    *recv = base + m->env.half + 64;
}

#include "mh_cases.h"

static int mh_rootinfo(int rank, HcclRootInfo *ri, int *mpi)
{
    const char *path = getenv("ZT_ROOTINFO");
    *mpi = path == NULL;
    if (*mpi) {
        if (rank == 0 && HcclGetRootInfo(ri) != HCCL_SUCCESS) {
            return -1;
        }
        MPI_Bcast(ri, sizeof(*ri), MPI_BYTE, 0, MPI_COMM_WORLD);
        return 0;
    }
    char tmp[4200];
    if (rank == 0) {
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (HcclGetRootInfo(ri) != HCCL_SUCCESS || f == NULL ||
            fwrite(ri, sizeof(*ri), 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
            return -1;
        }
        return 0;
    }
    for (int i = 0; i < 6000; i++) {
        FILE *f = fopen(path, "rb");
        if (f != NULL) {
            size_t got = fread(ri, sizeof(*ri), 1, f);
            fclose(f);
            if (got == 1) {
                return 0;
            }
        }
        usleep(10000);
    }
    return -1;
}

int main(int argc, char **argv)
{
    int rank = getenv("ZT_RANK") != NULL ? atoi(getenv("ZT_RANK")) : 0;
    int nranks = getenv("ZT_NRANKS") != NULL ? atoi(getenv("ZT_NRANKS")) : 1;
    if (getenv("ZT_ROOTINFO") == NULL) {
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    }
    HcclRootInfo ri;
    int mpi = 0;
    mh_t m;
    memset(&m, 0, sizeof(m));
    m.quick = getenv("ZT_QUICK") != NULL;
    if (mh_rootinfo(rank, &ri, &mpi) != 0 || zt_env_open(&m.env, rank, nranks, &ri, NULL) != 0) {
        printf("mh_coll: rank %d: FAIL init\n", rank);
        return 1;
    }
    int hosts = zccl_comm_hosts(m.env.comm);
    const char *want = getenv("ZT_HOSTS");
    if (want != NULL && atoi(want) != hosts) {
        printf("mh_coll: rank %d: FAIL the communicator spans %d hosts, want %s\n", rank, hosts,
               want);
        m.fails++;
    }
    if (zt_env_arena(&m.env, (size_t)MH_BIG * 8 + (size_t)4099 * 8 * (size_t)nranks + 4096) != 0) {
        printf("mh_coll: rank %d: FAIL arena\n", rank);
        return 1;
    }
    mh_run_all(&m);
    printf("mh_coll: rank %d/%d on %d hosts: %d cases, %d failures, %llu bytes to other hosts\n",
           rank, nranks, hosts, m.cases, m.fails,
           (unsigned long long)zccl_comm_net_bytes(m.env.comm));
    fflush(stdout);
    if (zt_env_close(&m.env) != 0) {
        m.fails++;
    }
    if (mpi) {
        MPI_Finalize();
    }
    return m.fails == 0 ? 0 : 1;
}

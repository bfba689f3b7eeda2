/*
 * The MPI baseline: the MPI collective that matches each zccl collective,
 * run on the same sizes, types and buffers in the same process (-m 1), so the
 * table compares both libraries side by side under identical conditions.
 *
 * Each wrapper takes the bench_op_t the harness shaped for zccl, out of place
 * (the harness never hands MPI an in-place op: MPI spells in place with
 * MPI_IN_PLACE, differently per collective, and the baseline needs no such
 * variant). fp16 and bf16 have no MPI datatype; the harness skips the
 * baseline for them.
 */
#include "harness.h"

MPI_Datatype bench_mpi_dtype(int dtype)
{
    switch (dtype) {
    case HCCL_DATA_TYPE_INT8:
        return MPI_INT8_T;
    case HCCL_DATA_TYPE_UINT8:
        return MPI_UINT8_T;
    case HCCL_DATA_TYPE_INT16:
        return MPI_INT16_T;
    case HCCL_DATA_TYPE_UINT16:
        return MPI_UINT16_T;
    case HCCL_DATA_TYPE_INT32:
        return MPI_INT32_T;
    case HCCL_DATA_TYPE_UINT32:
        return MPI_UINT32_T;
    case HCCL_DATA_TYPE_INT64:
        return MPI_INT64_T;
    case HCCL_DATA_TYPE_UINT64:
        return MPI_UINT64_T;
    case HCCL_DATA_TYPE_FP32:
        return MPI_FLOAT;
    case HCCL_DATA_TYPE_FP64:
        return MPI_DOUBLE;
    default:
        return MPI_DATATYPE_NULL;
    }
}

MPI_Op bench_mpi_op(int redop)
{
    switch (redop) {
    case HCCL_REDUCE_PROD:
        return MPI_PROD;
    case HCCL_REDUCE_MAX:
        return MPI_MAX;
    case HCCL_REDUCE_MIN:
        return MPI_MIN;
    default:
        return MPI_SUM;
    }
}

/* MPI counts are int: the harness refuses sizes past INT_MAX elements when -m 1. */
static int bench_mpi_count(uint64_t count)
{
    return (int)count;
}

int bench_mpi_allreduce(const bench_op_t *op, MPI_Comm comm)
{
    return MPI_Allreduce(op->send, op->recv, bench_mpi_count(op->count), bench_mpi_dtype(op->dtype),
                         bench_mpi_op(op->redop), comm);
}

int bench_mpi_allgather(const bench_op_t *op, MPI_Comm comm)
{
    MPI_Datatype t = bench_mpi_dtype(op->dtype);
    int n = bench_mpi_count(op->count);
    return MPI_Allgather(op->send, n, t, op->recv, n, t, comm);
}

int bench_mpi_reduce_scatter(const bench_op_t *op, MPI_Comm comm)
{
    return MPI_Reduce_scatter_block(op->send, op->recv, bench_mpi_count(op->count),
                                    bench_mpi_dtype(op->dtype), bench_mpi_op(op->redop), comm);
}

int bench_mpi_broadcast(const bench_op_t *op, MPI_Comm comm)
{
    return MPI_Bcast(op->recv, bench_mpi_count(op->count), bench_mpi_dtype(op->dtype),
                     (int)op->root, comm);
}

int bench_mpi_reduce(const bench_op_t *op, MPI_Comm comm)
{
    return MPI_Reduce(op->send, op->recv, bench_mpi_count(op->count), bench_mpi_dtype(op->dtype),
                      bench_mpi_op(op->redop), (int)op->root, comm);
}

int bench_mpi_alltoall(const bench_op_t *op, MPI_Comm comm)
{
    MPI_Datatype t = bench_mpi_dtype(op->dtype);
    int n = bench_mpi_count(op->count);
    return MPI_Alltoall(op->send, n, t, op->recv, n, t, comm);
}

int bench_mpi_sendrecv(const bench_op_t *op, MPI_Comm comm)
{
    MPI_Datatype t = bench_mpi_dtype(op->dtype);
    int n = bench_mpi_count(op->count);
    int next = (op->rank + 1) % op->nranks;
    int prev = (op->rank + op->nranks - 1) % op->nranks;
    return MPI_Sendrecv(op->send, n, t, next, 0, op->recv, n, t, prev, 0, comm, MPI_STATUS_IGNORE);
}

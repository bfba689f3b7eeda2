/*
 * The MPI side of the compat programs, as CANN's samples do it: MPI starts
 * the processes and gives each its rank (one device per process, device =
 * rank), and broadcasts the root info; nothing else crosses MPI. C11 / C++11.
 */
#ifndef COMPAT_MPI_H
#define COMPAT_MPI_H

#include "compat.h"
#include "mpi.h"

/* MPI_Init, this process's rank and the process count, aclInit, aclrtSetDevice(rank). */
static inline int compat_mpi_start(int *argc, char ***argv, int *rank, int *size)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    ACLCHECK(aclInit(NULL));
    ACLCHECK(aclrtSetDevice(*rank));
    return 0;
}

/* Rank 0 makes the root info; MPI_Bcast hands it to every rank. */
static inline int compat_root_info(int rank, HcclRootInfo *root)
{
    if (rank == 0) {
        HCCLCHECK(HcclGetRootInfo(root));
    }
    MPI_Bcast(root, HCCL_ROOT_INFO_BYTES, MPI_CHAR, 0, MPI_COMM_WORLD);
    return 0;
}

#endif /* COMPAT_MPI_H */

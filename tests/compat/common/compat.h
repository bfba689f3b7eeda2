/*
 * Shared bits of the compat programs, written the way CANN's samples are:
 * check macros that print the failing call and return its code, and the
 * path summary each program prints before HcclCommDestroy.
 *
 * The summary comes from the library's own "zccl stats:" line when
 * ZCCL_PRINT_STATS=1 is honoured; as a fallback it reads zccl's internal
 * counters through weak symbols, so the programs still build and run
 * against a library that does not have them (CANN's: nothing is printed).
 * C11 and C++11.
 */
#ifndef COMPAT_H
#define COMPAT_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "hccl/hccl.h"

#define ACLCHECK(call)                                                                             \
    do {                                                                                           \
        aclError ret_ = (call);                                                                    \
        if (ret_ != ACL_SUCCESS) {                                                                 \
            printf("acl call failed %s:%d: %s returned %d\n", __FILE__, __LINE__, #call,           \
                   (int)ret_);                                                                     \
            return (int)ret_;                                                                      \
        }                                                                                          \
    } while (0)

#define HCCLCHECK(call)                                                                            \
    do {                                                                                           \
        HcclResult ret_ = (call);                                                                  \
        if (ret_ != HCCL_SUCCESS) {                                                                \
            printf("hccl call failed %s:%d: %s returned %d\n", __FILE__, __LINE__, #call,          \
                   (int)ret_);                                                                     \
            return (int)ret_;                                                                      \
        }                                                                                          \
    } while (0)

#ifdef __cplusplus
extern "C" {
#endif
uint64_t zccl_comm_buffered_ops(HcclComm comm) __attribute__((weak));
uint64_t zccl_comm_zero_copy_ops(HcclComm comm) __attribute__((weak));
#ifdef __cplusplus
}
#endif

/* Print "compat stats: rank R comm NAME: Z zero-copy ops, B buffered ops" when
 * zccl's counters are there (the driver prefers the library's own line). */
static inline void compat_stats(HcclComm comm, int rank, const char *name)
{
    if (zccl_comm_buffered_ops != NULL && zccl_comm_zero_copy_ops != NULL) {
        printf("compat stats: rank %d comm %s: %llu zero-copy ops, %llu buffered ops\n", rank, name,
               (unsigned long long)zccl_comm_zero_copy_ops(comm),
               (unsigned long long)zccl_comm_buffered_ops(comm));
        fflush(stdout);
    }
}

/* Physical memory properties for device memory of device (huge pages), as
 * CANN's VMM samples fill them. */
static inline void compat_phys_prop(aclrtPhysicalMemProp *prop, int device)
{
    prop->handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop->allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop->memAttr = ACL_HBM_MEM_HUGE;
    prop->location.id = (uint32_t)device;
    prop->location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop->reserve = 0;
}

/* Report a check: "rank R: WHAT: check_result: success|fail (N wrong)". */
static inline int compat_report(int rank, const char *what, size_t wrong)
{
    printf("rank %d: %s: check_result: %s", rank, what, wrong == 0 ? "success" : "fail");
    if (wrong != 0) {
        printf(" (%zu wrong)", wrong);
    }
    printf("\n");
    fflush(stdout);
    return wrong == 0 ? 0 : 1;
}

#endif /* COMPAT_H */

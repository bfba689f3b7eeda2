// A framework's zero-copy allocator (C++11): one large reservation (flags 1,
// as a framework passes), registered once with HcclCommSetMemoryRange
// (flags 1) on the world group; the pool grows by 2 MiB segments, each mapped
// and activated on its own when a tensor needs it, so tensors span segments.
// A second process group (HcclCreateSubCommConfig, ranks reversed) uses the
// same pool without registering it again. Collectives on both groups are
// checked element by element and must all run zero-copy.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "compat_mpi.h"
#include "hccl/hccl_types.h"

namespace
{

const size_t kSegment = static_cast<size_t>(2) << 20;

class Pool
{
  public:
    Pool(HcclComm comm, int device) : comm_(comm), device_(device) {}

    int Init(size_t reserve)
    {
        void *va = nullptr;
        ACLCHECK(aclrtReserveMemAddress(&va, reserve, 0, nullptr, 1));
        base_ = static_cast<char *>(va);
        reserved_ = reserve;
        HCCLCHECK(HcclCommSetMemoryRange(comm_, base_, reserve, 0, 1));
        return 0;
    }

    // Bump allocation (512-byte aligned); segments are activated on demand.
    void *Alloc(size_t bytes)
    {
        size_t at = (used_ + 511) / 512 * 512;
        if (at + bytes > reserved_ || Expand(at + bytes) != 0) {
            return nullptr;
        }
        used_ = at + bytes;
        return base_ + at;
    }

    int Release()
    {
        for (size_t i = 0; i < handles_.size(); ++i) {
            HCCLCHECK(HcclCommDeactivateCommMemory(comm_, base_ + i * kSegment));
            ACLCHECK(aclrtUnmapMem(base_ + i * kSegment));
            ACLCHECK(aclrtFreePhysical(handles_[i]));
        }
        HCCLCHECK(HcclCommUnsetMemoryRange(comm_, base_));
        ACLCHECK(aclrtReleaseMemAddress(base_));
        return 0;
    }

    size_t Segments() const
    {
        return handles_.size();
    }

  private:
    int Expand(size_t end)
    {
        aclrtPhysicalMemProp prop;
        std::memset(&prop, 0, sizeof(prop));
        compat_phys_prop(&prop, static_cast<uint32_t>(device_));
        while (handles_.size() * kSegment < end) {
            char *seg = base_ + handles_.size() * kSegment;
            aclrtDrvMemHandle h = nullptr;
            ACLCHECK(aclrtMallocPhysical(&h, kSegment, &prop, 0));
            ACLCHECK(aclrtMapMem(seg, kSegment, 0, h, 0));
            HCCLCHECK(HcclCommActivateCommMemory(comm_, seg, kSegment, 0, h, 0));
            handles_.push_back(h);
        }
        return 0;
    }

    HcclComm comm_;
    int device_;
    char *base_ = nullptr;
    size_t reserved_ = 0;
    size_t used_ = 0;
    std::vector<aclrtDrvMemHandle> handles_;
};

int Check(int rank, const char *what, const float *got, size_t n, float (*want)(size_t, int),
          int arg)
{
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
        wrong += got[i] != want(i, arg);
    }
    return compat_report(rank, what, wrong);
}

float SumWant(size_t i, int n)
{
    return static_cast<float>(n * static_cast<int>(i % 512) + n * (n - 1) / 2);
}
float GatherWant(size_t i, int per)
{
    return static_cast<float>(i / static_cast<size_t>(per)) + static_cast<float>(i % 97);
}
float BcastWant(size_t i, int)
{
    return static_cast<float>(i % 4093) * 0.5f;
}

} // namespace

int main(int argc, char **argv)
{
    int rank = 0;
    int size = 0;
    if (compat_mpi_start(&argc, &argv, &rank, &size) != 0) {
        return 1;
    }
    HcclRootInfo root;
    if (compat_root_info(rank, &root) != 0) {
        return 1;
    }
    HcclComm world = nullptr;
    HCCLCHECK(HcclCommInitRootInfo(static_cast<uint32_t>(size), &root, static_cast<uint32_t>(rank),
                                   &world));
    // The second group: every rank, in reverse order.
    std::vector<uint32_t> ids(static_cast<size_t>(size));
    for (int i = 0; i < size; ++i) {
        ids[static_cast<size_t>(i)] = static_cast<uint32_t>(size - 1 - i);
    }
    HcclCommConfig cfg;
    HcclCommConfigInit(&cfg);
    std::strcpy(cfg.hcclCommName, "pg_reversed");
    HcclComm pg = nullptr;
    HCCLCHECK(HcclCreateSubCommConfig(&world, static_cast<uint32_t>(size), ids.data(), 1,
                                      static_cast<uint32_t>(size - 1 - rank), &cfg, &pg));
    aclrtStream stream = nullptr;
    ACLCHECK(aclrtCreateStream(&stream));

    Pool pool(world, rank);
    if (pool.Init(static_cast<size_t>(256) << 20) != 0) {
        return 1;
    }
    int bad = 0;
    // Tensors of 3 MiB + 68 B, 3 MiB + 68 B, 1.5 MiB per rank and its gather.
    const size_t n1 = (static_cast<size_t>(3) << 20) / 4 + 17;
    float *a = static_cast<float *>(pool.Alloc(n1 * 4));
    float *b = static_cast<float *>(pool.Alloc(n1 * 4));
    const size_t per = (static_cast<size_t>(3) << 19) / 4;
    float *c = static_cast<float *>(pool.Alloc(per * 4));
    float *d = static_cast<float *>(pool.Alloc(per * 4 * static_cast<size_t>(size)));
    if (a == nullptr || b == nullptr || c == nullptr || d == nullptr) {
        std::printf("pool allocation failed\n");
        return 1;
    }
    for (size_t i = 0; i < n1; ++i) {
        a[i] = static_cast<float>(static_cast<int>(i % 512) + rank);
    }
    HCCLCHECK(HcclAllReduce(a, b, n1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, world, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    bad |= Check(rank, "world allreduce across segments", b, n1, SumWant, size);
    // The reversed group's rank 0 is world rank size-1; gather in its order.
    const int pgRank = size - 1 - rank;
    for (size_t i = 0; i < per; ++i) {
        c[i] = static_cast<float>(pgRank) + static_cast<float>((pgRank * per + i) % 97);
    }
    HCCLCHECK(HcclAllGather(c, d, per, HCCL_DATA_TYPE_FP32, pg, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    bad |= Check(rank, "second group allgather", d, per * static_cast<size_t>(size), GatherWant,
                 static_cast<int>(per));
    for (size_t i = 0; i < n1; ++i) {
        a[i] = pgRank == 0 ? static_cast<float>(i % 4093) * 0.5f : -1.0f;
    }
    HCCLCHECK(HcclBroadcast(a, n1, HCCL_DATA_TYPE_FP32, 0, pg, stream));
    ACLCHECK(aclrtSynchronizeStream(stream));
    bad |= Check(rank, "second group broadcast", a, n1, BcastWant, 0);
    std::printf("rank %d: pool holds %zu segments\n", rank, pool.Segments());

    compat_stats(world, rank, "world");
    compat_stats(pg, rank, "pg_reversed");
    ACLCHECK(aclrtSynchronizeStream(stream));
    bad |= pool.Release();
    ACLCHECK(aclrtDestroyStream(stream));
    HCCLCHECK(HcclCommDestroy(pg));
    HCCLCHECK(HcclCommDestroy(world));
    ACLCHECK(aclFinalize());
    MPI_Finalize();
    return bad;
}

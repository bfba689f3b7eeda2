/*
 * The activated-memory CPU allocator: tensor storage that zccl's peers map,
 * so collectives on it are zero-copy.
 *
 * Layout. One range of address space is reserved (aclrtReserveMemAddress)
 * when the allocator is enabled. Physical memory (aclrtMallocPhysical, a
 * memfd whose pages arrive on first touch) is mapped into it in chunks, from
 * the bottom up, on demand: small blocks are carved from a shared chunk of
 * chunk_bytes, a block of a quarter chunk or more gets a chunk of its own, so
 * no block ever straddles two chunks (a zero-copy buffer must lie in one
 * activated block). The range is set (HcclCommSetMemoryRange) and every chunk
 * activated (HcclCommActivateCommMemory) through the first communicator of
 * the process; ranges and blocks are process-wide, so every group sees them.
 * Freed blocks go back to a free list of their size class (four classes per
 * power of two, 64 B minimum) and are reused; memory is never unmapped while
 * the process runs. When the range is full or a chunk cannot be made, the
 * block comes from torch's default allocator: such a tensor takes zccl's
 * buffered path and stays correct (counted in the statistics).
 */
#include "zpt.hpp"

#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <unordered_map>

namespace zccl_torch
{

namespace
{

constexpr size_t zpt_gran = 2u << 20;

struct zpt_chunk {
    char *va;
    size_t size;
    aclrtDrvMemHandle handle;
};

struct zpt_alloc_state {
    std::mutex mu;
    bool enabled = false;
    char *base = nullptr;
    size_t reserve = 0;
    size_t chunk_bytes = 0;
    size_t top = 0; /* bytes of the range given to chunks */
    std::vector<zpt_chunk> chunks;
    char *bump = nullptr;
    char *bump_end = nullptr;
    std::unordered_map<size_t, std::vector<void *>> free_lists;
    std::unordered_map<void *, size_t> live;
    std::vector<HcclComm> comms;    /* every live communicator */
    std::vector<HcclComm> attached; /* those with the range set */
    uint64_t in_use = 0, cached = 0, fallbacks = 0, activate_failures = 0;
};

/* Never destroyed: tensors may be freed during interpreter teardown. */
zpt_alloc_state &zpt_state()
{
    static zpt_alloc_state *s = new zpt_alloc_state();
    return *s;
}

size_t zpt_round(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

size_t zpt_class(size_t n)
{
    if (n <= 4096) {
        return zpt_round(n, 64);
    }
    size_t p = 1;
    while (p <= n / 2) {
        p <<= 1;
    }
    return zpt_round(n, std::max<size_t>(p / 4, 64));
}

void zpt_activate(zpt_alloc_state &s, HcclComm comm, const zpt_chunk &c)
{
    HcclResult r = HcclCommActivateCommMemory(comm, c.va, c.size, 0, c.handle, 0);
    if (r != HCCL_SUCCESS) {
        if (s.activate_failures++ == 0) {
            TORCH_WARN("zccl: HcclCommActivateCommMemory of a ", c.size,
                       "-byte chunk failed: ", zpt_hccl_name(r),
                       "; tensors in it take the buffered path");
        }
    }
}

/* A new chunk of size bytes at the top of the range; nullptr when full. */
zpt_chunk *zpt_chunk_new(zpt_alloc_state &s, size_t size)
{
    size = zpt_round(size, zpt_gran);
    if (size > s.reserve - s.top) {
        return nullptr;
    }
    aclrtPhysicalMemProp prop = {};
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_HOST;
    prop.location.id = 0;
    zpt_chunk c = {s.base + s.top, size, nullptr};
    if (aclrtMallocPhysical(&c.handle, size, &prop, 0) != ACL_SUCCESS) {
        return nullptr;
    }
    if (aclrtMapMem(c.va, size, 0, c.handle, 0) != ACL_SUCCESS) {
        (void)aclrtFreePhysical(c.handle);
        return nullptr;
    }
    s.top += size;
    if (!s.attached.empty()) {
        zpt_activate(s, s.attached.front(), c);
    }
    s.chunks.push_back(c);
    return &s.chunks.back();
}

void *zpt_carve(zpt_alloc_state &s, size_t cls)
{
    auto it = s.free_lists.find(cls);
    if (it != s.free_lists.end() && !it->second.empty()) {
        void *p = it->second.back();
        it->second.pop_back();
        s.cached -= cls;
        return p;
    }
    if (cls >= s.chunk_bytes / 4) {
        zpt_chunk *c = zpt_chunk_new(s, cls);
        return c == nullptr ? nullptr : c->va;
    }
    if (s.bump == nullptr || (size_t)(s.bump_end - s.bump) < cls) {
        zpt_chunk *c = zpt_chunk_new(s, s.chunk_bytes);
        if (c == nullptr) {
            return nullptr;
        }
        s.bump = c->va;
        s.bump_end = c->va + c->size;
    }
    void *p = s.bump;
    s.bump += cls;
    return p;
}

void zpt_free(void *p)
{
    if (p == nullptr) {
        return;
    }
    zpt_alloc_state &s = zpt_state();
    std::lock_guard<std::mutex> g(s.mu);
    auto it = s.live.find(p);
    if (it == s.live.end()) {
        return;
    }
    size_t cls = it->second;
    s.live.erase(it);
    s.in_use -= cls;
    s.cached += cls;
    s.free_lists[cls].push_back(p);
}

class zpt_allocator final : public c10::Allocator
{
  public:
    c10::DataPtr allocate(size_t n) override
    {
        c10::Device dev(c10::DeviceType::CPU);
        if (n == 0) {
            return {nullptr, nullptr, &zpt_free, dev};
        }
        zpt_alloc_state &s = zpt_state();
        size_t cls = zpt_class(n);
        {
            std::lock_guard<std::mutex> g(s.mu);
            void *p = zpt_carve(s, cls);
            if (p != nullptr) {
                s.live[p] = cls;
                s.in_use += cls;
                return {p, p, &zpt_free, dev};
            }
            if (s.fallbacks++ == 0) {
                TORCH_WARN("zccl: the activated range is full (", s.top, " of ", s.reserve,
                           " bytes in chunks); further tensors use the default allocator "
                           "and zccl's buffered path");
            }
        }
        return c10::GetDefaultCPUAllocator()->allocate(n);
    }

    c10::DeleterFnPtr raw_deleter() const override
    {
        return &zpt_free;
    }

    void copy_data(void *dest, const void *src, std::size_t count) const override
    {
        default_copy_data(dest, src, count);
    }
};

zpt_allocator zpt_alloc_instance;

/* Memory ranges and activated blocks belong to the process (as in CANN):
 * the range is set, and each chunk activated, through the first attached
 * communicator only; every other communicator of the process, existing or
 * later, sees them. Setting the range again through another one is refused. */
void zpt_attach_locked(zpt_alloc_state &s, HcclComm comm)
{
    if (s.attached.empty()) {
        HcclResult r = HcclCommSetMemoryRange(comm, s.base, s.reserve, 0, 0);
        if (r != HCCL_SUCCESS) {
            zpt_throw_hccl("HcclCommSetMemoryRange", r);
        }
        for (const zpt_chunk &c : s.chunks) {
            zpt_activate(s, comm, c);
        }
    }
    s.attached.push_back(comm);
}

} // namespace

void zpt_alloc_enable(size_t reserve_bytes, size_t chunk_bytes)
{
    zpt_alloc_state &s = zpt_state();
    std::lock_guard<std::mutex> g(s.mu);
    if (s.enabled) {
        return;
    }
    TORCH_CHECK(chunk_bytes >= zpt_gran && reserve_bytes >= chunk_bytes,
                "zccl: use_activated_memory: chunk_bytes must be at least 2 MiB and "
                "reserve_bytes at least chunk_bytes; got ",
                chunk_bytes, " and ", reserve_bytes);
    zpt_acl_init();
    s.reserve = zpt_round(reserve_bytes, zpt_gran);
    s.chunk_bytes = zpt_round(chunk_bytes, zpt_gran);
    void *va = nullptr;
    aclError e = aclrtReserveMemAddress(&va, s.reserve, 0, nullptr, 0);
    if (e != ACL_SUCCESS) {
        zpt_throw_acl("aclrtReserveMemAddress(" + std::to_string(s.reserve) + " bytes)", e);
    }
    s.base = (char *)va;
    for (HcclComm comm : s.comms) {
        zpt_attach_locked(s, comm); /* collective on each existing group */
    }
    s.enabled = true;
    c10::SetCPUAllocator(&zpt_alloc_instance, /*priority=*/0);
}

bool zpt_alloc_enabled()
{
    zpt_alloc_state &s = zpt_state();
    std::lock_guard<std::mutex> g(s.mu);
    return s.enabled;
}

bool zpt_alloc_contains(const void *p, size_t n)
{
    zpt_alloc_state &s = zpt_state();
    std::lock_guard<std::mutex> g(s.mu);
    const char *c = (const char *)p;
    for (const zpt_chunk &k : s.chunks) {
        if (c >= k.va && c < k.va + k.size) {
            return n <= (size_t)(k.va + k.size - c);
        }
    }
    return false;
}

void zpt_alloc_attach(HcclComm comm)
{
    zpt_alloc_state &s = zpt_state();
    std::lock_guard<std::mutex> g(s.mu);
    s.comms.push_back(comm);
    if (s.enabled) {
        zpt_attach_locked(s, comm);
    }
}

void zpt_alloc_detach(HcclComm comm)
{
    zpt_alloc_state &s = zpt_state();
    std::lock_guard<std::mutex> g(s.mu);
    s.comms.erase(std::remove(s.comms.begin(), s.comms.end(), comm), s.comms.end());
    auto it = std::find(s.attached.begin(), s.attached.end(), comm);
    if (it == s.attached.end()) {
        return;
    }
    s.attached.erase(it);
    if (!s.attached.empty()) {
        return; /* the range and its blocks stay visible to the others */
    }
    for (const zpt_chunk &c : s.chunks) {
        (void)HcclCommDeactivateCommMemory(comm, c.va);
    }
    (void)HcclCommUnsetMemoryRange(comm, s.base);
}

std::vector<uint64_t> zpt_alloc_stats()
{
    zpt_alloc_state &s = zpt_state();
    std::lock_guard<std::mutex> g(s.mu);
    return {s.reserve, s.top, s.in_use, s.cached, s.chunks.size(), s.fallbacks};
}

} // namespace zccl_torch

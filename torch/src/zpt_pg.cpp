/*
 * ProcessGroupZccl: communicator set-up through the c10d store, lanes,
 * issue, and shutdown.
 *
 * Init: group rank 0 makes the root info (HcclGetRootInfo) and sets it under
 * "zccl/root_info" in the group's store (torch hands every group its own
 * prefix); the others block on the store's get. The group's timeout becomes
 * the communicator's execution timeout (whole seconds, at least 1), so a
 * dead or stuck peer fails the op, and with it wait(), within it.
 * Device: the default group's rank modulo the device count, chosen once per
 * process and made current on every thread that creates a stream.
 */
#include "zpt.hpp"

#include <cstring>

namespace zccl_torch
{

static std::mutex zpt_dev_mu;
static int zpt_dev = -1;

/* aclInit once per process and a device for it; current on this thread. */
static int zpt_device_use(int rank)
{
    static thread_local int current = -1;
    {
        std::lock_guard<std::mutex> g(zpt_dev_mu);
        if (zpt_dev < 0) {
            zpt_acl_init();
            uint32_t n = 0;
            aclError e = aclrtGetDeviceCount(&n);
            if (e != ACL_SUCCESS || n == 0) {
                zpt_throw_acl("aclrtGetDeviceCount", e != ACL_SUCCESS ? e : -1);
            }
            zpt_dev = (int)((uint32_t)rank % n);
        }
    }
    if (current != zpt_dev) {
        aclError e = aclrtSetDevice(zpt_dev);
        if (e != ACL_SUCCESS) {
            zpt_throw_acl("aclrtSetDevice(" + std::to_string(zpt_dev) + ")", e);
        }
        current = zpt_dev;
    }
    return zpt_dev;
}

static void zpt_root_exchange(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                              HcclRootInfo *root)
{
    static const char *const key = "zccl/root_info";
    if (rank == 0) {
        HcclResult r = HcclGetRootInfo(root);
        if (r != HCCL_SUCCESS) {
            zpt_throw_hccl("HcclGetRootInfo", r);
        }
        const uint8_t *p = (const uint8_t *)root;
        store->set(key, std::vector<uint8_t>(p, p + sizeof(*root)));
        return;
    }
    std::vector<uint8_t> v = store->get(key);
    TORCH_CHECK(v.size() == sizeof(*root), "zccl: the root info in the store has ", v.size(),
                " bytes, expected ", sizeof(*root));
    std::memcpy(root, v.data(), sizeof(*root));
}

ProcessGroupZccl::ProcessGroupZccl(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), core_(std::make_shared<zpt_core>()), store_(store), recvd_(size, 0)
{
    TORCH_CHECK(size > 0 && rank >= 0 && rank < size, "zccl: rank ", rank,
                " is outside a group of ", size);
    core_->rank = rank;
    core_->size = size;
    core_->timeout = timeout.count() > 0 ? timeout : std::chrono::milliseconds(30 * 60 * 1000);
    core_->device = zpt_device_use(rank);

    HcclRootInfo root;
    zpt_root_exchange(store, rank, &root);
    HcclCommConfig cfg;
    HcclCommConfigInit(&cfg);
    long long secs = (core_->timeout.count() + 999) / 1000;
    cfg.hcclExecTimeOut = (int32_t)std::min<long long>(std::max<long long>(secs, 1), INT32_MAX);
    HcclResult r =
        HcclCommInitRootInfoConfig((uint32_t)size, &root, (uint32_t)rank, &cfg, &core_->comm);
    if (r != HCCL_SUCCESS) {
        zpt_throw_hccl("HcclCommInitRootInfoConfig (rank " + std::to_string(rank) + " of " +
                           std::to_string(size) + ")",
                       r);
    }
    (void)lane_stream(ZPT_LANE_COLL);
    zpt_alloc_attach(core_->comm);
}

ProcessGroupZccl::~ProcessGroupZccl()
{
    try {
        close();
    } catch (const std::exception &e) {
        TORCH_WARN("zccl: process group shutdown: ", e.what());
    }
}

void ProcessGroupZccl::shutdown()
{
    close();
}

/* destroy_process_group calls this after a fault: the communicator goes
 * without waiting for the streams' work beyond a short look. */
void ProcessGroupZccl::abort()
{
    {
        std::lock_guard<std::mutex> g(core_->mu);
        core_->timeout = std::min(core_->timeout, std::chrono::milliseconds(1000));
    }
    close();
}

void ProcessGroupZccl::close()
{
    zpt_core &c = *core_;
    if (c.comm == nullptr && c.closed) {
        return;
    }
    {
        std::lock_guard<std::mutex> g(c.fmu);
        c.fstop = true;
    }
    c.fcv.notify_all();
    if (c.fthread.joinable()) {
        c.fthread.join();
    }
    zpt_works done;
    {
        std::lock_guard<std::mutex> g(c.mu);
        c.closed = true;
    }
    long long ms = std::min<long long>(c.timeout.count(), INT32_MAX);
    for (int l = 0; l < ZPT_LANES; l++) {
        zpt_lane &lane = c.lanes[l];
        /* After a waiter's synchronize (bounded by its timeout). */
        std::lock_guard<std::timed_mutex> sg(lane.syncmu);
        std::lock_guard<std::mutex> g(c.mu);
        if (lane.stream == nullptr) {
            continue;
        }
        int rc = (int)aclrtSynchronizeStreamWithTimeout(lane.stream, (int32_t)ms);
        int code = rc == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT ? (int)HCCL_E_TIMEOUT : rc;
        c.finish_upto(l, lane.issued, code, done);
        if (rc == 0) {
            (void)aclrtDestroyStream(lane.stream);
        } else {
            (void)aclrtDestroyStreamForce(lane.stream);
        }
        lane.stream = nullptr;
    }
    for (auto &w : done) {
        w->finish_future();
    }
    if (c.comm != nullptr) {
        zpt_alloc_detach(c.comm);
        (void)HcclCommDestroy(c.comm);
        c.comm = nullptr;
    }
}

aclrtStream ProcessGroupZccl::lane_stream(int lane)
{
    zpt_lane &l = core_->lanes[lane];
    if (l.stream == nullptr) {
        (void)zpt_device_use(rank_);
        aclError e = aclrtCreateStream(&l.stream);
        if (e != ACL_SUCCESS) {
            l.stream = nullptr;
            zpt_throw_acl("aclrtCreateStream", e);
        }
    }
    return l.stream;
}

void ProcessGroupZccl::check_root(int64_t root, const char *op) const
{
    TORCH_CHECK(root >= 0 && root < size_, "zccl: ", op, ": root ", root,
                " is outside the group of ", size_);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::issue(c10d::OpType type, const char *name,
                                                       int lane, std::vector<at::Tensor> outputs,
                                                       const std::vector<at::Tensor> &inputs,
                                                       std::vector<at::Tensor> keep,
                                                       launch_fn launch, std::function<void()> post)
{
    auto w = c10::make_intrusive<WorkZccl>(core_, rank_, type, lane, std::move(outputs), inputs);
    w->name = name;
    w->seqnum = ++seq_;
    w->keep = std::move(keep);
    w->post = std::move(post);
    zpt_works done;
    {
        std::lock_guard<std::mutex> g(core_->mu);
        TORCH_CHECK(!core_->closed, "zccl: ", name, ": the process group is shut down");
        if (core_->lanes[lane].pending.size() >= 64) {
            core_->collect(lane, done); /* bound what unwaited works hold */
        }
        aclrtStream s = lane_stream(lane);
        int rc = launch(s);
        if (rc != HCCL_SUCCESS) {
            zpt_throw_hccl(std::string(name) + " (rank " + std::to_string(rank_) + ")", rc);
        }
        /* Pending from here on: the op holds w's tensors until it ended. */
        w->seq = ++core_->lanes[lane].issued;
        core_->lanes[lane].pending.push_back(w);
        /* An op zccl ran on this thread (its caller-thread path) left the
           stream idle: finish it, and the lane, now. One still queued is
           finished by its waiter's synchronize. */
        core_->collect(lane, done);
    }
    for (auto &d : done) {
        d->finish_future();
    }
    if (coalescing_) {
        coalesced_.push_back(w);
    }
    return w;
}

} // namespace zccl_torch

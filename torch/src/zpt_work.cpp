/*
 * Works: completion by lane, waits bounded by the timeout, futures.
 *
 * A waiter synchronizes its lane's stream without the core mutex (see
 * zpt.hpp), so issuing from another thread (DDP's autograd hooks) never waits
 * for a waiter; the works numbered up to the lane's count when it started
 * get its verdict. Under the mutex an idle lane is finished without waiting.
 * The lane's sync mutex keeps one synchronize per lane at a time: two would
 * split the stream's error between them. The progress thread exists only to
 * complete getFuture() futures, which torch's own code waits on without
 * calling Work::wait.
 */
#include "zpt.hpp"

#include <ATen/core/ivalue.h>

namespace zccl_torch
{

using clock_type = std::chrono::steady_clock;

/* The profiler's name for an op, as Gloo's are named ("gloo:all_reduce"):
 * the backend's name, a colon, the torch.distributed call. */
static const char *zpt_prof_title(c10d::OpType type)
{
    using c10d::OpType;
    switch (type) {
    case OpType::BROADCAST:
        return "zccl:broadcast";
    case OpType::ALLREDUCE:
        return "zccl:all_reduce";
    case OpType::ALLREDUCE_COALESCED:
        return "zccl:all_reduce_coalesced";
    case OpType::REDUCE:
        return "zccl:reduce";
    case OpType::ALLGATHER:
        return "zccl:all_gather";
    case OpType::_ALLGATHER_BASE:
        return "zccl:all_gather_into_tensor";
    case OpType::ALLGATHER_COALESCED:
        return "zccl:all_gather_coalesced";
    case OpType::GATHER:
        return "zccl:gather";
    case OpType::SCATTER:
        return "zccl:scatter";
    case OpType::REDUCE_SCATTER:
        return "zccl:reduce_scatter";
    case OpType::_REDUCE_SCATTER_BASE:
        return "zccl:reduce_scatter_tensor";
    case OpType::ALLTOALL_BASE:
    case OpType::ALLTOALL:
        return "zccl:all_to_all";
    case OpType::SEND:
        return "zccl:send";
    case OpType::RECV:
        return "zccl:recv";
    case OpType::RECVANYSOURCE:
        return "zccl:recvAnySource";
    case OpType::BARRIER:
        return "zccl:barrier";
    default:
        return "zccl:op";
    }
}

/* c10d::Work starts the profiler's record of the op when the profiler is on
 * and leaves its end to whoever finishes the work (finish_locked). Given a
 * title it allocates a RecordFunction to ask whether anyone records, and the
 * inputs are a copied vector: with no callbacks at all (the profiler off)
 * neither is passed, which takes a quarter of a microsecond off every op. */
static bool zpt_profiling()
{
    return at::hasCallbacks();
}

WorkZccl::WorkZccl(std::shared_ptr<zpt_core> core, int rank, c10d::OpType type, int lane,
                   std::vector<at::Tensor> outputs, const std::vector<at::Tensor> &inputs)
    : WorkZccl(zpt_profiling(), std::move(core), rank, type, lane, std::move(outputs), inputs)
{
}

WorkZccl::WorkZccl(bool profiling, std::shared_ptr<zpt_core> core, int rank, c10d::OpType type,
                   int lane, std::vector<at::Tensor> outputs, const std::vector<at::Tensor> &inputs)
    : c10d::Work(rank, type, profiling ? zpt_prof_title(type) : nullptr,
                 profiling ? std::optional<std::vector<at::Tensor>>(inputs) : std::nullopt),
      core_(std::move(core)), lane_(lane), outputs_(std::move(outputs))
{
}

bool WorkZccl::done() const
{
    return done_.load();
}

void WorkZccl::finish_locked(int rc)
{
    std::exception_ptr ex;
    if (rc == 0 && post) {
        try {
            post();
        } catch (...) {
            ex = std::current_exception();
        }
    } else if (rc != 0) {
        try {
            zpt_throw_hccl(std::string(name) + " (rank " + std::to_string(rank_) + ")", rc);
        } catch (...) {
            ex = std::current_exception();
        }
    }
    post = nullptr;
    keep.clear();
    {
        std::lock_guard<std::mutex> g(mutex_);
        completed_ = true;
        exception_ = ex;
        done_.store(true);
        if (recordFunctionEndCallback_) {
            recordFunctionEndCallback_();
            recordFunctionEndCallback_ = nullptr;
        }
    }
    cv_.notify_all();
}

void WorkZccl::finish_future()
{
    if (!has_future_.load()) {
        return;
    }
    c10::intrusive_ptr<c10::ivalue::Future> f;
    std::exception_ptr ex;
    {
        std::lock_guard<std::mutex> g(mutex_);
        f = future_;
        ex = exception_;
    }
    if (!f || f->completed()) {
        return;
    }
    if (ex) {
        f->setError(ex);
    } else {
        f->markCompleted(c10::IValue(outputs_));
    }
}

void zpt_core::finish_upto(int lane, uint64_t seq, int rc, zpt_works &done)
{
    zpt_lane &l = lanes[lane];
    while (!l.pending.empty() && l.pending.front()->seq <= seq) {
        c10::intrusive_ptr<WorkZccl> w = std::move(l.pending.front());
        l.pending.pop_front();
        w->finish_locked(rc);
        done.push_back(std::move(w));
    }
}

void zpt_core::collect(int lane, zpt_works &done)
{
    zpt_lane &l = lanes[lane];
    if (l.pending.empty()) {
        return;
    }
    /* A waiter synchronizing the stream owns the verdict: it finishes them. */
    std::unique_lock<std::timed_mutex> sg(l.syncmu, std::try_to_lock);
    if (!sg.owns_lock()) {
        return;
    }
    aclrtStreamStatus st = ACL_STREAM_STATUS_NOT_READY;
    aclError e = aclrtStreamQuery(l.stream, &st);
    if (e != ACL_SUCCESS || st != ACL_STREAM_STATUS_COMPLETE) {
        return;
    }
    finish_upto(lane, l.issued, (int)aclrtSynchronizeStream(l.stream), done);
}

static void zpt_mark_futures(zpt_works &done)
{
    for (auto &w : done) {
        w->finish_future();
    }
    done.clear();
}

[[noreturn]] static void zpt_timed_out(const WorkZccl *w, int rank, std::chrono::milliseconds t)
{
    /* Worded as torch's tests expect of a CPU backend (Gloo's words). */
    TORCH_CHECK(false, "zccl: ", w->name, " (rank ", rank, "): Timed out waiting ", t.count(),
                "ms for the operation to complete");
}

void zpt_core::complete(WorkZccl *w, std::chrono::milliseconds timeout)
{
    if (timeout.count() <= 0) {
        timeout = w->timeout.count() > 0 ? w->timeout : this->timeout;
    }
    auto deadline = clock_type::now() + timeout;
    zpt_lane &l = lanes[w->lane()];
    zpt_works done;
    while (!w->done()) {
        /* Another waiter may be synchronizing: take the lane after it. */
        std::unique_lock<std::timed_mutex> sg(l.syncmu, std::defer_lock);
        if (!sg.try_lock_until(deadline)) {
            zpt_timed_out(w, rank, timeout);
        }
        uint64_t upto;
        aclrtStream s;
        {
            std::lock_guard<std::mutex> g(mu);
            if (w->done()) {
                break;
            }
            upto = l.issued;
            s = l.stream;
        }
        /* 0 left: one look at the stream. */
        long long left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now())
                .count();
        int32_t ms = (int32_t)std::min<long long>(std::max<long long>(left, 0), INT32_MAX);
        aclError e = aclrtSynchronizeStreamWithTimeout(s, ms);
        if (e == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) {
            zpt_timed_out(w, rank, timeout);
        }
        {
            std::lock_guard<std::mutex> g(mu);
            finish_upto(w->lane(), upto, (int)e, done);
        }
        sg.unlock();
        zpt_mark_futures(done);
    }
    zpt_mark_futures(done);
}

bool WorkZccl::isCompleted()
{
    if (done()) {
        return true;
    }
    zpt_works finished;
    {
        std::lock_guard<std::mutex> g(core_->mu);
        core_->collect(lane_, finished);
    }
    zpt_mark_futures(finished);
    return done();
}

bool WorkZccl::isSuccess() const
{
    std::lock_guard<std::mutex> g(mutex_);
    return completed_ && !exception_;
}

bool WorkZccl::wait(std::chrono::milliseconds timeout)
{
    core_->complete(this, timeout);
    /* Done: exception_ no longer changes. */
    if (exception_) {
        std::rethrow_exception(exception_);
    }
    return true;
}

void WorkZccl::synchronize()
{
    (void)wait(kNoTimeout);
}

void WorkZccl::abort()
{
    TORCH_CHECK(false, "zccl: Work.abort is not supported (a failed op breaks the "
                       "communicator; destroy the process group instead)");
}

uint64_t WorkZccl::getSequencenumber() const
{
    return seqnum;
}

int WorkZccl::sourceRank() const
{
    TORCH_CHECK(src_rank >= 0, "zccl: sourceRank is defined for recv works only");
    return src_rank;
}

std::vector<at::Tensor> WorkZccl::result()
{
    return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkZccl::getFuture()
{
    {
        std::lock_guard<std::mutex> g(mutex_);
        if (future_) {
            return future_;
        }
        future_ =
            c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
        has_future_.store(true);
    }
    if (done()) {
        finish_future();
        return future_;
    }
    {
        std::lock_guard<std::mutex> g(core_->fmu);
        if (!core_->fthread.joinable() && !core_->fstop) {
            core_->fthread = std::thread([c = core_.get()]() { c->future_loop(); });
        }
        core_->fqueue.push_back(c10::intrusive_ptr<WorkZccl>::reclaim_copy(this));
    }
    core_->fcv.notify_one();
    return future_;
}

void zpt_core::future_loop()
{
    for (;;) {
        c10::intrusive_ptr<WorkZccl> w;
        {
            std::unique_lock<std::mutex> g(fmu);
            fcv.wait(g, [this]() { return fstop || !fqueue.empty(); });
            if (fqueue.empty()) {
                return;
            }
            w = std::move(fqueue.front());
            fqueue.pop_front();
        }
        try {
            complete(w.get(), std::chrono::milliseconds(0));
        } catch (...) {
            /* A timeout: fail the future; the work stays pending. */
            auto f = w->getFuture();
            if (!f->completed()) {
                f->setError(std::current_exception());
            }
            continue;
        }
        w->finish_future();
    }
}

} // namespace zccl_torch

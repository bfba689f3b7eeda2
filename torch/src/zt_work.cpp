/*
 * Works: completion by lane, waits bounded by the timeout, futures.
 *
 * A lane's works finish together when its stream is idle (see zt.hpp): with
 * the core mutex held nothing new can be queued, so "the stream ran
 * everything" plus one synchronize gives the verdict for every pending work
 * of the lane. Waiters block on events without the mutex, so issuing from
 * another thread (DDP's autograd hooks) never waits for a waiter. The
 * progress thread exists only to complete getFuture() futures, which
 * torch's own code waits on without calling Work::wait.
 */
#include "zt.hpp"

#include <ATen/core/ivalue.h>

namespace zccl_torch
{

using clock_type = std::chrono::steady_clock;

WorkZccl::WorkZccl(std::shared_ptr<zt_core> core, int rank, c10d::OpType type, int lane,
                   std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type), core_(std::move(core)), lane_(lane), outputs_(std::move(outputs))
{
}

WorkZccl::~WorkZccl()
{
    if (event != nullptr) {
        (void)aclrtDestroyEvent(event);
    }
}

bool WorkZccl::done() const
{
    std::lock_guard<std::mutex> g(mutex_);
    return completed_;
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
            zt_throw_hccl(std::string(name) + " (rank " + std::to_string(rank_) + ")", rc);
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
    }
    cv_.notify_all();
}

void WorkZccl::finish_future()
{
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

void zt_core::collect(int lane, std::vector<c10::intrusive_ptr<WorkZccl>> &done)
{
    zt_lane &l = lanes[lane];
    if (l.pending.empty()) {
        return;
    }
    aclrtStreamStatus st = ACL_STREAM_STATUS_NOT_READY;
    aclError e = aclrtStreamQuery(l.stream, &st);
    if (e != ACL_SUCCESS || st != ACL_STREAM_STATUS_COMPLETE) {
        return;
    }
    int rc = (int)aclrtSynchronizeStream(l.stream);
    while (!l.pending.empty()) {
        c10::intrusive_ptr<WorkZccl> w = std::move(l.pending.front());
        l.pending.pop_front();
        w->finish_locked(rc);
        done.push_back(std::move(w));
    }
}

static void zt_mark_futures(std::vector<c10::intrusive_ptr<WorkZccl>> &done)
{
    for (auto &w : done) {
        w->finish_future();
    }
    done.clear();
}

void zt_core::complete(WorkZccl *w, std::chrono::milliseconds timeout)
{
    if (timeout.count() <= 0) {
        timeout = this->timeout;
    }
    auto deadline = clock_type::now() + timeout;
    bool own_event_done = false;
    std::vector<c10::intrusive_ptr<WorkZccl>> done;
    for (;;) {
        c10::intrusive_ptr<WorkZccl> target;
        {
            std::lock_guard<std::mutex> g(mu);
            if (w->done()) {
                break;
            }
            collect(w->lane(), done);
            if (w->done()) {
                break;
            }
            /* Our op ran but later ones are queued: wait for the newest. */
            target = own_event_done ? lanes[w->lane()].pending.back()
                                    : c10::intrusive_ptr<WorkZccl>::reclaim_copy(w);
        }
        zt_mark_futures(done);
        auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
        if (left.count() <= 0) {
            TORCH_CHECK(false, "zccl: ", w->name, " (rank ", rank, ") timed out after ",
                        timeout.count(), " ms");
        }
        if (target->event == nullptr) {
            /* Its record failed (its issuer got the error): poll the lane. */
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        int32_t ms = left.count() > INT32_MAX ? INT32_MAX : (int32_t)left.count();
        aclError e = aclrtSynchronizeEventWithTimeout(target->event, ms);
        if (e == ACL_ERROR_RT_EVENT_SYNC_TIMEOUT) {
            TORCH_CHECK(false, "zccl: ", w->name, " (rank ", rank, ") timed out after ",
                        timeout.count(), " ms");
        }
        if (e != ACL_SUCCESS) {
            zt_throw_acl("aclrtSynchronizeEventWithTimeout", e);
        }
        if (target.get() == w) {
            own_event_done = true;
        }
    }
    zt_mark_futures(done);
}

bool WorkZccl::isCompleted()
{
    if (done()) {
        return true;
    }
    std::vector<c10::intrusive_ptr<WorkZccl>> finished;
    {
        std::lock_guard<std::mutex> g(core_->mu);
        core_->collect(lane_, finished);
    }
    zt_mark_futures(finished);
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
    std::lock_guard<std::mutex> g(mutex_);
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

void zt_core::future_loop()
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

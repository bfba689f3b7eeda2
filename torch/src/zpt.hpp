/*
 * zccl_torch: a c10d::Backend (PyTorch 2.x) on zccl's public API.
 *
 * Protocol. One ProcessGroupZccl owns one HCCL communicator, created from a
 * root info that group rank 0 makes with HcclGetRootInfo and publishes in the
 * group's c10d store (the other ranks read it there; no MPI). Ops are issued
 * on the caller's thread under the group's mutex, so the order in which a
 * rank issues them is the order zccl matches them in. Each op goes on one of
 * three lanes, each an aclrtStream: collectives, sends, receives (separate
 * so an isend and an irecv posted in either order on two ranks do not wait
 * on each other). An op zccl ran on the caller's thread (a small op on an
 * idle stream) leaves the stream idle when the call returns: its Work, and
 * every Work pending on the lane, is finished there by the lane's
 * synchronize, with no stream task and no other thread involved. The Work
 * holds the tensors the op reads and writes, and an optional host step run
 * after success (copy a dense temporary back into a strided tensor, divide
 * for AVG).
 *
 * Completion and errors. A stream reports errors only to a synchronize (the
 * first task error since the last one), and a synchronize waits for exactly
 * the work queued before it. So works are numbered per lane at issue, and a
 * waiter synchronizes the lane's stream itself, without the group's mutex
 * (issuing from another thread goes on meanwhile): when it returns, every
 * pending work numbered up to the lane's count at the call has ended, and
 * the synchronize's verdict is theirs. One synchronize per lane at a time
 * (the lane's sync mutex; the others then find their work finished), so no
 * verdict goes to a thread that does not hand it on. Under the mutex, an
 * idle lane is finished the same way without waiting (after an issue, in
 * isCompleted). An error fails every work that was pending on the lane with
 * the HCCL code named in the message (a failed op breaks the communicator,
 * so later ops fail too). No events: the record task each one cost ran on
 * the stream worker behind the op. getFuture() futures are completed by a
 * progress thread started on first use; waits never need it.
 */
#pragma once

#include <torch/extension.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <c10/util/FunctionRef.h>
#include <c10/util/SmallVector.h>

#include <acl/acl.h>
#include <hccl/hccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace zccl_torch
{

/* ---- zpt_util.cpp: names, checks, dtype and op mapping ---------------------- */

/** "HCCL_E_REMOTE (a peer reported an error)" for an HcclResult value. */
std::string zpt_hccl_name(int code);
/** Throws c10::Error: "zccl: <what> failed: <name> [code N]". */
[[noreturn]] void zpt_throw_hccl(const std::string &what, int code);
/** Throws c10::Error for an aclError. */
[[noreturn]] void zpt_throw_acl(const std::string &what, int code);

/** aclInit once per process (the allocator and the first group both need it). */
void zpt_acl_init();

/** The HcclDataType of a tensor's dtype (bool travels as uint8); throws for
 *  dtypes zccl has no type for (complex, quantized, ...). */
HcclDataType zpt_dtype(const at::Tensor &t);

/** Elements as zccl counts them (a complex element is two). */
uint64_t zpt_elems(const at::Tensor &t);

/** "SUM", "BXOR", ... for a reduction. */
const char *zpt_op_name(c10d::ReduceOp::RedOpType op);

/** What an op's reduction becomes on zccl. */
struct zpt_redop {
    HcclReduceOp op;
    bool avg; /* SUM, then divide by the group size */
};
/** Maps a c10d ReduceOp for a dtype; throws for what zccl cannot do
 *  (bitwise ops except on bool, PREMUL_SUM, AVG on integers). */
zpt_redop zpt_reduce_op(const c10d::ReduceOp &op, at::ScalarType st);
/** True for BAND/BOR/BXOR on an integer dtype other than bool: zccl has no
 *  bitwise reduction, so the op gathers every rank's tensor and folds it. */
bool zpt_bitwise(const c10d::ReduceOp &op, at::ScalarType st);
/** Folds rows [n, ...] of a gathered tensor with a bitwise op into out. */
void zpt_fold_bitwise(c10d::ReduceOp::RedOpType op, const at::Tensor &rows, at::Tensor out);

/** Checks a tensor argument: CPU, strided; names the op and the problem. */
void zpt_check_tensor(const at::Tensor &t, const char *op);
/** Checks a list holds exactly one tensor (one tensor per process on CPU). */
void zpt_check_single(const std::vector<at::Tensor> &ts, const char *op);
/** Checks every tensor has the dtype (and, when same_size, the numel) of ref. */
void zpt_check_same(const std::vector<at::Tensor> &ts, const at::Tensor &ref, bool same_size,
                    const char *op);

/* ---- zpt_alloc.cpp: the activated-memory CPU allocator ----------------------- */

/** Installs the allocator as torch's CPU allocator (idempotent). Reserves
 *  reserve_bytes of address space; physical memory is mapped in chunks of
 *  chunk_bytes (larger tensors get a chunk of their own). Communicators that
 *  exist now or are created later get the range set and every chunk
 *  activated. Collective when communicators already exist. */
void zpt_alloc_enable(size_t reserve_bytes, size_t chunk_bytes);
bool zpt_alloc_enabled();
/** True when [p, p+n) lies in one activated chunk of the allocator. */
bool zpt_alloc_contains(const void *p, size_t n);
/** Registers / withdraws a communicator (set range, activate every chunk). */
void zpt_alloc_attach(HcclComm comm);
void zpt_alloc_detach(HcclComm comm);
/** Statistics: {reserved, mapped, in use, cached, chunks, fallbacks}. */
std::vector<uint64_t> zpt_alloc_stats();

/* ---- zpt_floor.cpp: the test-only floor backend ----------------------------- */

/** Adds _create_floor (a backend whose ops complete at once, moving nothing)
 *  to the module; for benchmarks only, never registered by the package. */
void zpt_floor_bind(pybind11::module &m);

/* ---- zpt_pg.cpp / zpt_work.cpp: group and work -------------------------------- */

class WorkZccl;

/* Works finished together (one, mostly): no allocation for a few. */
using zpt_works = c10::SmallVector<c10::intrusive_ptr<WorkZccl>, 4>;

enum zpt_lane_id { ZPT_LANE_COLL = 0, ZPT_LANE_SEND = 1, ZPT_LANE_RECV = 2, ZPT_LANES = 3 };

struct zpt_lane {
    aclrtStream stream = nullptr;
    std::deque<c10::intrusive_ptr<WorkZccl>> pending; /* in issue order */
    uint64_t issued = 0;     /* ops issued on the lane: the newest work's seq */
    std::timed_mutex syncmu; /* held by the one thread synchronizing the stream */
};

/* State shared by the group and its works (a work may outlive the group). */
struct zpt_core {
    int rank = 0;
    int size = 0;
    int device = 0;
    HcclComm comm = nullptr;
    std::chrono::milliseconds timeout{0};
    std::mutex mu; /* issue and completion */
    zpt_lane lanes[ZPT_LANES];
    bool closed = false;

    /* progress thread: completes futures */
    std::mutex fmu;
    std::condition_variable fcv;
    std::deque<c10::intrusive_ptr<WorkZccl>> fqueue;
    std::thread fthread;
    bool fstop = false;

    /** Finishes the lane's pending works if its stream ran everything and
     *  no waiter is synchronizing it; called with mu held. Returns the works
     *  finished (futures are marked by the caller after dropping mu). */
    void collect(int lane, zpt_works &done);
    /** Finishes the lane's pending works numbered up to seq with verdict rc
     *  (their ops ended); mu held. */
    void finish_upto(int lane, uint64_t seq, int rc, zpt_works &done);
    /** Blocks until w is finished or the timeout passes (then throws). */
    void complete(WorkZccl *w, std::chrono::milliseconds timeout);
    void future_loop();
};

class WorkZccl : public c10d::Work
{
  public:
    /** inputs: the op's arguments as the profiler records them. */
    WorkZccl(std::shared_ptr<zpt_core> core, int rank, c10d::OpType type, int lane,
             std::vector<at::Tensor> outputs, const std::vector<at::Tensor> &inputs);

    bool isCompleted() override;
    bool isSuccess() const override;
    bool wait(std::chrono::milliseconds timeout) override;
    void synchronize() override;
    void abort() override;
    std::vector<at::Tensor> result() override;
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
    int sourceRank() const override;
    uint64_t getSequencenumber() const override;

    /* set by the group at issue */
    int src_rank = -1;
    uint64_t seq = 0;                     /* its number on the lane */
    std::vector<at::Tensor> keep;         /* read or written by the op until it ends */
    std::chrono::milliseconds timeout{0}; /* the op's own (0: the group's) */
    uint64_t seqnum = 0;                  /* the group's op count at issue */
    std::function<void()> post;           /* host step after success */
    const char *name = "";

    /** Marks the work finished (rc 0: run post, success); core mu held. */
    void finish_locked(int rc);
    /** Completes the future, if any; no lock held. */
    void finish_future();
    bool done() const;
    /** The tensors result() returns (a coalesced op's last work: all). */
    void set_outputs(std::vector<at::Tensor> outs)
    {
        outputs_ = std::move(outs);
    }
    int lane() const
    {
        return lane_;
    }

  private:
    /* profiling: whether the profiler records (asked once per work). */
    WorkZccl(bool profiling, std::shared_ptr<zpt_core> core, int rank, c10d::OpType type, int lane,
             std::vector<at::Tensor> outputs, const std::vector<at::Tensor> &inputs);

    std::shared_ptr<zpt_core> core_;
    int lane_;
    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
    /* completed_ and future_ set (under mutex_ too): a finished op's wait and
     * its finisher's future check take no lock (sequentially consistent, so a
     * getFuture racing the finish sees done_ or is seen). */
    std::atomic<bool> done_{false};
    std::atomic<bool> has_future_{false};
};

class ProcessGroupZccl : public c10d::Backend
{
  public:
    ProcessGroupZccl(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                     std::chrono::milliseconds timeout);
    ~ProcessGroupZccl() override;

    const std::string getBackendName() const override
    {
        return "zccl";
    }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &tensors,
                        const c10d::AllreduceCoalescedOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::GatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                           std::vector<std::vector<at::Tensor>> &inputs,
                                           const c10d::ScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                  std::vector<std::vector<at::Tensor>> &inputs,
                                                  const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                         const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                 std::vector<int64_t> &outputSplits,
                                                 std::vector<int64_t> &inputSplits,
                                                 const c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;

    /* ---- 2.x additions (zpt_more.cpp) ---- */
    c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor> &tensors,
                                                    const c10d::AllreduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                        std::vector<at::Tensor> &inputs,
                        const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                    std::vector<at::Tensor> &inputs,
                                    const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                    std::vector<at::Tensor> &inputs,
                                    const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                                 int tag) override;
    void monitoredBarrier(const c10d::BarrierOptions &opts, bool waitAllRanks) override;
    void setSequenceNumberForGroup() override;
    uint64_t getSequenceNumberForGroup() override;
    void setTimeout(std::chrono::milliseconds timeout) override;
    bool supportsCoalescing() const override
    {
        return true;
    }
    void startCoalescing() override;
    c10::intrusive_ptr<c10d::Work> endCoalescing() override;
    void abort() override;
    void shutdown() override;

    /** The communicator handle (for diagnostics through zccl's exported
     *  counters, e.g. from a benchmark). */
    uintptr_t comm_handle() const
    {
        return (uintptr_t)core_->comm;
    }

  private:
    /* Called during issue only: a reference, no copy of the lambda. */
    using launch_fn = c10::function_ref<int(aclrtStream)>;
    /** Issues one op on a lane: launch(stream) is the Hccl call. The work
     *  holds outputs until it is destroyed and keep until its op ended;
     *  inputs are what the profiler records as the op's arguments. */
    c10::intrusive_ptr<c10d::Work> issue(c10d::OpType type, const char *name, int lane,
                                         std::vector<at::Tensor> outputs,
                                         const std::vector<at::Tensor> &inputs,
                                         std::vector<at::Tensor> keep, launch_fn launch,
                                         std::function<void()> post);
    aclrtStream lane_stream(int lane);
    void check_root(int64_t root, const char *op) const;
    void close();
    /** Bitwise BAND/BOR/BXOR on integers: an allgather of in, then a fold
     *  of every rank's part `part` (all of it when part < 0) into out. */
    c10::intrusive_ptr<c10d::Work> bitwise(c10d::OpType type, const char *name,
                                           std::vector<at::Tensor> outputs, const at::Tensor &in,
                                           at::Tensor out, int64_t part, const c10d::ReduceOp &op,
                                           std::function<void()> then = nullptr);
    /** Sparse allreduce (SUM): indices and values gathered, then summed. */
    c10::intrusive_ptr<c10d::Work> sparse_allreduce(at::Tensor &t, const c10d::AllreduceOptions &);
    /** Issues a dense allgather of t padded to n rows, and waits for it. */
    at::Tensor gather_rows(const at::Tensor &t, int64_t rows);
    /** Counts a send to dst in the store for a receiver from any source. */
    void note_send(int dst);
    /** recv from src, recorded as type (RECV, or RECVANYSOURCE as Gloo names it). */
    c10::intrusive_ptr<c10d::Work> recv_as(std::vector<at::Tensor> &tensors, int src,
                                           c10d::OpType type);

    std::shared_ptr<zpt_core> core_;
    c10::intrusive_ptr<c10d::Store> store_;
    uint64_t seq_ = 0;                                      /* ops issued (for torch) */
    std::vector<int64_t> recvd_;                            /* messages taken per source */
    uint64_t mbarriers_ = 0;                                /* monitored barriers run */
    bool coalescing_ = false;                               /* between start and end */
    std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_; /* works since start */
};

/** A dense tensor with t's values (t itself when already contiguous). */
at::Tensor zpt_dense_in(const at::Tensor &t);
/** A dense tensor the op may write; when it is a temporary, *post gets the
 *  copy back into t appended. */
at::Tensor zpt_dense_out(const at::Tensor &t, std::function<void()> *post);
/** One flat dense tensor holding the list's values in order (a view of the
 *  list when it already is one contiguous run of memory). */
at::Tensor zpt_flatten_in(const std::vector<at::Tensor> &ts);
/** A flat buffer to receive a list; post copies it out into the list. */
at::Tensor zpt_flatten_out(const std::vector<at::Tensor> &ts, std::function<void()> *post);
/** Copies a flat buffer out into a list, in order. */
void zpt_unflatten(const at::Tensor &flat, const std::vector<at::Tensor> &outs);
/** Appends f to *post (run in order). */
void zpt_then(std::function<void()> *post, std::function<void()> f);

} // namespace zccl_torch

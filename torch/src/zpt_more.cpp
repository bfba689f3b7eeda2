/*
 * What PyTorch 2.x asks of a backend beyond the one-call collectives:
 * bitwise and sparse all-reduce, the coalesced variants, any-source
 * receive, monitored barrier, sequence numbers and coalescing.
 *
 * Bitwise BAND/BOR/BXOR on integers: zccl has no bitwise reduction, so the op
 * is an allgather of every rank's tensor and a fold on the host after it.
 * Sparse all-reduce (SUM, as Gloo): each rank's coalesced indices and values
 * are gathered (padded to the largest count; the counts gathered first) and
 * summed into one coalesced tensor, copied into the input as Gloo does.
 * Any-source receive: zccl matches by source, so every send adds one to the
 * store key "zccl/any/<dst>/<src>"; a receive from any source polls those
 * counts for a source whose sends outnumber what this rank took from it
 * (plain receives count too), then receives from it.
 * Monitored barrier, through the store as Gloo does through its pairs: every
 * rank but 0 checks in and waits for rank 0's release; rank 0 waits for
 * every check-in up to the timeout and names the ranks that did not come.
 * Coalescing: ops between startCoalescing and endCoalescing are issued as
 * they come; endCoalescing's work waits for all of them.
 */
#include "zpt.hpp"

#include <ATen/core/ivalue.h>

#include <sstream>

namespace zccl_torch
{

using c10d::OpType;

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::bitwise(OpType type, const char *name,
                                                         std::vector<at::Tensor> outputs,
                                                         const at::Tensor &in, at::Tensor out,
                                                         int64_t part, const c10d::ReduceOp &op,
                                                         std::function<void()> then)
{
    HcclDataType dt = zpt_dtype(in);
    at::Tensor src = in.contiguous().view({-1});
    at::Tensor rows = at::empty({size_, src.numel()}, src.options());
    c10d::ReduceOp::RedOpType rop = op.op_;
    int64_t m = out.numel();
    std::function<void()> post = [rop, rows, out, part, m]() mutable {
        zpt_fold_bitwise(rop, part < 0 ? rows : rows.narrow(1, part * m, m), out);
    };
    if (then) {
        zpt_then(&post, std::move(then));
    }
    HcclComm comm = core_->comm;
    std::vector<at::Tensor> keep = outputs;
    keep.push_back(src);
    keep.push_back(rows);
    return issue(
        type, name, ZPT_LANE_COLL, std::move(outputs), {in}, std::move(keep),
        [=](aclrtStream s) {
            return src.numel() == 0 ? 0
                                    : (int)HcclAllGather(src.data_ptr(), rows.data_ptr(),
                                                         zpt_elems(src), dt, comm, s);
        },
        std::move(post));
}

at::Tensor ProcessGroupZccl::gather_rows(const at::Tensor &t, int64_t rows)
{
    std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
    at::Tensor src = t.contiguous();
    if (!shape.empty() && shape[0] < rows) {
        shape[0] = rows;
        src = at::zeros(shape, t.options());
        src.narrow(0, 0, t.size(0)).copy_(t);
    }
    shape.insert(shape.begin(), size_);
    at::Tensor out = at::empty(shape, t.options());
    at::Tensor flat = out.view({-1});
    _allgather_base(flat, src, c10d::AllgatherOptions())->wait();
    return out;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupZccl::sparse_allreduce(at::Tensor &t, const c10d::AllreduceOptions &opts)
{
    TORCH_CHECK(opts.reduceOp.op_ == c10d::ReduceOp::SUM,
                "zccl: allreduce of a sparse tensor supports ReduceOp.SUM only, got ReduceOp.",
                zpt_op_name(opts.reduceOp.op_));
    at::Tensor in = t.coalesce();
    int64_t nnz = in._nnz();
    at::Tensor counts = gather_rows(at::full({1}, nnz, at::kLong), 1).view({-1});
    int64_t maxn = counts.max().item<int64_t>();
    /* indices [sparse_dim, nnz] travel as [nnz, sparse_dim]: rows pad. */
    at::Tensor idx = gather_rows(in._indices().t().contiguous(), maxn);
    at::Tensor val = gather_rows(in._values(), maxn);
    std::vector<at::Tensor> is, vs;
    for (int r = 0; r < size_; r++) {
        int64_t n = counts[r].item<int64_t>();
        is.push_back(idx[r].narrow(0, 0, n));
        vs.push_back(val[r].narrow(0, 0, n));
    }
    at::Tensor sum =
        at::sparse_coo_tensor(at::cat(is).t(), at::cat(vs), in.sizes(), in.options()).coalesce();
    t.copy_(sum);
    std::vector<at::Tensor> outs{t};
    return issue(
        OpType::ALLREDUCE, "sparse allreduce", ZPT_LANE_COLL, outs, outs, {},
        [](aclrtStream) { return 0; }, nullptr);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupZccl::allreduce_sparse(std::vector<at::Tensor> &tensors,
                                   const c10d::AllreduceOptions &opts)
{
    TORCH_CHECK(tensors.size() == 1 && tensors[0].is_sparse(),
                "zccl: allreduce_sparse: expects one sparse tensor, got ", tensors.size());
    return sparse_allreduce(tensors[0], opts);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupZccl::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                      std::vector<at::Tensor> &inputs,
                                      const c10d::AllgatherOptions &)
{
    TORCH_CHECK(!inputs.empty(), "zccl: allgather_coalesced: no input tensors");
    TORCH_CHECK(outputs.size() == (size_t)size_, "zccl: allgather_coalesced: expects ", size_,
                " output lists, got ", outputs.size());
    zpt_check_same(inputs, inputs[0], false, "allgather_coalesced");
    std::vector<at::Tensor> all;
    for (auto &l : outputs) {
        TORCH_CHECK(l.size() == inputs.size(), "zccl: allgather_coalesced: an output list has ",
                    l.size(), " tensors, expected ", inputs.size());
        for (size_t i = 0; i < l.size(); i++) {
            TORCH_CHECK(l[i].numel() == inputs[i].numel(), "zccl: allgather_coalesced: output ", i,
                        " has ", l[i].numel(), " elements, expected ", inputs[i].numel());
        }
        zpt_check_same(l, inputs[0], false, "allgather_coalesced");
        all.insert(all.end(), l.begin(), l.end());
    }
    HcclDataType dt = zpt_dtype(inputs[0]);
    at::Tensor in = zpt_flatten_in(inputs);
    std::function<void()> post;
    at::Tensor flat = zpt_flatten_out(all, &post);
    std::vector<at::Tensor> keep = all;
    keep.push_back(in);
    keep.push_back(flat);
    HcclComm comm = core_->comm;
    return issue(
        OpType::ALLGATHER_COALESCED, "HcclAllGather (coalesced)", ZPT_LANE_COLL, all, inputs,
        std::move(keep),
        [=](aclrtStream s) {
            return in.numel() == 0 ? 0
                                   : (int)HcclAllGather(in.data_ptr(), flat.data_ptr(),
                                                        zpt_elems(in), dt, comm, s);
        },
        std::move(post));
}

/* The last work of a run of ops on one lane finishes after every other
 * (the lane completes in order, and a failure fails every later op). */
static c10::intrusive_ptr<c10d::Work> zpt_last(std::vector<c10::intrusive_ptr<c10d::Work>> &ws,
                                               const std::vector<at::Tensor> &outs)
{
    TORCH_CHECK(!ws.empty(), "zccl: a coalesced op with no tensors");
    static_cast<WorkZccl *>(ws.back().get())->set_outputs(outs);
    return ws.back();
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupZccl::allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                  std::vector<at::Tensor> &inputs,
                                                  const c10d::AllgatherOptions &opts)
{
    TORCH_CHECK(outputs.size() == inputs.size(),
                "zccl: allgather_into_tensor_coalesced: ", outputs.size(), " outputs for ",
                inputs.size(), " inputs");
    std::vector<c10::intrusive_ptr<c10d::Work>> ws;
    for (size_t i = 0; i < inputs.size(); i++) {
        ws.push_back(_allgather_base(outputs[i], inputs[i], opts));
    }
    return zpt_last(ws, outputs);
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupZccl::reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                  std::vector<at::Tensor> &inputs,
                                                  const c10d::ReduceScatterOptions &opts)
{
    TORCH_CHECK(outputs.size() == inputs.size(),
                "zccl: reduce_scatter_tensor_coalesced: ", outputs.size(), " outputs for ",
                inputs.size(), " inputs");
    std::vector<c10::intrusive_ptr<c10d::Work>> ws;
    for (size_t i = 0; i < inputs.size(); i++) {
        ws.push_back(_reduce_scatter_base(outputs[i], inputs[i], opts));
    }
    return zpt_last(ws, outputs);
}

static std::string zpt_any_key(int dst, int src)
{
    return "zccl/any/" + std::to_string(dst) + "/" + std::to_string(src);
}

void ProcessGroupZccl::note_send(int dst)
{
    (void)store_->add(zpt_any_key(dst, rank_), 1);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::recvAnysource(std::vector<at::Tensor> &tensors,
                                                               int tag)
{
    (void)tag;
    zpt_check_single(tensors, "recvAnysource");
    auto deadline = std::chrono::steady_clock::now() + core_->timeout;
    std::chrono::milliseconds nap(1);
    for (;;) {
        for (int src = 0; src < size_; src++) {
            if (src != rank_ && store_->add(zpt_any_key(rank_, src), 0) > recvd_[src]) {
                auto w = recv_as(tensors, src, OpType::RECVANYSOURCE);
                static_cast<WorkZccl *>(w.get())->src_rank = src;
                return w;
            }
        }
        TORCH_CHECK(std::chrono::steady_clock::now() < deadline, "zccl: recvAnysource (rank ",
                    rank_, "): Timed out waiting ", core_->timeout.count(),
                    "ms for a message from any rank");
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, std::chrono::milliseconds(20));
    }
}

static std::string zpt_ranks(const std::vector<int> &ranks)
{
    std::ostringstream s;
    s << (ranks.size() == 1 ? "Rank " : "Ranks ");
    for (size_t i = 0; i < ranks.size(); i++) {
        s << (i ? ", " : "") << ranks[i];
    }
    return s.str();
}

void ProcessGroupZccl::monitoredBarrier(const c10d::BarrierOptions &opts, bool waitAllRanks)
{
    auto timeout = opts.timeout.count() >= 0 ? opts.timeout : core_->timeout;
    std::string base = "zccl/mbarrier/" + std::to_string(mbarriers_++) + "/";
    auto deadline = std::chrono::steady_clock::now() + timeout;
    if (rank_ != 0) {
        store_->set(base + std::to_string(rank_), std::vector<uint8_t>{1});
        try {
            store_->wait({base + "go"}, std::max(timeout, std::chrono::milliseconds(1)));
        } catch (const std::exception &) {
            /* Gloo's words, which callers (and torch's tests) match. */
            TORCH_CHECK(false, "zccl: Rank ", rank_,
                        " successfully reached monitoredBarrier, but received errors while "
                        "waiting for send/recv from rank 0: rank 0 did not release it within ",
                        timeout.count(), " ms");
        }
        return;
    }
    std::vector<int> missing;
    for (int r = 1; r < size_; r++) {
        missing.push_back(r);
    }
    while (!missing.empty()) {
        std::vector<int> left;
        for (int r : missing) {
            if (!store_->check({base + std::to_string(r)})) {
                left.push_back(r);
            }
        }
        missing.swap(left);
        if (missing.empty() || std::chrono::steady_clock::now() >= deadline) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (!missing.empty()) {
        if (!waitAllRanks) {
            missing.resize(1);
        }
        TORCH_CHECK(timeout.count() > 0, "zccl: Rank 0 timed out in monitoredBarrier after ",
                    timeout.count(), " ms");
        TORCH_CHECK(false, "zccl: ", zpt_ranks(missing), " failed to pass monitoredBarrier in ",
                    timeout.count(), " ms");
    }
    store_->set(base + "go", std::vector<uint8_t>{1});
}

void ProcessGroupZccl::setSequenceNumberForGroup()
{
    /* Every rank starts at 0 and counts the ops it issues, as Gloo's do. */
}

uint64_t ProcessGroupZccl::getSequenceNumberForGroup()
{
    std::lock_guard<std::mutex> g(core_->mu);
    return seq_;
}

void ProcessGroupZccl::setTimeout(std::chrono::milliseconds timeout)
{
    std::lock_guard<std::mutex> g(core_->mu);
    core_->timeout = timeout;
}

void ProcessGroupZccl::startCoalescing()
{
    TORCH_CHECK(!coalescing_, "zccl: startCoalescing: already coalescing");
    coalescing_ = true;
    coalesced_.clear();
}

/* The work of a coalesced run: waits for every op of it. */
class zpt_group_work : public c10d::Work
{
  public:
    zpt_group_work(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> ws)
        : c10d::Work(rank, c10d::OpType::COALESCED), ws_(std::move(ws))
    {
    }
    bool isCompleted() override
    {
        for (auto &w : ws_) {
            if (!w->isCompleted()) {
                return false;
            }
        }
        return true;
    }
    bool isSuccess() const override
    {
        for (auto &w : ws_) {
            if (!w->isSuccess()) {
                return false;
            }
        }
        return true;
    }
    bool wait(std::chrono::milliseconds timeout) override
    {
        for (auto &w : ws_) {
            w->wait(timeout);
        }
        return true;
    }
    void synchronize() override
    {
        (void)wait(std::chrono::milliseconds(0));
    }
    std::vector<at::Tensor> result() override
    {
        std::vector<at::Tensor> out;
        for (auto &w : ws_) {
            for (auto &t : w->result()) {
                out.push_back(t);
            }
        }
        return out;
    }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
    {
        c10::List<c10::intrusive_ptr<c10::ivalue::Future>> fs(
            c10::FutureType::create(c10::ListType::create(c10::TensorType::get())));
        for (auto &w : ws_) {
            fs.push_back(w->getFuture());
        }
        std::vector<at::Tensor> outs = result();
        return c10::collectAll(fs)->then(
            [outs](c10::ivalue::Future &) { return c10::IValue(outs); },
            c10::ListType::create(c10::TensorType::get()));
    }

  private:
    std::vector<c10::intrusive_ptr<c10d::Work>> ws_;
};

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::endCoalescing()
{
    TORCH_CHECK(coalescing_, "zccl: endCoalescing without startCoalescing");
    coalescing_ = false;
    std::vector<c10::intrusive_ptr<c10d::Work>> ws;
    ws.swap(coalesced_);
    return c10::make_intrusive<zpt_group_work>(rank_, std::move(ws));
}

} // namespace zccl_torch

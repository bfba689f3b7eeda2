/*
 * The reducing and gathering collectives, each one zccl call.
 *
 * Tensors go to zccl as they are when contiguous, so a tensor from the
 * activated allocator is read and written in place by the peers (zero-copy);
 * a strided tensor goes through a dense temporary that is copied back after
 * success, and a list of tensors through one flat buffer unless the list
 * already is one contiguous run of memory. gather has no HCCL call of its
 * own: it is an AlltoAllV in which only the root receives. AVG is SUM and a
 * host division after success (zccl has no average).
 */
#include "zpt.hpp"

namespace zccl_torch
{

using c10d::OpType;

/* The copy of d back into t, after the op, when d is a temporary. */
static void zpt_copy_back(const at::Tensor &t, const at::Tensor &d, std::function<void()> *post)
{
    if (d.data_ptr() == t.data_ptr() && t.is_contiguous()) {
        return;
    }
    at::Tensor user = t;
    zpt_then(post, [user, d]() mutable { user.copy_(d); });
}

/* What a work must hold besides its outputs (held until it is destroyed):
 * the dense temporary, when d is one. */
static std::vector<at::Tensor> zpt_temp(const at::Tensor &t, const at::Tensor &d)
{
    if (d.is_same(t)) {
        return {};
    }
    return {d};
}

static void zpt_divide(const at::Tensor &d, int n, std::function<void()> *post)
{
    zpt_then(post, [d, n]() mutable { d.div_(n); });
}

static uint64_t zpt_count(const at::Tensor &t)
{
    return zpt_elems(t);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::allreduce(std::vector<at::Tensor> &tensors,
                                                           const c10d::AllreduceOptions &opts)
{
    if (tensors.size() == 1 && tensors[0].defined() && tensors[0].is_sparse()) {
        return sparse_allreduce(tensors[0], opts);
    }
    zpt_check_single(tensors, "allreduce");
    const at::Tensor &t = tensors[0];
    if (zpt_bitwise(opts.reduceOp, t.scalar_type())) {
        return bitwise(OpType::ALLREDUCE, "HcclAllGather (bitwise allreduce)", tensors, t, t, -1,
                       opts.reduceOp);
    }
    zpt_redop r = zpt_reduce_op(opts.reduceOp, t.scalar_type());
    HcclDataType dt = zpt_dtype(t);
    at::Tensor d = zpt_dense_in(t);
    std::function<void()> post;
    if (r.avg) {
        zpt_divide(d, size_, &post);
    }
    zpt_copy_back(t, d, &post);
    HcclComm comm = core_->comm;
    return issue(
        OpType::ALLREDUCE, "HcclAllReduce", ZPT_LANE_COLL, tensors, tensors, zpt_temp(t, d),
        [=](aclrtStream s) {
            return zpt_count(d) == 0 ? 0
                                     : (int)HcclAllReduce(d.data_ptr(), d.data_ptr(), zpt_count(d),
                                                          dt, r.op, comm, s);
        },
        std::move(post));
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupZccl::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                      const c10d::AllreduceCoalescedOptions &opts)
{
    TORCH_CHECK(!tensors.empty(), "zccl: allreduce_coalesced: no tensors");
    zpt_check_same(tensors, tensors[0], false, "allreduce_coalesced");
    if (zpt_bitwise(opts.reduceOp, tensors[0].scalar_type())) {
        at::Tensor flat = zpt_flatten_in(tensors);
        at::Tensor res = at::empty_like(flat);
        std::vector<at::Tensor> outs = tensors;
        return bitwise(OpType::ALLREDUCE_COALESCED, "HcclAllGather (bitwise allreduce)", tensors,
                       flat, res, -1, opts.reduceOp, [res, outs]() { zpt_unflatten(res, outs); });
    }
    zpt_redop r = zpt_reduce_op(opts.reduceOp, tensors[0].scalar_type());
    HcclDataType dt = zpt_dtype(tensors[0]);
    at::Tensor flat = zpt_flatten_in(tensors);
    std::function<void()> post;
    if (r.avg) {
        zpt_divide(flat, size_, &post);
    }
    if (flat.data_ptr() != tensors[0].data_ptr() || !tensors[0].is_contiguous()) {
        std::vector<at::Tensor> outs = tensors;
        zpt_then(&post, [flat, outs]() { zpt_unflatten(flat, outs); });
    }
    std::vector<at::Tensor> keep = tensors;
    keep.push_back(flat);
    HcclComm comm = core_->comm;
    return issue(
        OpType::ALLREDUCE_COALESCED, "HcclAllReduce (coalesced)", ZPT_LANE_COLL, tensors, tensors,
        std::move(keep),
        [=](aclrtStream s) {
            return zpt_count(flat) == 0 ? 0
                                        : (int)HcclAllReduce(flat.data_ptr(), flat.data_ptr(),
                                                             zpt_count(flat), dt, r.op, comm, s);
        },
        std::move(post));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::broadcast(std::vector<at::Tensor> &tensors,
                                                           const c10d::BroadcastOptions &opts)
{
    zpt_check_single(tensors, "broadcast");
    check_root(opts.rootRank, "broadcast");
    TORCH_CHECK(opts.rootTensor == 0, "zccl: broadcast: rootTensor must be 0, got ",
                opts.rootTensor);
    const at::Tensor &t = tensors[0];
    HcclDataType dt = zpt_dtype(t);
    at::Tensor d = zpt_dense_in(t);
    std::function<void()> post;
    zpt_copy_back(t, d, &post);
    HcclComm comm = core_->comm;
    uint32_t root = (uint32_t)opts.rootRank;
    return issue(
        OpType::BROADCAST, "HcclBroadcast", ZPT_LANE_COLL, tensors, tensors, zpt_temp(t, d),
        [=](aclrtStream s) {
            return zpt_count(d) == 0
                       ? 0
                       : (int)HcclBroadcast(d.data_ptr(), zpt_count(d), dt, root, comm, s);
        },
        std::move(post));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::reduce(std::vector<at::Tensor> &tensors,
                                                        const c10d::ReduceOptions &opts)
{
    zpt_check_single(tensors, "reduce");
    check_root(opts.rootRank, "reduce");
    const at::Tensor &t = tensors[0];
    if (zpt_bitwise(opts.reduceOp, t.scalar_type())) {
        return bitwise(OpType::REDUCE, "HcclAllGather (bitwise reduce)", tensors, t, t, -1,
                       opts.reduceOp);
    }
    zpt_redop r = zpt_reduce_op(opts.reduceOp, t.scalar_type());
    HcclDataType dt = zpt_dtype(t);
    at::Tensor d = zpt_dense_in(t);
    std::function<void()> post;
    if (r.avg && rank_ == opts.rootRank) {
        zpt_divide(d, size_, &post);
    }
    zpt_copy_back(t, d, &post);
    HcclComm comm = core_->comm;
    uint32_t root = (uint32_t)opts.rootRank;
    return issue(
        OpType::REDUCE, "HcclReduce", ZPT_LANE_COLL, tensors, tensors, zpt_temp(t, d),
        [=](aclrtStream s) {
            return zpt_count(d) == 0 ? 0
                                     : (int)HcclReduce(d.data_ptr(), d.data_ptr(), zpt_count(d), dt,
                                                       r.op, root, comm, s);
        },
        std::move(post));
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupZccl::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                            std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts)
{
    zpt_check_single(inputs, "allgather");
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == (size_t)size_,
                "zccl: allgather: expects one list of ", size_, " output tensors");
    zpt_check_same(outputs[0], inputs[0], true, "allgather");
    HcclDataType dt = zpt_dtype(inputs[0]);
    at::Tensor in = zpt_dense_in(inputs[0]);
    std::function<void()> post;
    at::Tensor flat = zpt_flatten_out(outputs[0], &post);
    std::vector<at::Tensor> keep = outputs[0];
    keep.push_back(in);
    keep.push_back(flat);
    HcclComm comm = core_->comm;
    return issue(
        OpType::ALLGATHER, "HcclAllGather", ZPT_LANE_COLL, outputs[0], inputs, std::move(keep),
        [=](aclrtStream s) {
            return zpt_count(in) == 0 ? 0
                                      : (int)HcclAllGather(in.data_ptr(), flat.data_ptr(),
                                                           zpt_count(in), dt, comm, s);
        },
        std::move(post));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::_allgather_base(at::Tensor &output,
                                                                 at::Tensor &input,
                                                                 const c10d::AllgatherOptions &)
{
    zpt_check_tensor(input, "_allgather_base");
    zpt_check_same({output}, input, false, "_allgather_base");
    TORCH_CHECK(output.numel() == input.numel() * size_, "zccl: _allgather_base: output has ",
                output.numel(), " elements, expected ", input.numel() * size_);
    HcclDataType dt = zpt_dtype(input);
    at::Tensor in = zpt_dense_in(input);
    std::function<void()> post;
    at::Tensor out = zpt_dense_out(output, &post);
    HcclComm comm = core_->comm;
    return issue(
        OpType::_ALLGATHER_BASE, "HcclAllGather", ZPT_LANE_COLL, {output}, {input},
        {input, output, in, out},
        [=](aclrtStream s) {
            return zpt_count(in) == 0 ? 0
                                      : (int)HcclAllGather(in.data_ptr(), out.data_ptr(),
                                                           zpt_count(in), dt, comm, s);
        },
        std::move(post));
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupZccl::gather(std::vector<std::vector<at::Tensor>> &outputs,
                         std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts)
{
    zpt_check_single(inputs, "gather");
    check_root(opts.rootRank, "gather");
    bool is_root = rank_ == opts.rootRank;
    if (is_root) {
        TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == (size_t)size_,
                    "zccl: gather: the root expects one list of ", size_, " output tensors");
        zpt_check_same(outputs[0], inputs[0], true, "gather");
    } else {
        TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                    "zccl: gather: only the root passes output tensors");
    }
    HcclDataType dt = zpt_dtype(inputs[0]);
    at::Tensor in = zpt_dense_in(inputs[0]);
    std::function<void()> post;
    at::Tensor flat = is_root ? zpt_flatten_out(outputs[0], &post) : in;
    uint64_t n = zpt_count(in);
    std::vector<uint64_t> sc(size_, 0), sd(size_, 0), rc(size_, 0), rd(size_, 0);
    sc[opts.rootRank] = n;
    for (int i = 0; is_root && i < size_; i++) {
        rc[i] = n;
        rd[i] = n * (uint64_t)i;
    }
    std::vector<at::Tensor> outs = is_root ? outputs[0] : std::vector<at::Tensor>();
    std::vector<at::Tensor> keep = outs;
    keep.push_back(in);
    keep.push_back(flat);
    HcclComm comm = core_->comm;
    return issue(
        OpType::GATHER, "HcclAlltoAllV (gather)", ZPT_LANE_COLL, outs, inputs, std::move(keep),
        [=](aclrtStream s) {
            return n == 0 ? 0
                          : (int)HcclAlltoAllV(in.data_ptr(), sc.data(), sd.data(), dt,
                                               flat.data_ptr(), rc.data(), rd.data(), dt, comm, s);
        },
        std::move(post));
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupZccl::scatter(std::vector<at::Tensor> &outputs,
                          std::vector<std::vector<at::Tensor>> &inputs,
                          const c10d::ScatterOptions &opts)
{
    zpt_check_single(outputs, "scatter");
    check_root(opts.rootRank, "scatter");
    bool is_root = rank_ == opts.rootRank;
    if (is_root) {
        TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == (size_t)size_,
                    "zccl: scatter: the root expects one list of ", size_, " input tensors");
        zpt_check_same(inputs[0], outputs[0], true, "scatter");
    } else {
        TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                    "zccl: scatter: only the root passes input tensors");
    }
    HcclDataType dt = zpt_dtype(outputs[0]);
    std::function<void()> post;
    at::Tensor out = zpt_dense_out(outputs[0], &post);
    at::Tensor flat = is_root ? zpt_flatten_in(inputs[0]) : out;
    std::vector<at::Tensor> keep = is_root ? inputs[0] : std::vector<at::Tensor>();
    keep.push_back(outputs[0]);
    keep.push_back(out);
    keep.push_back(flat);
    HcclComm comm = core_->comm;
    uint32_t root = (uint32_t)opts.rootRank;
    return issue(
        OpType::SCATTER, "HcclScatter", ZPT_LANE_COLL, outputs,
        inputs.empty() ? outputs : inputs[0], std::move(keep),
        [=](aclrtStream s) {
            return zpt_count(out) == 0 ? 0
                                       : (int)HcclScatter(flat.data_ptr(), out.data_ptr(),
                                                          zpt_count(out), dt, root, comm, s);
        },
        std::move(post));
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupZccl::reduce_scatter(std::vector<at::Tensor> &outputs,
                                 std::vector<std::vector<at::Tensor>> &inputs,
                                 const c10d::ReduceScatterOptions &opts)
{
    zpt_check_single(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == (size_t)size_,
                "zccl: reduce_scatter: expects one list of ", size_, " input tensors");
    zpt_check_same(inputs[0], outputs[0], true, "reduce_scatter");
    if (zpt_bitwise(opts.reduceOp, outputs[0].scalar_type())) {
        return bitwise(OpType::REDUCE_SCATTER, "HcclAllGather (bitwise reduce_scatter)", outputs,
                       zpt_flatten_in(inputs[0]), outputs[0], rank_, opts.reduceOp);
    }
    zpt_redop r = zpt_reduce_op(opts.reduceOp, outputs[0].scalar_type());
    HcclDataType dt = zpt_dtype(outputs[0]);
    at::Tensor flat = zpt_flatten_in(inputs[0]);
    at::Tensor out = zpt_dense_in(outputs[0]);
    std::function<void()> post;
    if (r.avg) {
        zpt_divide(out, size_, &post);
    }
    zpt_copy_back(outputs[0], out, &post);
    std::vector<at::Tensor> keep = inputs[0];
    keep.push_back(outputs[0]);
    keep.push_back(out);
    keep.push_back(flat);
    HcclComm comm = core_->comm;
    return issue(
        OpType::REDUCE_SCATTER, "HcclReduceScatter", ZPT_LANE_COLL, outputs,
        inputs.empty() ? outputs : inputs[0], std::move(keep),
        [=](aclrtStream s) {
            return zpt_count(out) == 0 ? 0
                                       : (int)HcclReduceScatter(flat.data_ptr(), out.data_ptr(),
                                                                zpt_count(out), dt, r.op, comm, s);
        },
        std::move(post));
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupZccl::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                       const c10d::ReduceScatterOptions &opts)
{
    zpt_check_tensor(output, "_reduce_scatter_base");
    zpt_check_same({input}, output, false, "_reduce_scatter_base");
    TORCH_CHECK(input.numel() == output.numel() * size_, "zccl: _reduce_scatter_base: input has ",
                input.numel(), " elements, expected ", output.numel() * size_);
    if (zpt_bitwise(opts.reduceOp, output.scalar_type())) {
        return bitwise(OpType::_REDUCE_SCATTER_BASE, "HcclAllGather (bitwise reduce_scatter)",
                       {output}, input, output, rank_, opts.reduceOp);
    }
    zpt_redop r = zpt_reduce_op(opts.reduceOp, output.scalar_type());
    HcclDataType dt = zpt_dtype(output);
    at::Tensor in = zpt_dense_in(input);
    at::Tensor out = zpt_dense_in(output);
    std::function<void()> post;
    if (r.avg) {
        zpt_divide(out, size_, &post);
    }
    zpt_copy_back(output, out, &post);
    HcclComm comm = core_->comm;
    return issue(
        OpType::_REDUCE_SCATTER_BASE, "HcclReduceScatter", ZPT_LANE_COLL, {output}, {input},
        {input, output, in, out},
        [=](aclrtStream s) {
            return zpt_count(out) == 0 ? 0
                                       : (int)HcclReduceScatter(in.data_ptr(), out.data_ptr(),
                                                                zpt_count(out), dt, r.op, comm, s);
        },
        std::move(post));
}

} // namespace zccl_torch

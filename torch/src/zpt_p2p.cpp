/*
 * All-to-all, point-to-point and barrier.
 *
 * alltoall_base without split sizes is HcclAlltoAll; with them (rows of dim
 * 0, as torch defines them) HcclAlltoAllV with counts and displacements in
 * elements. alltoall of tensor lists is one AlltoAllV over flat buffers.
 * send and recv run on lanes of their own (one for sends, one for
 * receives), so a send and a receive posted in either order by two ranks do
 * not wait on each other; messages between a pair of ranks in one direction
 * match in the order issued, and tags are not used for matching (zccl has
 * none): a tag other than 0 is accepted and ignored, as documented.
 */
#include "zpt.hpp"

namespace zccl_torch
{

using c10d::OpType;

/* counts (elements) and displacements from dim-0 split sizes. */
static void zpt_splits(const at::Tensor &t, const std::vector<int64_t> &splits, int n,
                       const char *side, std::vector<uint64_t> *counts,
                       std::vector<uint64_t> *displs)
{
    counts->assign(n, 0);
    displs->assign(n, 0);
    if (splits.empty()) {
        TORCH_CHECK(t.numel() % n == 0, "zccl: alltoall_base: ", side, " has ", t.numel(),
                    " elements, not divisible by the group size ", n);
        for (int i = 0; i < n; i++) {
            (*counts)[i] = zpt_elems(t) / (uint64_t)n;
            (*displs)[i] = zpt_elems(t) / (uint64_t)n * (uint64_t)i;
        }
        return;
    }
    TORCH_CHECK((int)splits.size() == n, "zccl: alltoall_base: ", side, " split sizes has ",
                splits.size(), " entries, expected ", n);
    TORCH_CHECK(t.dim() > 0, "zccl: alltoall_base: ", side,
                " split sizes need a tensor of "
                "at least one dimension");
    int64_t rows = 0;
    for (int64_t s : splits) {
        TORCH_CHECK(s >= 0, "zccl: alltoall_base: negative split size ", s);
        rows += s;
    }
    TORCH_CHECK(rows == t.size(0), "zccl: alltoall_base: ", side, " split sizes sum to ", rows,
                ", dim 0 is ", t.size(0));
    uint64_t row = t.size(0) == 0 ? 0 : zpt_elems(t) / (uint64_t)t.size(0);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        (*counts)[i] = (uint64_t)splits[i] * row;
        (*displs)[i] = off;
        off += (*counts)[i];
    }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::alltoall_base(at::Tensor &output,
                                                               at::Tensor &input,
                                                               std::vector<int64_t> &outputSplits,
                                                               std::vector<int64_t> &inputSplits,
                                                               const c10d::AllToAllOptions &)
{
    zpt_check_tensor(input, "alltoall_base");
    zpt_check_same({output}, input, false, "alltoall_base");
    HcclDataType dt = zpt_dtype(input);
    at::Tensor in = zpt_dense_in(input);
    std::function<void()> post;
    at::Tensor out = zpt_dense_out(output, &post);
    HcclComm comm = core_->comm;
    if (outputSplits.empty() && inputSplits.empty()) {
        TORCH_CHECK(in.numel() == out.numel() && in.numel() % size_ == 0,
                    "zccl: alltoall_base: input and output need the same number of elements, "
                    "divisible by ",
                    size_, "; got ", in.numel(), " and ", out.numel());
        uint64_t n = zpt_elems(in) / (uint64_t)size_;
        return issue(
            OpType::ALLTOALL_BASE, "HcclAlltoAll", ZPT_LANE_COLL, {output}, {input},
            {input, output, in, out},
            [=](aclrtStream s) {
                return n == 0 ? 0
                              : (int)HcclAlltoAll(in.data_ptr(), n, dt, out.data_ptr(), n, dt, comm,
                                                  s);
            },
            std::move(post));
    }
    std::vector<uint64_t> sc, sd, rc, rd;
    zpt_splits(in, inputSplits, size_, "input", &sc, &sd);
    zpt_splits(out, outputSplits, size_, "output", &rc, &rd);
    return issue(
        OpType::ALLTOALL_BASE, "HcclAlltoAllV", ZPT_LANE_COLL, {output}, {input},
        {input, output, in, out},
        [=](aclrtStream s) {
            return (int)HcclAlltoAllV(in.data_ptr(), sc.data(), sd.data(), dt, out.data_ptr(),
                                      rc.data(), rd.data(), dt, comm, s);
        },
        std::move(post));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::alltoall(std::vector<at::Tensor> &outputs,
                                                          std::vector<at::Tensor> &inputs,
                                                          const c10d::AllToAllOptions &)
{
    TORCH_CHECK(inputs.size() == (size_t)size_ && outputs.size() == (size_t)size_,
                "zccl: alltoall: expects ", size_, " input and ", size_, " output tensors, got ",
                inputs.size(), " and ", outputs.size());
    zpt_check_same(inputs, inputs[0], false, "alltoall");
    zpt_check_same(outputs, inputs[0], false, "alltoall");
    HcclDataType dt = zpt_dtype(inputs[0]);
    std::vector<uint64_t> sc(size_), sd(size_), rc(size_), rd(size_);
    uint64_t so = 0, ro = 0;
    for (int i = 0; i < size_; i++) {
        sc[i] = zpt_elems(inputs[i]);
        sd[i] = so;
        so += sc[i];
        rc[i] = zpt_elems(outputs[i]);
        rd[i] = ro;
        ro += rc[i];
    }
    at::Tensor in = zpt_flatten_in(inputs);
    std::function<void()> post;
    at::Tensor out = zpt_flatten_out(outputs, &post);
    std::vector<at::Tensor> keep = inputs;
    keep.insert(keep.end(), outputs.begin(), outputs.end());
    keep.push_back(in);
    keep.push_back(out);
    HcclComm comm = core_->comm;
    return issue(
        OpType::ALLTOALL, "HcclAlltoAllV", ZPT_LANE_COLL, outputs, inputs, std::move(keep),
        [=](aclrtStream s) {
            return (int)HcclAlltoAllV(in.data_ptr(), sc.data(), sd.data(), dt, out.data_ptr(),
                                      rc.data(), rd.data(), dt, comm, s);
        },
        std::move(post));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::send(std::vector<at::Tensor> &tensors, int dst,
                                                      int tag)
{
    zpt_check_single(tensors, "send");
    TORCH_CHECK(dst >= 0 && dst < size_ && dst != rank_, "zccl: send: destination ", dst,
                " is not another rank of the group of ", size_);
    HcclDataType dt = zpt_dtype(tensors[0]);
    at::Tensor d = zpt_dense_in(tensors[0]);
    HcclComm comm = core_->comm;
    note_send(dst);
    return issue(
        OpType::SEND, "HcclSend", ZPT_LANE_SEND, tensors, tensors, {tensors[0], d},
        [=](aclrtStream s) {
            return d.numel() > 0
                       ? (int)HcclSend(d.data_ptr(), zpt_elems(d), dt, (uint32_t)dst, comm, s)
                       : 0;
        },
        nullptr);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::recv(std::vector<at::Tensor> &tensors, int src,
                                                      int tag)
{
    (void)tag;
    return recv_as(tensors, src, OpType::RECV);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::recv_as(std::vector<at::Tensor> &tensors, int src,
                                                         OpType type)
{
    zpt_check_single(tensors, "recv");
    TORCH_CHECK(src >= 0 && src < size_ && src != rank_, "zccl: recv: source ", src,
                " is not another rank of the group of ", size_);
    HcclDataType dt = zpt_dtype(tensors[0]);
    std::function<void()> post;
    at::Tensor d = zpt_dense_out(tensors[0], &post);
    HcclComm comm = core_->comm;
    auto w = issue(
        type, "HcclRecv", ZPT_LANE_RECV, tensors, tensors, {tensors[0], d},
        [=](aclrtStream s) {
            return d.numel() > 0
                       ? (int)HcclRecv(d.data_ptr(), zpt_elems(d), dt, (uint32_t)src, comm, s)
                       : 0;
        },
        std::move(post));
    static_cast<WorkZccl *>(w.get())->src_rank = src;
    recvd_[src]++;
    return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupZccl::barrier(const c10d::BarrierOptions &opts)
{
    HcclComm comm = core_->comm;
    auto w = issue(
        OpType::BARRIER, "HcclBarrier", ZPT_LANE_COLL, {}, {}, {},
        [=](aclrtStream s) { return (int)HcclBarrier(comm, s); }, nullptr);
    if (opts.timeout.count() > 0) {
        static_cast<WorkZccl *>(w.get())->timeout = opts.timeout; /* its waits' bound */
    }
    return w;
}

} // namespace zccl_torch

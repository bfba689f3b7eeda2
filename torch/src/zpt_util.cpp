/*
 * Names for zccl's codes, argument checks, and the dtype / reduction mapping.
 *
 * dtypes: float32, float64, float16, bfloat16, int8, uint8, int16, int32,
 * int64, uint16, uint32 and uint64 map one to one; complex travels as its
 * real type (twice the elements); bool travels as uint8 (a bool tensor holds
 * 0 or 1), so SUM/MAX/BOR become MAX (logical or) and PRODUCT/MIN/BAND become
 * MIN (logical and). Other dtypes are refused with the dtype named.
 * Reductions: SUM, PRODUCT, MIN, MAX map to zccl's; AVG is SUM followed by a
 * division by the group size on the host, for floating and complex dtypes;
 * BAND/BOR/BXOR on integers gather every rank's tensor and fold it on the
 * host (zccl has no bitwise reduction); PREMUL_SUM is refused, as by Gloo.
 */
#include "zpt.hpp"

#include <sstream>

namespace zccl_torch
{

static const char *const zpt_hccl_names[] = {
    "HCCL_SUCCESS",
    "HCCL_E_PARA",
    "HCCL_E_PTR",
    "HCCL_E_MEMORY",
    "HCCL_E_INTERNAL",
    "HCCL_E_NOT_SUPPORT",
    "HCCL_E_NOT_FOUND",
    "HCCL_E_UNAVAIL",
    "HCCL_E_SYSCALL",
    "HCCL_E_TIMEOUT",
    "HCCL_E_OPEN_FILE_FAILURE",
    "HCCL_E_TCP_CONNECT",
    "HCCL_E_ROCE_CONNECT",
    "HCCL_E_TCP_TRANSFER",
    "HCCL_E_ROCE_TRANSFER",
    "HCCL_E_RUNTIME",
    "HCCL_E_DRV",
    "HCCL_E_PROFILING",
    "HCCL_E_CCE",
    "HCCL_E_NETWORK",
    "HCCL_E_AGAIN",
    "HCCL_E_REMOTE",
    "HCCL_E_SUSPENDING",
    "HCCL_E_OPRETRY_FAIL",
    "HCCL_E_OOM",
};

std::string zpt_hccl_name(int code)
{
    std::ostringstream s;
    int n = (int)(sizeof(zpt_hccl_names) / sizeof(zpt_hccl_names[0]));
    if (code >= 0 && code < n) {
        s << zpt_hccl_names[code];
    } else if (code == HCCL_E_IN_STATUS) {
        s << "HCCL_E_IN_STATUS";
    } else {
        s << "HCCL error";
    }
    s << " (" << HcclGetErrorString((HcclResult)code) << ")";
    return s.str();
}

void zpt_throw_hccl(const std::string &what, int code)
{
    /* A peer that never came: worded as torch's tests expect ("Timed out"). */
    TORCH_CHECK(code != HCCL_E_TIMEOUT, "zccl: ", what, ": Timed out waiting for the peers (",
                zpt_hccl_name(code), " [code ", code, "])");
    TORCH_CHECK(false, "zccl: ", what, " failed: ", zpt_hccl_name(code), " [code ", code, "]");
}

void zpt_throw_acl(const std::string &what, int code)
{
    TORCH_CHECK(false, "zccl: ", what, " failed: aclError ", code);
}

void zpt_acl_init()
{
    static std::once_flag once;
    static aclError rc = ACL_SUCCESS;
    std::call_once(once, []() { rc = aclInit(nullptr); });
    if (rc != ACL_SUCCESS && rc != ACL_ERROR_REPEAT_INITIALIZE) {
        zpt_throw_acl("aclInit", rc);
    }
}

HcclDataType zpt_dtype(const at::Tensor &t)
{
    switch (t.scalar_type()) {
    case at::kFloat:
    case at::kComplexFloat:
        return HCCL_DATA_TYPE_FP32;
    case at::kDouble:
    case at::kComplexDouble:
        return HCCL_DATA_TYPE_FP64;
    case at::kHalf:
    case at::kComplexHalf:
        return HCCL_DATA_TYPE_FP16;
    case at::kBFloat16:
        return HCCL_DATA_TYPE_BFP16;
    case at::kChar:
        return HCCL_DATA_TYPE_INT8;
    case at::kByte:
    case at::kBool:
        return HCCL_DATA_TYPE_UINT8;
    case at::kShort:
        return HCCL_DATA_TYPE_INT16;
    case at::kInt:
        return HCCL_DATA_TYPE_INT32;
    case at::kLong:
        return HCCL_DATA_TYPE_INT64;
    case at::kUInt16:
        return HCCL_DATA_TYPE_UINT16;
    case at::kUInt32:
        return HCCL_DATA_TYPE_UINT32;
    case at::kUInt64:
        return HCCL_DATA_TYPE_UINT64;
    default:
        TORCH_CHECK(false, "zccl: dtype ", t.scalar_type(),
                    " is not supported (floating, integer, bool and complex dtypes are)");
    }
}

uint64_t zpt_elems(const at::Tensor &t)
{
    return (uint64_t)t.numel() * (t.is_complex() ? 2u : 1u);
}

const char *zpt_op_name(c10d::ReduceOp::RedOpType op)
{
    static const char *const names[] = {"SUM",  "AVG", "PRODUCT", "MIN",       "MAX",
                                        "BAND", "BOR", "BXOR",    "PREMUL_SUM"};
    return (unsigned)op < 9u ? names[(unsigned)op] : "UNUSED";
}

bool zpt_bitwise(const c10d::ReduceOp &rop, at::ScalarType st)
{
    c10d::ReduceOp::RedOpType op = rop.op_;
    bool bit =
        op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
    return bit && st != at::kBool && at::isIntegralType(st, /*includeBool=*/false);
}

void zpt_fold_bitwise(c10d::ReduceOp::RedOpType op, const at::Tensor &rows, at::Tensor out)
{
    at::Tensor acc = rows[0].clone();
    for (int64_t i = 1; i < rows.size(0); i++) {
        if (op == c10d::ReduceOp::BAND) {
            acc.bitwise_and_(rows[i]);
        } else if (op == c10d::ReduceOp::BOR) {
            acc.bitwise_or_(rows[i]);
        } else {
            acc.bitwise_xor_(rows[i]);
        }
    }
    out.copy_(acc.view(out.sizes()));
}

zpt_redop zpt_reduce_op(const c10d::ReduceOp &rop, at::ScalarType st)
{
    c10d::ReduceOp::RedOpType op = rop.op_;
    if (st == at::kBool) {
        switch (op) {
        case c10d::ReduceOp::SUM:
        case c10d::ReduceOp::MAX:
        case c10d::ReduceOp::BOR:
            return {HCCL_REDUCE_MAX, false};
        case c10d::ReduceOp::PRODUCT:
        case c10d::ReduceOp::MIN:
        case c10d::ReduceOp::BAND:
            return {HCCL_REDUCE_MIN, false};
        default:
            TORCH_CHECK(false, "zccl: ReduceOp.", zpt_op_name(op),
                        " is not supported on bool tensors (SUM/MAX/BOR = or, "
                        "PRODUCT/MIN/BAND = and)");
        }
    }
    TORCH_CHECK(!at::isComplexType(st) || op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::AVG,
                "zccl: ReduceOp.", zpt_op_name(op), " is not supported on complex dtype ", st,
                " (SUM and AVG are)");
    switch (op) {
    case c10d::ReduceOp::SUM:
        return {HCCL_REDUCE_SUM, false};
    case c10d::ReduceOp::PRODUCT:
        return {HCCL_REDUCE_PROD, false};
    case c10d::ReduceOp::MIN:
        return {HCCL_REDUCE_MIN, false};
    case c10d::ReduceOp::MAX:
        return {HCCL_REDUCE_MAX, false};
    case c10d::ReduceOp::AVG:
        TORCH_CHECK(at::isFloatingType(st) || at::isComplexType(st),
                    "zccl: ReduceOp.AVG needs a floating dtype, got ", st,
                    " (zccl has no average: it sums, then divides)");
        return {HCCL_REDUCE_SUM, true};
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
        TORCH_CHECK(false, "zccl: ReduceOp.", zpt_op_name(op), " needs an integer dtype, got ", st);
    default:
        TORCH_CHECK(false, "zccl: ReduceOp.", zpt_op_name(op),
                    " is not supported (as with Gloo: SUM, AVG, PRODUCT, MIN, MAX; BAND, BOR, "
                    "BXOR on integers)");
    }
}

void zpt_check_tensor(const at::Tensor &t, const char *op)
{
    TORCH_CHECK(t.defined(), "zccl: ", op, ": undefined tensor");
    TORCH_CHECK(t.device().is_cpu(), "zccl: ", op, ": tensors must be on the CPU, got ",
                t.device());
    TORCH_CHECK(t.layout() == at::kStrided, "zccl: ", op,
                ": only strided (dense) tensors are supported, got layout ", t.layout());
    (void)zpt_dtype(t);
}

void zpt_check_single(const std::vector<at::Tensor> &ts, const char *op)
{
    TORCH_CHECK(ts.size() == 1, "zccl: ", op, ": expects one tensor per process, got ", ts.size());
    zpt_check_tensor(ts[0], op);
}

void zpt_check_same(const std::vector<at::Tensor> &ts, const at::Tensor &ref, bool same_size,
                    const char *op)
{
    for (size_t i = 0; i < ts.size(); i++) {
        zpt_check_tensor(ts[i], op);
        TORCH_CHECK(ts[i].scalar_type() == ref.scalar_type(), "zccl: ", op, ": tensor ", i,
                    " has dtype ", ts[i].scalar_type(), ", expected ", ref.scalar_type());
        TORCH_CHECK(!same_size || ts[i].numel() == ref.numel(), "zccl: ", op, ": tensor ", i,
                    " has ", ts[i].numel(), " elements, expected ", ref.numel());
    }
}

void zpt_then(std::function<void()> *post, std::function<void()> f)
{
    if (!*post) {
        *post = std::move(f);
        return;
    }
    std::function<void()> first = std::move(*post);
    *post = [first, f]() {
        first();
        f();
    };
}

at::Tensor zpt_dense_in(const at::Tensor &t)
{
    return t.is_contiguous() ? t : t.contiguous();
}

at::Tensor zpt_dense_out(const at::Tensor &t, std::function<void()> *post)
{
    if (t.is_contiguous()) {
        return t;
    }
    /* Never write through a strided view: the op fills a dense temporary
       with t's values (in-place ops read them), then copies back. */
    at::Tensor d = t.contiguous();
    at::Tensor user = t;
    zpt_then(post, [user, d]() mutable { user.copy_(d); });
    return d;
}

/* True when the tensors are contiguous and follow each other in memory. */
static bool zpt_adjacent(const std::vector<at::Tensor> &ts)
{
    if (ts.empty()) {
        return false;
    }
    const char *next = nullptr;
    for (const auto &t : ts) {
        if (!t.is_contiguous() || t.scalar_type() != ts[0].scalar_type()) {
            return false;
        }
        const char *p = (const char *)t.data_ptr();
        if (next != nullptr && p != next) {
            return false;
        }
        next = p + t.numel() * t.element_size();
    }
    return ts[0].storage().nbytes() >= (size_t)(next - (const char *)ts[0].storage().data());
}

static at::Tensor zpt_flat_view(const std::vector<at::Tensor> &ts)
{
    int64_t n = 0;
    for (const auto &t : ts) {
        n += t.numel();
    }
    return at::empty({0}, ts[0].options()).set_(ts[0].storage(), ts[0].storage_offset(), {n}, {1});
}

at::Tensor zpt_flatten_in(const std::vector<at::Tensor> &ts)
{
    if (zpt_adjacent(ts)) {
        return zpt_flat_view(ts);
    }
    std::vector<at::Tensor> flat;
    flat.reserve(ts.size());
    for (const auto &t : ts) {
        flat.push_back(t.reshape({-1}));
    }
    return at::cat(flat);
}

void zpt_unflatten(const at::Tensor &flat, const std::vector<at::Tensor> &outs)
{
    int64_t off = 0;
    for (auto t : outs) {
        t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
        off += t.numel();
    }
}

at::Tensor zpt_flatten_out(const std::vector<at::Tensor> &ts, std::function<void()> *post)
{
    if (zpt_adjacent(ts)) {
        return zpt_flat_view(ts);
    }
    int64_t n = 0;
    for (const auto &t : ts) {
        n += t.numel();
    }
    at::Tensor flat = at::empty({n}, ts[0].options().memory_format(at::MemoryFormat::Contiguous));
    std::vector<at::Tensor> outs = ts;
    zpt_then(post, [flat, outs]() { zpt_unflatten(flat, outs); });
    return flat;
}

} // namespace zccl_torch

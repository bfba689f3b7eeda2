/*
 * The Python module zccl_torch._C: the group's constructor for
 * torch.distributed.Backend.register_backend, and the allocator switch.
 * torch.distributed is imported first so the c10d base classes (Store,
 * Backend, Work) are registered with pybind11 before ours derive from
 * them.
 */
#include "zpt.hpp"

#include <pybind11/chrono.h>

namespace py = pybind11;
using namespace zccl_torch;

static c10::intrusive_ptr<c10d::Backend> zpt_create(const c10::intrusive_ptr<c10d::Store> &store,
                                                    int rank, int size,
                                                    const std::chrono::duration<float> &timeout)
{
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
    return c10::make_intrusive<ProcessGroupZccl>(store, rank, size, ms);
}

PYBIND11_MODULE(_C, m)
{
    py::module::import("torch.distributed");
    m.doc() = "zccl backend for torch.distributed (see zccl_torch/__init__.py)";
    py::class_<ProcessGroupZccl, c10d::Backend, c10::intrusive_ptr<ProcessGroupZccl>>(
        m, "ProcessGroupZccl")
        .def("_comm_handle", &ProcessGroupZccl::comm_handle,
             "The HcclComm handle as an integer (diagnostics).");
    m.def("_create", &zpt_create, py::arg("store"), py::arg("rank"), py::arg("size"),
          py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
          "Make a zccl process group (the creator registered as backend 'zccl').");
    m.def("use_activated_memory", &zpt_alloc_enable, py::arg("reserve_bytes") = (size_t)64 << 30,
          py::arg("chunk_bytes") = (size_t)256 << 20, py::call_guard<py::gil_scoped_release>(),
          "Serve CPU tensor storage from activated memory (zero-copy collectives).");
    m.def("activated_memory_enabled", &zpt_alloc_enabled);
    m.def(
        "is_activated",
        [](const at::Tensor &t) {
            return t.device().is_cpu() && t.numel() > 0 &&
                   zpt_alloc_contains(t.data_ptr(), (size_t)(t.numel() * t.element_size()));
        },
        "True when a tensor's data lies wholly in one activated chunk.");
    m.def(
        "allocator_stats",
        []() {
            std::vector<uint64_t> v = zpt_alloc_stats();
            py::dict d;
            const char *names[] = {"reserved", "mapped", "in_use", "cached", "chunks", "fallbacks"};
            for (size_t i = 0; i < v.size(); i++) {
                d[names[i]] = v[i];
            }
            return d;
        },
        "Bytes reserved, mapped in chunks, in use and cached; chunks; fallbacks.");
    zpt_floor_bind(m);
}

/*
 * The floor: a test-only c10d::Backend whose collectives return a work that
 * is already complete, without moving data, checking tensors or touching
 * zccl. Timing torch.distributed calls on it measures what PyTorch's own path
 * costs (Python wrappers, the dispatcher, the Work's Python object, wait());
 * benchmarks/torch_collectives.py subtracts it from zccl's time to see what
 * the zccl backend adds. It is C++ like ProcessGroupZccl, so the floor and
 * zccl cross the same pybind11 and dispatcher boundaries; a Python backend
 * would add a Python call per op that zccl does not pay.
 *
 * The package never registers it: zccl_torch._C._create_floor is there for
 * the benchmark, which registers it under a name of its own. Its results are
 * wrong by design (the outputs keep whatever they held).
 */
#include "zpt.hpp"

#include <pybind11/chrono.h>

namespace zccl_torch
{

namespace
{

class WorkFloor : public c10d::Work
{
  public:
    WorkFloor()
    {
        completed_ = true;
    }
    bool wait(std::chrono::milliseconds) override
    {
        return true;
    }
};

c10::intrusive_ptr<c10d::Work> zpt_floor_work()
{
    return c10::make_intrusive<WorkFloor>();
}

class ProcessGroupFloor : public c10d::Backend
{
  public:
    ProcessGroupFloor(int rank, int size) : c10d::Backend(rank, size) {}
    const std::string getBackendName() const override
    {
        return "zccl_floor";
    }
    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &,
                                             const c10d::BroadcastOptions &) override
    {
        return zpt_floor_work();
    }
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &,
                                             const c10d::AllreduceOptions &) override
    {
        return zpt_floor_work();
    }
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &,
                                          const c10d::ReduceOptions &) override
    {
        return zpt_floor_work();
    }
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &,
                                             std::vector<at::Tensor> &,
                                             const c10d::AllgatherOptions &) override
    {
        return zpt_floor_work();
    }
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &, at::Tensor &,
                                                   const c10d::AllgatherOptions &) override
    {
        return zpt_floor_work();
    }
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &,
                                          std::vector<at::Tensor> &,
                                          const c10d::GatherOptions &) override
    {
        return zpt_floor_work();
    }
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &,
                                           std::vector<std::vector<at::Tensor>> &,
                                           const c10d::ScatterOptions &) override
    {
        return zpt_floor_work();
    }
    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &, at::Tensor &,
                                                        const c10d::ReduceScatterOptions &) override
    {
        return zpt_floor_work();
    }
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &, at::Tensor &, std::vector<int64_t> &,
                                                 std::vector<int64_t> &,
                                                 const c10d::AllToAllOptions &) override
    {
        return zpt_floor_work();
    }
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &) override
    {
        return zpt_floor_work();
    }
};

c10::intrusive_ptr<c10d::Backend> zpt_floor_create(const c10::intrusive_ptr<c10d::Store> &,
                                                   int rank, int size,
                                                   const std::chrono::duration<float> &)
{
    return c10::make_intrusive<ProcessGroupFloor>(rank, size);
}

} // namespace

void zpt_floor_bind(pybind11::module &m)
{
    namespace py = pybind11;
    py::class_<ProcessGroupFloor, c10d::Backend, c10::intrusive_ptr<ProcessGroupFloor>>(
        m, "_ProcessGroupFloor");
    m.def("_create_floor", &zpt_floor_create, py::arg("store"), py::arg("rank"), py::arg("size"),
          py::arg("timeout"),
          "Test only: a backend whose ops complete at once and move nothing (the cost of "
          "PyTorch's own path; see benchmarks/torch_collectives.py). Never registered by "
          "the package.");
}

} // namespace zccl_torch

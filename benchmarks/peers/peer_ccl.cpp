/*
 * oneCCL's ccl::allreduce (in place, float32 or bfloat16, sum) through
 * peer_loop.h, for scripts/bench_peers.sh, built against the headers and
 * library of PyPI's oneCCL CPU packages. No MPI launcher: the script starts
 * the ranks itself with PEER_RANK, PEER_NRANKS and PEER_KVS (a file path) in
 * the environment; rank 0 makes the main key-value store and writes its
 * address to that file, the others wait for it. The CCL_* settings come from
 * the environment, as a user would set them.
 *
 * Usage: PEER_RANK=r PEER_NRANKS=n PEER_KVS=FILE peer_ccl SIZES fp32|bf16 BUDGET_MS ROUNDS
 */
#include <oneapi/ccl.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

#include "peer_loop.h"

namespace
{

struct peer_ccl_lib {
    ccl::communicator *comm;
    ccl::datatype dtype;
};

int peer_ccl_all_reduce(void *lib, void *buf, size_t count)
{
    auto *l = static_cast<peer_ccl_lib *>(lib);
    ccl::allreduce(buf, buf, count, l->dtype, ccl::reduction::sum, *l->comm).wait();
    return 0;
}

void peer_ccl_barrier(void *lib)
{
    ccl::barrier(*static_cast<peer_ccl_lib *>(lib)->comm).wait();
}

double peer_ccl_max(void *lib, double v)
{
    double m = v;
    ccl::allreduce(&v, &m, 1, ccl::datatype::float64, ccl::reduction::max,
                   *static_cast<peer_ccl_lib *>(lib)->comm)
        .wait();
    return m;
}

/* Rank 0 publishes the address by rename, so a reader never sees half a file. */
ccl::shared_ptr_class<ccl::kvs> peer_ccl_kvs(int rank, const std::string &path)
{
    ccl::kvs::address_type addr;
    if (rank == 0) {
        auto kvs = ccl::create_main_kvs();
        addr = kvs->get_address();
        std::string tmp = path + ".tmp";
        std::ofstream(tmp, std::ios::binary).write(addr.data(), addr.size());
        std::rename(tmp.c_str(), path.c_str());
        return kvs;
    }
    for (int waited_ms = 0;; waited_ms += 10) {
        std::ifstream f(path, std::ios::binary);
        if (f && f.read(addr.data(), addr.size())) {
            break;
        }
        if (waited_ms > 60000) {
            std::fprintf(stderr, "peer_ccl: rank %d: no KVS address in %s after 60 s\n", rank,
                         path.c_str());
            std::exit(3);
        }
        usleep(10000);
    }
    return ccl::create_kvs(addr);
}

} // namespace

int main(int argc, char **argv)
{
    const char *r = std::getenv("PEER_RANK");
    const char *n = std::getenv("PEER_NRANKS");
    const char *kvs_path = std::getenv("PEER_KVS");
    if (argc != 5 || r == nullptr || n == nullptr || kvs_path == nullptr ||
        (std::string(argv[2]) != "fp32" && std::string(argv[2]) != "bf16")) {
        std::fprintf(stderr,
                     "usage: PEER_RANK=r PEER_NRANKS=n PEER_KVS=FILE peer_ccl SIZES "
                     "fp32|bf16 BUDGET_MS ROUNDS (dtype '%s')\n",
                     argc > 2 ? argv[2] : "");
        return 2;
    }
    ccl::init();
    peer_ops_t ops = {};
    ops.rank = std::atoi(r);
    ops.nranks = std::atoi(n);
    ops.bf16 = std::string(argv[2]) == "bf16";
    auto kvs = peer_ccl_kvs(ops.rank, kvs_path);
    auto comm = ccl::create_communicator(ops.nranks, ops.rank, kvs);
    peer_ccl_lib lib = {&comm, ops.bf16 ? ccl::datatype::bfloat16 : ccl::datatype::float32};
    ops.lib = &lib;
    ops.all_reduce = peer_ccl_all_reduce;
    ops.barrier = peer_ccl_barrier;
    ops.max = peer_ccl_max;
    return peer_sweep(&ops, argv[1], std::atof(argv[3]), std::atoi(argv[4]));
}

# nccl-tests-style tools sharing one harness, the MPI baseline, the measured
# reference and the training-style workload. They link libhccl and libascendcl like a
# user's program; MPI only broadcasts the root info and runs the baseline.
# The footer's path counters come from libhccl's internal test interface
# (zccl_hccl_internal: a header, the symbols are exported by libhccl).
find_package(MPI REQUIRED COMPONENTS C)

add_library(zccl_bench STATIC harness.c bench_run.c bench_data.c bench_mpi.c bench_probe.c
            bench_ref.c bench_ref_kern.c)
target_include_directories(zccl_bench PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_definitions(zccl_bench PRIVATE ZCCL_BENCH_VERSION="${PROJECT_VERSION}")
# The reference's kernels are the limit the tables hold zccl to: optimise
# them like a kernel.
# Loops on 64-byte lines, as zccl's kernels (ZCCL_LOOP_ALIGN).
set_source_files_properties(bench_ref_kern.c PROPERTIES COMPILE_OPTIONS "-O3;${ZCCL_LOOP_ALIGN}")
# zccl_common: the last-level cache size (zc/llc.h), read as the library reads it.
target_link_libraries(zccl_bench PUBLIC hccl ascendcl MPI::MPI_C m PRIVATE zccl_hccl_internal
                      zccl_common)

set(ZCCL_BENCH_TOOLS all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf
    reduce_perf alltoall_perf sendrecv_perf)
foreach(tool ${ZCCL_BENCH_TOOLS})
  add_executable(${tool} ${tool}.c)
  target_link_libraries(${tool} PRIVATE zccl_bench)
endforeach()

# The model's loops are the workload's "compute": optimise them like a kernel.
add_executable(train_dp train_dp.c train_mlp.c)
target_link_libraries(train_dp PRIVATE hccl ascendcl MPI::MPI_C m)
set_source_files_properties(train_mlp.c PROPERTIES COMPILE_OPTIONS -O3)

# Smoke tests: every tool at np 2 on both paths with the MPI baseline and the
# check on (a tool exits non-zero on any #wrong or failed call), np 4 for the
# two collectives the README measures, and the training workload.
if(ZCCL_BUILD_TESTS)
  set(ZCCL_BENCH_MPIRUN ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root
      --mca btl self,vader --bind-to none)
  set(ZCCL_BENCH_SMOKE -b 8 -e 1M -f 32 -n 5 -w 1 -c 1 -m 1)
  foreach(tool ${ZCCL_BENCH_TOOLS})
    foreach(z 1 0)
      add_test(NAME bench_${tool}_np2_z${z}
        COMMAND ${ZCCL_BENCH_MPIRUN} -np 2 $<TARGET_FILE:${tool}> ${ZCCL_BENCH_SMOKE} -z ${z})
      set_tests_properties(bench_${tool}_np2_z${z} PROPERTIES LABELS mpi RUN_SERIAL TRUE TIMEOUT 300)
    endforeach()
  endforeach()
  foreach(tool all_reduce_perf all_gather_perf)
    add_test(NAME bench_${tool}_np4_z1
      COMMAND ${ZCCL_BENCH_MPIRUN} -np 4 $<TARGET_FILE:${tool}> ${ZCCL_BENCH_SMOKE} -z 1)
    set_tests_properties(bench_${tool}_np4_z1 PROPERTIES LABELS mpi RUN_SERIAL TRUE TIMEOUT 300)
  endforeach()
  # Cold-cache and blocking modes (zccl, MPI and the reference rotate through
  # the same buffers; the reference's results are checked too).
  foreach(tool all_reduce_perf all_gather_perf)
    foreach(np 2 4)
      add_test(NAME bench_${tool}_np${np}_cold_blocking
        COMMAND ${ZCCL_BENCH_MPIRUN} -np ${np} $<TARGET_FILE:${tool}> ${ZCCL_BENCH_SMOKE} -z 1
                --cold 1 --blocking 1)
      set_tests_properties(bench_${tool}_np${np}_cold_blocking PROPERTIES LABELS mpi RUN_SERIAL TRUE
                           TIMEOUT 300)
    endforeach()
  endforeach()
  # --version and --help answer without mpirun; a bad mode value is refused.
  add_test(NAME bench_version COMMAND all_reduce_perf --version)
  set_tests_properties(bench_version PROPERTIES LABELS mpi TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "all_reduce_perf \\(zccl\\) ${PROJECT_VERSION}")
  add_test(NAME bench_help COMMAND all_gather_perf --help)
  set_tests_properties(bench_help PROPERTIES LABELS mpi TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "--blocking 0\\|1.*--cold 0\\|1")
  add_test(NAME bench_bad_mode
    COMMAND ${ZCCL_BENCH_MPIRUN} -np 1 $<TARGET_FILE:all_reduce_perf> --cold 2)
  set_tests_properties(bench_bad_mode PROPERTIES LABELS mpi TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "bad value '2' for option --cold")
  # A null run (--null 1): the zccl column times the reference itself, whose
  # results are checked in that column too; it needs activated memory.
  add_test(NAME bench_null_np2
    COMMAND ${ZCCL_BENCH_MPIRUN} -np 2 $<TARGET_FILE:all_gather_perf> ${ZCCL_BENCH_SMOKE} -z 1
            --repeat 3 --null 1)
  set_tests_properties(bench_null_np2 PROPERTIES LABELS mpi RUN_SERIAL TRUE TIMEOUT 300
                       PASS_REGULAR_EXPRESSION "NULL RUN.*Out of bounds values : 0 OK")
  add_test(NAME bench_null_needs_z1
    COMMAND ${ZCCL_BENCH_MPIRUN} -np 1 $<TARGET_FILE:all_reduce_perf> -z 0 --null 1)
  set_tests_properties(bench_null_needs_z1 PROPERTIES LABELS mpi TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "--null 1 needs the reference on activated memory")
  add_test(NAME bench_all_reduce_perf_np2_inplace_hccl
    COMMAND ${ZCCL_BENCH_MPIRUN} -np 2 $<TARGET_FILE:all_reduce_perf> -b 8 -e 64K -f 64 -n 5 -w 1
            -I 1 -d int32 -o max --format hccl)
  set_tests_properties(bench_all_reduce_perf_np2_inplace_hccl PROPERTIES LABELS mpi RUN_SERIAL TRUE TIMEOUT 300)
  foreach(np 2 4)
    add_test(NAME bench_train_dp_np${np}
      COMMAND ${ZCCL_BENCH_MPIRUN} -np ${np} $<TARGET_FILE:train_dp> --steps 4 --quick)
    set_tests_properties(bench_train_dp_np${np} PROPERTIES LABELS mpi RUN_SERIAL TRUE TIMEOUT 300)
  endforeach()
endif()

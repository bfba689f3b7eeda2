#!/bin/sh
# Install the build tree into a temporary prefix and build an outside program
# with plain cc (from lib/ and, as CANN Makefiles do, from lib64/ with each
# library name), pkg-config and find_package(zccl), from either directory.
# usage: check.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/p" >/dev/null
for f in include/acl/acl.h include/acl/acl_rt.h include/acl/acl_base.h include/acl/acl_prof.h \
         include/acl/acl_mdl.h include/hccl/hccl.h include/hccl/hccl_types.h \
         include/hccl/hccl_comm.h include/zccl/version.h lib/cmake/zccl/zcclConfig.cmake \
         lib/pkgconfig/hccl.pc lib/pkgconfig/ascendcl.pc lib64/cmake/zccl/zcclConfig.cmake \
         lib64/pkgconfig/hccl.pc; do
    test -e "$tmp/p/$f" || { echo "missing after install: $f"; exit 1; }
done
for d in lib lib64; do
    for l in libhccl.so libascendcl.so libacl_rt.so libmsprofiler.so; do
        test -e "$tmp/p/$d/$l" || { echo "missing after install: $d/$l"; exit 1; }
    done
done
cc -I"$tmp/p/include" "$src/tests/install/prog.c" -L"$tmp/p/lib" -lhccl -lascendcl \
   -Wl,-rpath,"$tmp/p/lib" -o "$tmp/plain"
"$tmp/plain"
cc "$src/tests/install/prog.c" $(PKG_CONFIG_PATH="$tmp/p/lib/pkgconfig" pkg-config --cflags --libs hccl) \
   -Wl,-rpath,"$tmp/p/lib" -o "$tmp/pc"
"$tmp/pc"
cc -I"$tmp/p/include" "$src/tests/install/prog.c" -L"$tmp/p/lib" -lhccl -lacl_rt \
   -Wl,-rpath,"$tmp/p/lib" -o "$tmp/aclrt"
"$tmp/aclrt"
# CANN's Makefiles: -L${ASCEND_HOME_PATH}/lib64 with either runtime name, and -lmsprofiler.
cc -I"$tmp/p/include" "$src/tests/install/prog.c" -L"$tmp/p/lib64" -lhccl -lascendcl \
   -Wl,-rpath,"$tmp/p/lib64" -o "$tmp/lib64_ascendcl"
"$tmp/lib64_ascendcl"
cc -DZT_PROF -I"$tmp/p/include" "$src/tests/install/prog.c" -L"$tmp/p/lib64" -lhccl -lacl_rt \
   -lmsprofiler -Wl,-rpath,"$tmp/p/lib64" -o "$tmp/lib64_aclrt"
"$tmp/lib64_aclrt"
cc "$src/tests/install/prog.c" \
   $(PKG_CONFIG_PATH="$tmp/p/lib64/pkgconfig" pkg-config --cflags --libs hccl) \
   -Wl,-rpath,"$tmp/p/lib" -o "$tmp/pc64"
"$tmp/pc64"
# The package version: this minor is accepted, an older one is not, as
# SameMajorVersion would (SameMinorVersion: before 1.0 a minor release may
# break the API). At minor 0 the next one stands in.
ver=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$tmp/p/lib/cmake/zccl/zcclConfigVersion.cmake")
major=${ver%%.*}
minor=$(echo "$ver" | cut -d. -f2)
other=$((minor > 0 ? minor - 1 : minor + 1))
if cmake -S "$src/tests/install" -B "$tmp/other" -DCMAKE_PREFIX_PATH="$tmp/p" \
        -DZCCL_REQUEST="$major.$other" >/dev/null 2>&1; then
    echo "find_package(zccl $major.$other) accepted zccl $ver"; exit 1
fi
cmake -S "$src/tests/install" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/p" \
    -DZCCL_REQUEST="$major.$minor" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer"
cmake -S "$src/tests/install" -B "$tmp/consumer64" -Dzccl_DIR="$tmp/p/lib64/cmake/zccl" >/dev/null
cmake --build "$tmp/consumer64" >/dev/null
"$tmp/consumer64/consumer"
# A prefix whose lib64/ exists already: one link per library and package file.
mkdir -p "$tmp/q/lib64"
cmake --install "$build" --prefix "$tmp/q" >/dev/null
cc -DZT_PROF -I"$tmp/q/include" "$src/tests/install/prog.c" -L"$tmp/q/lib64" -lhccl -lacl_rt \
   -lmsprofiler -Wl,-rpath,"$tmp/q/lib64" -o "$tmp/q64"
"$tmp/q64"
cc "$src/tests/install/prog.c" \
   $(PKG_CONFIG_PATH="$tmp/q/lib64/pkgconfig" pkg-config --cflags --libs hccl) \
   -Wl,-rpath,"$tmp/q/lib" -o "$tmp/qpc64"
"$tmp/qpc64"
cmake -S "$src/tests/install" -B "$tmp/qconsumer64" -Dzccl_DIR="$tmp/q/lib64/cmake/zccl" >/dev/null
cmake --build "$tmp/qconsumer64" >/dev/null
"$tmp/qconsumer64/consumer"
echo "install check: headers, lib/ and lib64/ libraries, pkg-config and find_package(zccl $major.$minor) work"

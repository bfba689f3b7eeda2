#!/bin/sh
# Install the build tree into a temporary prefix and build an outside program
# three ways: plain cc, pkg-config, and find_package(zccl).
# usage: check.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/p" >/dev/null
for f in include/acl/acl.h include/acl/acl_rt.h include/acl/acl_base.h include/hccl/hccl.h \
         include/hccl/hccl_types.h include/hccl/hccl_comm.h lib/libascendcl.so lib/libacl_rt.so \
         lib/libhccl.so lib/cmake/zccl/zcclConfig.cmake lib/pkgconfig/hccl.pc \
         lib/pkgconfig/ascendcl.pc; do
    test -e "$tmp/p/$f" || { echo "missing after install: $f"; exit 1; }
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
cmake -S "$src/tests/install" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/p" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer"
echo "install check: headers, libraries, pkg-config and find_package(zccl) all work"

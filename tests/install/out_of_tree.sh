#!/bin/sh
# An installed kiln builds a model project outside its tree: `cmake --install` into a prefix, the
# prefix copied elsewhere (the original removed), then — with kiln's build and source trees hidden
# (a private mount namespace mounts empty folders over them), so no path baked in from the build
# tree can make it pass — tests/install/project configures with find_package(kiln), builds a
# model executable, a model library and a C program embedding it, and runs both.
#   out_of_tree.sh BUILD_DIR SOURCE_DIR
set -eu
B=$(cd "$1" && pwd); S=$(cd "$2" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/kiln-install-test.XXXXXX")
trap 'rm -rf "$W"' EXIT
if ! unshare -m --propagation private true 2>/dev/null; then
  echo "SKIP: no private mount namespace (unshare -m, needs root): cannot hide the build tree"; exit 77
fi
cmake --install "$B" --prefix "$W/prefix0" > "$W/install.log"
cp -a "$W/prefix0" "$W/kiln" && rm -rf "$W/prefix0"
cp -a "$S/tests/install/project" "$W/project"
unshare -m --propagation private sh -eu -c '
  mount -t tmpfs none "$1"
  [ -d "$2" ] && mount -t tmpfs none "$2"
  if [ -e "$1/CMakeCache.txt" ] || [ -e "$2/CMakeLists.txt" ]; then echo "the trees are still visible"; exit 1; fi
  export KILN_CACHE_DIR="$3/cache"
  cmake -S "$3/project" -B "$3/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -Dkiln_DIR="$3/kiln/lib/cmake/kiln" > "$3/configure.log" || { cat "$3/configure.log"; exit 1; }
  cmake --build "$3/build" || exit 1
  "$3/build/bin/tiny" --random-weights --tokens 1,2,3
  "$3/build/embed"
' sh "$B" "$S" "$W"

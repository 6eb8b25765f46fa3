#!/usr/bin/env bash
# bench/serve/setup.sh: what bench/serve/load.py times kiln's server against and with (never run
# by ./test.sh): llama.cpp's own llama-server, built here (for this CPU) from the source that the
# llama-cpp-python 0.3.36 source distribution vendors, without its web UI, OpenSSL or curl; and the
# official `openai` Python client, in the peers' virtual environment (bench/peers/setup.sh).
# Idempotent: what is already built is kept.
#
#   bench/serve/setup.sh        -> build/llama-server/bin/llama-server, build/peers-venv/bin/python -c "import openai"
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=build/peers-venv
OUT=build/llama-server
VERSION=0.3.36
[ -x "$VENV/bin/python" ] || bench/peers/setup.sh "$VENV"
"$VENV/bin/python" -c "import openai" 2>/dev/null || "$VENV/bin/pip" install --quiet "openai>=1.50,<3"
"$VENV/bin/python" -c "import openai; print('serve: openai client', openai.__version__)"
if [ -x "$OUT/bin/llama-server" ]; then
  echo "serve: $OUT/bin/llama-server is built"
  exit 0
fi
mkdir -p "$OUT/src"
if [ ! -d "$OUT/src/llama_cpp_python-$VERSION" ]; then
  "$VENV/bin/pip" download --quiet --no-deps --no-binary :all: -d "$OUT/src" "llama-cpp-python==$VERSION"
  tar xzf "$OUT/src/llama_cpp_python-$VERSION.tar.gz" -C "$OUT/src"
fi
SRC="$OUT/src/llama_cpp_python-$VERSION/vendor/llama.cpp"
echo "serve: building llama-server from $SRC (several minutes)"
cmake -S "$SRC" -B "$OUT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
  -DCMAKE_INSTALL_PREFIX="$PWD/$OUT" > "$OUT/configure.log"
cmake --build "$OUT/build" --target llama-server -j "$(nproc)"
mkdir -p "$OUT/bin"
cp "$OUT/build/bin/llama-server" "$OUT/bin/llama-server.tmp" && mv "$OUT/bin/llama-server.tmp" "$OUT/bin/llama-server"
# Its shared libraries (libllama, libggml*) beside it.
find "$OUT/build/bin" -maxdepth 1 -name "*.so*" -exec cp -P {} "$OUT/bin/" \;
"$OUT/bin/llama-server" --version 2>&1 | head -2

#!/usr/bin/env bash
# bench/peers/setup.sh: the peers kiln is timed against, in a virtual environment under build/
# (never run by ./test.sh). PyPI's torch wheel pulls several GB of CUDA wheels; that is fine on
# demand. Idempotent: an environment that already has the pinned versions is kept.
#
#   bench/peers/setup.sh [VENV]        (default build/peers-venv)
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${1:-build/peers-venv}
PINS=(torch==2.15.0 transformers==5.24.0 onnxruntime==1.32.0 onnx onnxscript safetensors numpy gguf accelerate)
# llama.cpp's Python binding, built from its source distribution (its C++ compiled here, for
# this CPU: a wheel built elsewhere would not use this machine's instructions): several minutes.
LLAMA_CPP=llama-cpp-python==0.3.36
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - <<'PY' 2>/dev/null; then
import importlib.metadata as m, sys
want = {"torch": "2.15.0", "transformers": "5.24.0", "onnxruntime": "1.32.0", "llama_cpp_python": "0.3.36"}
sys.exit(0 if all(m.version(k) == v for k, v in want.items()) and m.version("onnx") and m.version("onnxscript")
         and m.version("gguf") and m.version("accelerate") else 1)
PY
  echo "peers: $VENV already has ${PINS[*]:0:3} $LLAMA_CPP"
  exit 0
fi
command -v python3 >/dev/null || { echo "peers: python3 is needed (apt install python3 python3-venv)" >&2; exit 1; }
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || { echo "peers: python3 -m venv failed (apt install python3-venv)" >&2; exit 1; }
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "${PINS[@]}"
echo "peers: building $LLAMA_CPP from source (several minutes)"
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$VENV/bin/pip" install --quiet --no-binary llama-cpp-python "$LLAMA_CPP"
"$VENV/bin/python" -c "import torch, transformers, onnxruntime; print('peers: torch', torch.__version__, 'transformers', transformers.__version__, 'onnxruntime', onnxruntime.__version__)"

#!/usr/bin/env bash
# One GPU session for issue 36 (docs/solver.md, "On a GPU"): build cuPDLPx offline, test, benchmark.
#
#   tools/gpu_session.sh prepare     # on a machine with network: fill gpu-files/ (ignored by git)
#   tools/gpu_session.sh             # on the GPU machine (no network), from the repository root
#
# gpu-files/ holds the cupdlpx sdist, PSLP's source at tag v0.0.8 (cuPDLPx's CMake would fetch it) and
# cp312 wheels of what the GPU machine lacks (highspy, threadpoolctl).  The run installs them and the
# built cupdlpx into $SITE (not the system), runs tests/test_solve_gpu.py, then tools/bench_gpu.py with
# a time limit per case and in all, writing bench.jsonl (a line per case, as it ends) and bench.txt into $OUT.
# Settings: CASES (comma-separated, default all of tools/bench_gpu.py), CASE_TIMEOUT (s, default 240),
# LIMIT (s for the whole benchmark, default 480), CUDA_ARCH (default 90: H100/H200), OUT, SITE.
set -euo pipefail
FILES=${GPU_FILES:-gpu-files}
CUPDLPX=0.3.0
PSLP=v0.0.8

if [[ ${1:-} == prepare ]]; then
    mkdir -p "$FILES/wheels"
    python3 -m pip download --no-deps --no-binary cupdlpx "cupdlpx==$CUPDLPX" -d "$FILES"
    rm -rf "$FILES/pslp" && git clone -q --depth 1 --branch "$PSLP" https://github.com/dance858/PSLP "$FILES/pslp"
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$FILES/wheels" highspy threadpoolctl
    ls -la "$FILES" "$FILES/wheels"
    exit 0
fi

OUT=${OUT:-/tmp/a2a-gpu}
SITE=${SITE:-/tmp/a2a-gpu-site}
mkdir -p "$OUT" "$SITE"
export PATH=/usr/local/cuda/bin:$PATH CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-14}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
nvcc --version | tail -1 | tee -a "$OUT/gpu.txt"
python3 -m pip install -q --no-index --no-deps --target "$SITE" "$FILES"/wheels/*.whl
rm -rf "/tmp/cupdlpx-$CUPDLPX" && tar xzf "$FILES/cupdlpx-$CUPDLPX.tar.gz" -C /tmp
t0=$(date +%s)
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target "$SITE" "/tmp/cupdlpx-$CUPDLPX" \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
    -C cmake.define.FETCHCONTENT_SOURCE_DIR_PSLP="$PWD/$FILES/pslp" \
    -C cmake.define.FETCHCONTENT_FULLY_DISCONNECTED=ON > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
echo "cupdlpx $CUPDLPX built in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/gpu.txt"
export PYTHONPATH="$SITE:$PWD"
python3 -c "from a2a_compiler.solve.gpu import unavailable; print('cuPDLPx:', unavailable() or 'runs here')" \
    | tee -a "$OUT/gpu.txt"
(timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_solve_gpu.py 2>&1 || true) | tail -5 \
    | tee "$OUT/tests.txt"
export A2A_MAX_LP_GIB=${A2A_MAX_LP_GIB:-48}   # the host-memory guard's limit on this 128 GB machine (N=4000)
timeout "${LIMIT:-480}" python3 tools/bench_gpu.py --json --quiet --timeout "${CASE_TIMEOUT:-240}" --workers 8 \
    ${CASES:+--cases "$CASES"} > "$OUT/bench.jsonl" || true
python3 - "$OUT/bench.jsonl" <<'EOF' | tee "$OUT/bench.txt"
import json, sys
sys.path.insert(0, "tools")
from bench_gpu import describe
for line in open(sys.argv[1]):
    print(describe(json.loads(line)))
EOF

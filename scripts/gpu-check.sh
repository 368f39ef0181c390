#!/usr/bin/env bash
# The GPU kit: everything mpsim measures on a real GPU, in one run, into one folder.
#
#   scripts/gpu-check.sh [--out DIR] [--wheels DIR] [--layers N] [--hw NAME] [--tar FILE] [--dry-run]
#                        [--policies P1,P2,...] [--batches B1,B2,...] [--tuned P1,P2,...] [--plain-loop P1,...]
#                        [--two-byte-scales P1,...]
#                        [--gen-len N] [--gpu-tests "PATH1 PATH2 ..." (or PATH1,PATH2)] [--bench-models M1,M2,...]
#                        [--bench-modules qkv,o,...] [--deadline SECONDS] [--max-step SECONDS]
#                        [--steps tests,kernels,attention,captures,gemlite,probes,compile]
#
# On an H200 with no network (the device's python3 already has torch, triton, numpy, pandas, ...):
#   1. installs what the machine lacks from wheels carried with the checkout (simpy, from --wheels,
#      default .whl/; scripts/gpu-check-wheels.sh downloads them beforehand on a machine with pip),
#      and makes the checkout importable as `mpsim` without pip (a folder of links, like the
#      editable install's mapping);
#   2. runs `pytest -m gpu` (the Triton kernels against their references on the GPU, and the
#      inline-asm one-row group GEMV against its pure-Triton twin bit for bit:
#      tests/kernels/test_kern_gemv_asm_gpu.py);
#   3. runs the kernel and attention benchmarks (analysis/bench/kernels.py: every weight format and
#      the asm GEMV at M = 1, 4, 16 on Llama-7B (vicuna-7b), Llama-3-8B and MobileLLaMA-1.4B shapes,
#      achieved GB/s and the ratio to fp16, each one-row config also with its K loop unpipelined
#      (impl triton-plain-loop: what the pipelined loop buys, docs/kernels.md#pipelined-k-loops;
#      `python -m mpsim.analysis.validation.loop_stages OUT/bench_kernels.csv` sets it beside the model;
#      each group config that reads scale-zero words also with its 2-byte scale and zero loads, impl
#      triton-2byte-scales: what the staged scales buy, docs/kernels.md#staged-scales);
#      attention.py);
#   4. captures vicuna-7b shapes with random weights: prompt 512, 128 new tokens, batch 1 and 16,
#      policies fp16, w4, ap4-4@64-3, w4+kv8. --layers N (default 4) keeps N of the 32 layers:
#      every launch has the model's exact shapes, the layer count only repeats them (32 for the
#      whole model; random weights for 32 layers take ~40 s per capture on the host), with the
#      launchers' heuristic configs (MPSIM_AUTOTUNE=0, as synthesis records them), then the --tuned
#      policies (default w4) again with GPU-side autotuning on (kernels/autotune.py: every candidate
#      config of each GEMM shape compiled and timed once; the rows record the configs it chose),
#      then the --plain-loop policies (default fp16, w4) at batch 1 with MPSIM_LOOP_STAGES=0 (the
#      one-row GEMVs' K loop unpipelined: the pipelined loop's gain over whole decode steps), then the
#      --two-byte-scales policies (default w4) at every batch above 1 with MPSIM_SZ_WORDS=0 (the group
#      W_hat loops' 2-byte scale and zero loads: the staged scales' gain over whole steps);
#   5. runs `mpsim validate` on every capture against --hw (default h200-sxm);
#   6. times GemLite 0.4.1's kernels (SGLang's torchao W4A16 path) at llama-3-8b's decode shapes
#      beside mpsim's gemlite room (analysis/bench/gemlite_gpu.py), when the carried wheels hold
#      GemLite's sdist (scripts/gpu-check-wheels.sh); without it its CSV says so;
#   7. (run right after 1) probes the two mechanisms behind the largest open fp8 errors
#      (analysis/bench/hw_probes.py): cuBLASLt's fp8 GEMM on each collector's operand values (does
#      the power-limited clock depend on them?) and a Triton GEMM through TMA descriptors vs
#      pointer loads one row past a tile (do the box rows past M cost time?), ~1 minute;
#   8. (run right after 7) compiles every tensor-core K loop at the launchers' configs with the
#      machine's own Triton and ptxas for its GPU and records ptxas's report: registers, spills and
#      whether it serialized the loop's wgmmas, which the simulator assumes it does not
#      (analysis/bench/wgmma_check.py, docs/kernels.md#unserialized-wgmma; no GPU time, ~30 s).
# Everything goes under --out (default out/gpu-check-<UTC time>): SUMMARY.md (steps, exit codes,
# times, environment), log.txt, pytest-gpu.txt, bench_kernels.csv, bench_attention.csv,
# captures/*.parquet, validate/*-{rows,summary}.csv, bench_gemlite.csv, hw_probes.csv,
# wgmma_check.csv. --tar FILE
# also packs the folder.
# A failing step is recorded and the next one still runs; the exit code is 1 if any step failed.
#
# --dry-run: the same steps on this machine's CPU (the Triton interpreter) at tiny shapes (one
# layer of hidden 128, prompt 4, 2 new tokens, batch 1 and 2, 2 benchmark repeats), with the
# project's .venv python when there is one: what tests/scripts/test_gpu_check.py runs.
# --policies / --batches override the capture grid (default fp16,w4,ap4-4@64-3,w4+kv8 and 1,16;
# --policies '' for none, the --tuned captures only);
# --tuned the autotuned captures ('' for none); --plain-loop the policies captured again at batch 1
# (when --batches has 1) with MPSIM_LOOP_STAGES=0, the one-row GEMVs' K loop unpipelined as the
# 2026-12-04 captures ran it (default fp16,w4; '' for none: docs/kernels.md#pipelined-k-loops);
# --two-byte-scales the policies captured again at every batch above 1 with MPSIM_SZ_WORDS=0
# (default w4; '' for none: docs/kernels.md#staged-scales);
# --gen-len the new tokens per capture (default 128);
# --gpu-tests the test files `pytest -m gpu` runs (default: all of tests/); --bench-models and
# --bench-modules narrow the kernel benchmark (analysis/bench/kernels.py --models / --modules).
# --steps: which of the seven measuring steps run (default all; dependencies always run).
# --deadline SECONDS: a time box for the whole kit (a lent GPU's minutes are few). Each step runs
# under `timeout` for what is left of it (and at most --max-step seconds); a step killed so is
# recorded with exit 124 and what it wrote stays (the benchmark CSVs are flushed row by row); a step
# that would start with under 10 s left is recorded as skipped. Neither makes the kit fail: the
# SUMMARY says which steps ran out of time.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DRY=0 OUT="" WHEELS="$ROOT/.whl" LAYERS=4 HW=h200-sxm TAR="" POLICIES="" BATCHES="" TUNED=w4 PLAIN="fp16 w4" LOADS2=w4
GEN="" TESTS="" BENCH_MODELS="" BENCH_MODULES="" DEADLINE=0 MAX_STEP=0 STEPS="tests kernels attention captures gemlite probes compile"
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY=1 ;;
        --out) OUT=$2; shift ;;
        --wheels) WHEELS=$2; shift ;;
        --layers) LAYERS=$2; shift ;;
        --hw) HW=$2; shift ;;
        --tar) TAR=$2; shift ;;
        --policies) POLICIES=${2//,/ }; POLICIES_SET=1; shift ;;
        --batches) BATCHES=${2//,/ }; shift ;;
        --tuned) TUNED=${2//,/ }; shift ;;
        --plain-loop) PLAIN=${2//,/ }; shift ;;
        --two-byte-scales) LOADS2=${2//,/ }; shift ;;
        --gen-len) GEN=$2; shift ;;
        --gpu-tests) TESTS=${2//,/ }; shift ;;
        --bench-models) BENCH_MODELS=${2//,/ }; shift ;;
        --bench-modules) BENCH_MODULES=${2//,/ }; shift ;;
        --deadline) DEADLINE=$2; shift ;;
        --max-step) MAX_STEP=$2; shift ;;
        --steps) STEPS=${2//,/ }; shift ;;
        -h|--help) sed -n '2,70p' "$0"; exit 0 ;;
        *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
OUT=${OUT:-$ROOT/out/gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/captures" "$OUT/validate"
OUT=$(cd "$OUT" && pwd)
cd "$ROOT"
LOG="$OUT/log.txt" SUMMARY="$OUT/SUMMARY.md"
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ "$DRY" = 1 ] && [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"
else PY=python3; fi
if [ "$DRY" = 1 ]; then export TRITON_INTERPRET=1; fi
export PYTHONHASHSEED=0 PYTHONUNBUFFERED=1 MPSIM_CACHE_DIR="$OUT/.sim-cache"
FAILED=0 START=$(date +%s) TIMED_OUT=""
for n in $STEPS; do
    case "$n" in tests|kernels|attention|captures|gemlite|probes|compile) ;;
        *) echo "gpu-check: --steps: unknown step '$n' (expected tests, kernels, attention, captures, gemlite, probes, compile)" >&2; exit 2 ;;
    esac
done
wants() { [[ " $STEPS " == *" $1 "* ]]; }
for n in "$DEADLINE" "$MAX_STEP" "$LAYERS" ${GEN:+"$GEN"}; do
    [[ "$n" =~ ^[0-9]+$ ]] || { echo "gpu-check: '$n' is not a whole number of seconds/layers/tokens" >&2; exit 2; }
done

{
    echo "# mpsim GPU check"
    echo
    echo "- started $(date -u +%Y-%m-%dT%H:%M:%SZ), $([ "$DRY" = 1 ] && echo 'DRY RUN (CPU, tiny shapes)' || echo 'GPU run')"
    # GPU_CHECK_COMMIT: the caller's commit, where the checkout travelled without its own .git (the
    # device tool's copy carries the .git the session started from, not the tree that travelled)
    echo "- checkout: ${GPU_CHECK_COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    echo "- python: $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])' 2>&1))"
    echo "- GPU: $(nvidia-smi -L 2>/dev/null | head -1 || true)"
    echo
    echo "| step | exit | seconds |"
    echo "|---|---|---|"
} > "$SUMMARY"

step() {  # step NAME COMMAND...: run (time-boxed by --deadline/--max-step), log, record exit and time
    local name=$1 t0 rc limit=0 left fn=0
    shift
    t0=$(date +%s)
    declare -F "$1" >/dev/null && fn=1  # a function of this script (deps): quick, always run, no box
    if [ "$DEADLINE" -gt 0 ] && [ "$fn" = 0 ]; then
        left=$(( START + DEADLINE - t0 ))
        if [ "$left" -lt 10 ]; then
            echo "=== $name: skipped, ${left} s left of --deadline $DEADLINE" | tee -a "$LOG"
            echo "| $name | skipped (deadline) | 0 |" >> "$SUMMARY"
            TIMED_OUT="$TIMED_OUT $name;"
            return 0
        fi
        limit=$left
    fi
    if [ "$fn" = 0 ] && [ "$MAX_STEP" -gt 0 ] && { [ "$limit" = 0 ] || [ "$MAX_STEP" -lt "$limit" ]; }; then
        limit=$MAX_STEP
    fi
    echo "=== $name: $*$([ "$limit" -gt 0 ] && echo " (time box $limit s)")" | tee -a "$LOG"
    if [ "$limit" -gt 0 ]; then timeout --kill-after=5 "$limit" "$@" >> "$LOG" 2>&1
    else "$@" >> "$LOG" 2>&1; fi
    rc=$?
    echo "| $name | $rc | $(( $(date +%s) - t0 )) |" >> "$SUMMARY"
    if [ "$limit" -gt 0 ] && { [ "$rc" = 124 ] || [ "$rc" = 137 ]; }; then
        TIMED_OUT="$TIMED_OUT $name;"
        echo "    $name ran out of its ${limit} s time box (exit $rc); its output so far is kept" | tee -a "$LOG"
    elif [ "$rc" != 0 ]; then
        FAILED=1
        echo "    $name failed (exit $rc), see $LOG" | tee -a "$LOG"
    fi
    return 0
}

deps() {  # simpy from the carried wheels; the checkout as `mpsim` through a folder of links
    local site="$OUT/.site"
    mkdir -p "$site"
    if ! "$PY" -c "import simpy" 2>/dev/null; then
        ls "$WHEELS"/*.whl >/dev/null 2>&1 || { echo "no wheels in $WHEELS (scripts/gpu-check-wheels.sh)"; return 1; }
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$site" "$WHEELS"/*.whl || return 1
    fi
    # GemLite (the gemlite step; optional): its sdist, built without isolation against this torch
    if ls "$WHEELS"/gemlite-*.tar.gz >/dev/null 2>&1 && ! "$PY" -c "import gemlite" 2>/dev/null; then
        "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir \
            --target "$site" "$WHEELS"/gemlite-*.tar.gz || echo "gemlite: the sdist did not install (the gemlite step says so)"
    fi
    if ! "$PY" -P -c "import mpsim.sim, mpsim.kernels, mpsim.analysis, mpsim.hw_models" 2>/dev/null; then
        # Not installed: link it. Every python step then runs with -P (no working directory on
        # sys.path), or the checkout's own mpsim/ folder, which lacks kernels/, traces/, ..., would
        # shadow the links.
        mkdir -p "$site/mpsim"
        for f in "$ROOT"/mpsim/*; do ln -sfn "$f" "$site/mpsim/$(basename "$f")"; done
        for d in kernels traces hw_models reference analysis; do ln -sfn "$ROOT/$d" "$site/mpsim/$d"; done
    fi
    PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" "$PY" -P -c \
        "import mpsim, mpsim.sim, mpsim.kernels, mpsim.analysis, mpsim.hw_models, mpsim.cli, simpy, torch, triton; print('mpsim from', mpsim.__file__, '| simpy', simpy.__version__, '| torch', torch.__version__, '| triton', triton.__version__, '| cuda', torch.cuda.is_available())"
}

model_config() {  # a Llama config.json: vicuna-7b's shapes with $LAYERS layers, or a tiny one
    local path="$OUT/model-config.json"
    if [ "$DRY" = 1 ]; then
        echo '{"model_type": "llama", "_name_or_path": "tiny-dry-run", "num_hidden_layers": 1, "hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 160}' > "$path"
    else
        echo "{\"model_type\": \"llama\", \"_name_or_path\": \"vicuna-7b-${LAYERS}l\", \"num_hidden_layers\": $LAYERS, \"hidden_size\": 4096, \"intermediate_size\": 11008, \"num_attention_heads\": 32, \"num_key_value_heads\": 32, \"vocab_size\": 32000}" > "$path"
    fi
    echo "$path"
}

step "dependencies" deps
export PYTHONPATH="$OUT/.site${PYTHONPATH:+:$PYTHONPATH}"
CONFIG=$(model_config)
[ -n "${POLICIES_SET:-}" ] || POLICIES="fp16 w4 ap4-4@64-3 w4+kv8"  # --policies '': tuned captures only
if [ "$DRY" = 1 ]; then
    PROMPT=4 GEN=${GEN:-2} BATCHES=${BATCHES:-1 2} BENCH=(--dry-run --repeats 2 --warmup 1)
    GEMM_BENCH=(--modules ${BENCH_MODULES:-o down}) GPU_TESTS=(${TESTS:-tests/kernels/test_kern_gemm_gpu.py
               tests/kernels/test_kern_attn_gpu.py tests/kernels/test_kern_gemv_asm_gpu.py})
else
    PROMPT=512 GEN=${GEN:-128} BATCHES=${BATCHES:-1 16} BENCH=() GEMM_BENCH=() GPU_TESTS=(${TESTS:-tests})
    [ -n "$BENCH_MODULES" ] && GEMM_BENCH=(--modules $BENCH_MODULES)
    [ -n "$BENCH_MODELS" ] && GEMM_BENCH+=(--models $BENCH_MODELS)
fi
# the probes first: a minute, and they settle the largest open fp8 errors
PROBE_ARGS=(--out "$OUT/hw_probes.csv")
[ "$DRY" = 1 ] && PROBE_ARGS+=(--dry-run --warm-s 0 --repeats 1 --calls 1)
wants probes && step "hardware probes" "$PY" -P -m mpsim.analysis.bench.hw_probes "${PROBE_ARGS[@]}"
COMPILE_ARGS=(--out "$OUT/wgmma_check.csv")
[ "$DRY" = 1 ] && COMPILE_ARGS+=(--dry-run)
wants compile && step "compile check" "$PY" -P -m mpsim.analysis.bench.wgmma_check "${COMPILE_ARGS[@]}"
wants tests && step "pytest -m gpu" "$PY" -P -m pytest -q -m gpu -p no:cacheprovider "${GPU_TESTS[@]}"
wants kernels && step "kernel benchmark" "$PY" -P -m mpsim.analysis.bench.kernels "${BENCH[@]}" "${GEMM_BENCH[@]}" --no-attention \
    --out "$OUT/bench_kernels.csv"
wants attention && step "attention benchmark" "$PY" -P -m mpsim.analysis.bench.attention "${BENCH[@]}" \
    --out "$OUT/bench_attention.csv"
capture_grid() {  # AUTOTUNE SUFFIX LOOP_STAGES SZ_WORDS BATCHES POLICY...
    local tune=$1 suffix=$2 loop=$3 words=$4 batches=$5 batch policy name
    shift 5
    for batch in $batches; do
        for policy in "$@"; do
            name="vicuna-7b-$(echo "$policy" | sed 's/@/at/g; s/+/_/g')-b$batch$suffix"
            step "capture $name" env MPSIM_AUTOTUNE="$tune" MPSIM_LOOP_STAGES="$loop" MPSIM_SZ_WORDS="$words" "$PY" -P -m mpsim.cli capture --model "$CONFIG" \
                --dummy --policy "$policy" --prompt-len "$PROMPT" --gen-len "$GEN" --batch "$batch" \
                --out "$OUT/captures/$name.parquet"
            [ -f "$OUT/captures/$name.parquet" ] && step "validate $name" "$PY" -P -m mpsim.cli validate \
                "$OUT/captures/$name.parquet" --hw "$HW" --out "$OUT/validate/$name-rows.csv" \
                --summary "$OUT/validate/$name-summary.csv"
        done
    done
}
if wants captures; then
    # shellcheck disable=SC2086  # word lists on purpose
    capture_grid 0 "" 1 1 "$BATCHES" $POLICIES
    # shellcheck disable=SC2086
    [ -n "$TUNED" ] && capture_grid 1 "-tuned" 1 1 "$BATCHES" $TUNED
    # shellcheck disable=SC2086  # the one-row loop unpipelined, beside the pipelined batch-1 captures
    [ -n "$PLAIN" ] && [[ " $BATCHES " == *" 1 "* ]] && capture_grid 0 "-plain-loop" 0 1 1 $PLAIN
    # the group W_hat loops on 2-byte scale and zero loads, beside the batch > 1 captures
    MANY=$(for b in $BATCHES; do [ "$b" -gt 1 ] && echo "$b"; done | tr '\n' ' ')
    # shellcheck disable=SC2086
    [ -n "$LOADS2" ] && [ -n "${MANY// /}" ] && capture_grid 0 "-2byte-scales" 1 0 "$MANY" $LOADS2
fi
GEMLITE_ARGS=(--hw "$HW" --out "$OUT/bench_gemlite.csv")
[ "$DRY" = 1 ] && GEMLITE_ARGS+=(--dry-run)
wants gemlite && step "gemlite benchmark" "$PY" -P -m mpsim.analysis.bench.gemlite_gpu "${GEMLITE_ARGS[@]}"
sed -n '/^=== pytest -m gpu/,/^=== /p' "$LOG" | sed '$d' > "$OUT/pytest-gpu.txt"
{
    echo
    echo "- finished in $(( $(date +%s) - START )) s; $([ "$FAILED" = 0 ] && echo 'every step that ran to its end passed' || echo 'SOME STEPS FAILED (log.txt)')"
    [ -z "$TIMED_OUT" ] || echo "- out of time (--deadline $DEADLINE s, --max-step $MAX_STEP s), cut short or skipped:$TIMED_OUT"
} >> "$SUMMARY"
rm -rf "$OUT/.site" "$OUT/.sim-cache"
if [ -n "$TAR" ]; then tar -czf "$TAR" -C "$(dirname "$OUT")" "$(basename "$OUT")" && echo "wrote $TAR"; fi
cat "$SUMMARY"
exit "$FAILED"

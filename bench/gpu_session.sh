#!/bin/bash
# One lent GPU window, as one command (the device tool runs at most 10 minutes a command): the CUDA tests, then
# bench/gpu_step.py, then the gpu tier (python -m sec_lib.book gpu-tier) until the budget, resumable. Everything
# it makes goes to $OUT, at most 8 files: machine.txt, tests.log, bench.log, gpu_step.json, tier.log, smi.csv, gpu_tier.tar
# (data/reference/gpu/ as exported after the last finished chunk, and the gpu profile's pretrained trunk and its
# provenance where this call pretrained it; over 15 MiB, the tar comes in parts gpu_tier.tar.00, .01: join them with
# `cat gpu_tier.tar.* > gpu_tier.tar`, since a lent machine returns at most 16 MiB a file). Where this repo's dependencies are missing
# (pytorch-metric-learning on the lent image), a folder .pydeps/ carried with the tree goes on PYTHONPATH.
#
#   BUDGET=530 OUT=/tmp/out SEC_GIT_COMMIT=$(git rev-parse HEAD) bash bench/gpu_session.sh
#
# TESTS=0, BENCH=0, TIER=0 leave a part out (a window's first call can measure, and a second one, made at once while
# the machine is still warm, train). JOBS (default 4) processes of TOGETHER (default 1) runs each: on the H100 of
# 2026-11-27, 4 processes of one run trained a run in about 44 s of wall time, and 8 were no faster (the bench's
# 4 x 4 gave more steps per second, but a chunk of 16 runs takes most of a 10-minute call).
set -u
OUT=${OUT:-/tmp/gpu-session}
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $(( ${BUDGET:-530} - ($(date +%s) - T0) )); }
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:$PWD/.pydeps${PYTHONPATH:+:$PYTHONPATH}"
export SEC_RUNS_DIR=${SEC_RUNS_DIR:-/tmp/sec-runs}
# the CPU kernel pin in the environment before any Python starts (the image's pytest plugins import numpy first)
eval "$(python3 -c "from sec_lib import kernels
for k, v in kernels.PINS[kernels.pin_name()].items(): print(f'export {k}=\"{v}\"')")"
{ date -u; nvidia-smi; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda,
'cudnn', torch.backends.cudnn.version())"; lscpu | head -20; echo "commit ${SEC_GIT_COMMIT:-unknown}"; } \
  > "$OUT/machine.txt" 2>&1

# the 64-px glyph pool, rendered here once (the bench and the tier read it), while the CUDA tests run
python3 -c "from sec_lib.runs import experiments as ex; from sec_lib.runs.commands import prepare_data
import time; t = time.time(); prepare_data(ex.get_profile('gpu')); print(f'rendered in {time.time() - t:.0f} s')" \
  > "$OUT/render.log" 2>&1 &
render=$!
if [ "${TESTS:-1}" = 1 ]; then
  timeout 170 python3 -m pytest -q -p no:cacheprovider -rs tests/test_device_path.py tests/test_monitor.py \
    > "$OUT/tests.log" 2>&1
  echo "tests rc=$? at $(( $(date +%s) - T0 )) s" >> "$OUT/tests.log"
fi
wait $render
cat "$OUT/render.log" >> "$OUT/machine.txt"; rm -f "$OUT/render.log"

if [ "${BENCH:-1}" = 1 ]; then
  timeout ${BENCH_S:-300} python3 bench/gpu_step.py --steps 40 --warmup 10 --profile-steps 10 \
    --out "$OUT/gpu_step.json" > "$OUT/bench.log" 2>&1
  echo "bench rc=$? at $(( $(date +%s) - T0 )) s" >> "$OUT/bench.log"
  # the last evaluation's k-means as a chunk of 4 processes meets it: restarts one at a time, then 4 at once
  timeout 200 python3 bench/kmeans_restarts.py --workers 4 --processes 4 >> "$OUT/bench.log" 2>&1
  echo "kmeans bench rc=$? at $(( $(date +%s) - T0 )) s" >> "$OUT/bench.log"
fi

t=$(left)
if [ "${TIER:-1}" != 1 ]; then
  echo "gpu tier left out (TIER=${TIER})" > "$OUT/tier.log"
elif [ "$t" -gt 90 ]; then
  # the tier starts no chunk predicted to end later than 75 s before the budget, and is killed 45 s before it: a
  # chunk may run 30 s over its prediction (the command's start included) and still come back
  minutes=$(python3 -c "print(round(($t - 75) / 60, 2))")
  # (the runner's CLI needs the book's packages; the command itself does not)
  # the GPU's utilization while the tier trains, every second (smi.csv: timestamp, utilization %, memory used MiB)
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 1 > "$OUT/smi.csv" 2>&1 &
  smi=$!
  timeout $(( t - 45 )) python3 -c "from sec_lib.runs import gpu_tier
gpu_tier.command($minutes, ${JOBS:-4}, ${TOGETHER:-1})" > "$OUT/tier.log" 2>&1
  echo "gpu-tier rc=$? at $(( $(date +%s) - T0 )) s" >> "$OUT/tier.log"
  kill $smi 2>/dev/null
  # the runs a chunk stopped by the time limit had finished are in the store, not yet in the tier folder
  timeout 35 python3 -c "from sec_lib.runs import gpu_tier; gpu_tier.export()" >> "$OUT/tier.log" 2>&1
else
  echo "no time left for the gpu tier ($t s)" > "$OUT/tier.log"
fi
# a trunk pretrained in this call (newer than machine.txt) goes back with the tier; a committed one is not resent
trunk=$(find data/reference/pretrained -name 'glyph_resnet18s_64px.*' -newer "$OUT/machine.txt" 2>/dev/null)
tar cf "$OUT/gpu_tier.tar" data/reference/gpu $trunk
if [ "$(stat -c %s "$OUT/gpu_tier.tar")" -gt $(( 15 * 1024 * 1024 )) ]; then
  split -b 15M -d "$OUT/gpu_tier.tar" "$OUT/gpu_tier.tar." && rm "$OUT/gpu_tier.tar"
fi
echo "done at $(( $(date +%s) - T0 )) s"

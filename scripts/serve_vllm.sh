#!/usr/bin/env bash
# Start `vllm serve MODEL` in the background and wait until it answers.
#
#   scripts/serve_vllm.sh MODEL [PORT]        e.g. scripts/serve_vllm.sh Qwen/Qwen2.5-3B-Instruct
#
# Then run with backbone=qwen2.5-3b (or llama3.2-3b, or openai_server with
# backbone.provider.model=MODEL); set VLLM_BASE_URL when PORT is not 8000.
# Environment: VLLM_HOST (default 127.0.0.1), VLLM_ARGS (extra flags, e.g.
# "--tensor-parallel-size 2 --max-model-len 8192"), VLLM_STARTUP_TIMEOUT (seconds, default 900),
# VLLM_LOG (default vllm-PORT.log). vLLM itself reads VLLM_API_KEY if you want a key; it is
# never put on a command line here. Stop the server with: kill "$(cat vllm-PORT.pid)".
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
model=$1
port=${2:-8000}
host=${VLLM_HOST:-127.0.0.1}
timeout_s=${VLLM_STARTUP_TIMEOUT:-900}
log=${VLLM_LOG:-vllm-${port}.log}
pid_file=vllm-${port}.pid

if ! command -v vllm >/dev/null 2>&1; then
    echo "vllm not found: on a GPU host run pip install 'memsys-bench[vllm]'" >&2
    exit 1
fi

# shellcheck disable=SC2086  # VLLM_ARGS is a list of flags
vllm serve "$model" --host "$host" --port "$port" --seed 0 ${VLLM_ARGS:-} >"$log" 2>&1 &
pid=$!
echo "$pid" >"$pid_file"

health_url="http://${host}:${port}/health"
deadline=$((SECONDS + timeout_s))
until python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" \
    "$health_url" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "vllm serve exited before answering; last lines of $log:" >&2
        tail -n 30 "$log" >&2
        exit 1
    fi
    if ((SECONDS >= deadline)); then
        echo "vllm serve did not answer within ${timeout_s}s; stopping it (log: $log)" >&2
        kill "$pid" 2>/dev/null || true
        exit 1
    fi
    sleep 1
done
echo "vLLM serving $model at http://${host}:${port}/v1 (pid $pid, log $log, pid file $pid_file)"

# Sourced by bench/gpu/e2e.sh (and tests/bench/e2e_controller_ports.sh): starts
# the e2e run's controller on ports of its own, so that it starts beside another
# controller (a demo left up holds 127.0.0.1:50151 and the /metrics default
# 127.0.0.1:9152).
#
# start_e2e_controller BIN WORK PORT: PORT 0 takes any free port. Sets
# CONTROLLER_PID and exports TRELLIS_ADDR (the bound port); returns 1 when the
# controller did not start within 10 s, with its log's tail on stderr.
start_e2e_controller() {
  local bin=$1 work=$2 port=$3
  rm -f "$work/controller.port" "$work/controller.metrics-port"
  "$bin/trellis-controller" --listen "127.0.0.1:$port" --port-file "$work/controller.port" \
    --socket "$work/ctl/controller.sock" \
    --metrics-listen 127.0.0.1:0 --metrics-port-file "$work/controller.metrics-port" \
    --db "$work/controller.db" --output-root "$work/runs" --data-root "$work" \
    --schedule-interval-ms 200 \
    >"$work/controller.log" 2>&1 &
  CONTROLLER_PID=$!
  for _ in $(seq 100); do
    [ -s "$work/controller.port" ] && break
    kill -0 "$CONTROLLER_PID" 2>/dev/null || break
    sleep 0.1
  done
  if [ ! -s "$work/controller.port" ]; then
    tail -20 "$work/controller.log" >&2
    return 1
  fi
  export TRELLIS_ADDR=127.0.0.1:$(cat "$work/controller.port")
}

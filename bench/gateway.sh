#!/usr/bin/env bash
# The serving gateway's throughput beside nginx and HAProxy, in one run, on one machine, with the same backend
# and the same load line as ../shared/bench/gateway/nginx_reference.sh (whose configurations this script
# repeats): an nginx backend serving a 64-byte body (1 worker), and in front of it, one after another,
#   nginx_proxy      nginx 1 worker, keep-alive upstream (keepalive 128), proxy_buffering on
#   haproxy_proxy    HAProxy, 1 thread, http-reuse always
#   gpugeek_gateway  `gpugeek gateway` (1 event loop thread) with one route to the backend
# each measured RUNS times with `wrk -t1 -c50 -d10s --latency` after a 2 s warm-up. Prints a table (median
# req/s, p50, p99, and the gateway's ratio to each) on stderr and one JSON line on stdout.
#
#   apt-get install -y --no-install-recommends nginx-light wrk haproxy
#   bash bench/gateway.sh [BUILD_DIR]             # RUNS=3 DURATION=10s CONNS=50 by default
#
# Knobs (env): RUNS, DURATION, CONNS, BODY_BYTES (64), BASE_PORT (18180: backend, +1 nginx, +2 haproxy,
# +3 gateway), PIPELINE_DEPTH (the gateway's --pipeline-depth, 16; 1 turns upstream pipelining off).
set -euo pipefail

BUILD=${1:-build}
RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
BODY_BYTES=${BODY_BYTES:-64}
BASE_PORT=${BASE_PORT:-18180}
PIPELINE_DEPTH=${PIPELINE_DEPTH:-16}
BACKEND_PORT=$BASE_PORT NGINX_PORT=$((BASE_PORT + 1)) HAPROXY_PORT=$((BASE_PORT + 2)) GATEWAY_PORT=$((BASE_PORT + 3))

NGINX=$(command -v nginx || echo /usr/sbin/nginx)
WRK=$(command -v wrk || echo /usr/bin/wrk)
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
for tool in "$NGINX" "$WRK" "$HAPROXY"; do
  [ -x "$tool" ] || { echo "bench/gateway.sh: $tool missing: apt-get install nginx-light wrk haproxy" >&2; exit 2; }
done
GPUGEEK="$BUILD/gpugeek"
[ -x "$GPUGEEK" ] || { echo "bench/gateway.sh: $GPUGEEK missing: build it first (ninja -C $BUILD gpugeek)" >&2; exit 2; }

WORK=$(mktemp -d -t gpugeek-gwbench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() {
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done
  echo "port $1 did not open" >&2
  return 1
}
for p in $BACKEND_PORT $NGINX_PORT $HAPROXY_PORT $GATEWAY_PORT; do
  port_free "$p" || { echo "port $p busy; set BASE_PORT" >&2; exit 2; }
done

mkdir -p "$WORK/www" "$WORK/backend" "$WORK/proxy"
head -c "$BODY_BYTES" /dev/zero | tr '\0' 'x' >"$WORK/www/index.html"
chmod 755 "$WORK" "$WORK/www"
chmod 644 "$WORK/www/index.html"

common_http() {
  cat <<EOF
    access_log off;
    client_body_temp_path $1/client_body;
    proxy_temp_path $1/proxy_temp;
    fastcgi_temp_path $1/fastcgi_temp;
    uwsgi_temp_path $1/uwsgi_temp;
    scgi_temp_path $1/scgi_temp;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
EOF
}
nginx_conf() {  # dir, server block
  cat <<EOF
daemon off;
master_process on;
worker_processes 1;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 4096; multi_accept on; }
http {
$(common_http "$1")
$2
}
EOF
}
nginx_conf "$WORK/backend" "    default_type text/plain;
    server {
        listen 127.0.0.1:$BACKEND_PORT reuseport backlog=4096;
        root $WORK/www;
        location / { try_files /index.html =404; }
    }" >"$WORK/backend/nginx.conf"
nginx_conf "$WORK/proxy" "    upstream backend {
        server 127.0.0.1:$BACKEND_PORT;
        keepalive 128;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$NGINX_PORT reuseport backlog=4096;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering on;
        }
    }" >"$WORK/proxy/nginx.conf"
cat >"$WORK/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn 4000
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    option http-keep-alive
    http-reuse always
frontend fe
    bind 127.0.0.1:$HAPROXY_PORT
    default_backend be
backend be
    server s1 127.0.0.1:$BACKEND_PORT maxconn 1000
EOF
cat >"$WORK/routes.yaml" <<EOF
routes:
  - service: bench
    versions:
      - name: v1
        weight: 100
        replicas: [{id: backend, address: 127.0.0.1:$BACKEND_PORT}]
EOF

parse_wrk() {  # wrk output -> "rps p50_ms p99_ms errors"
  awk '
    function ms(v) {
      if (v ~ /us$/) { sub(/us$/, "", v); return v / 1000 }
      if (v ~ /ms$/) { sub(/ms$/, "", v); return v + 0 }
      if (v ~ /s$/)  { sub(/s$/,  "", v); return v * 1000 }
      return v
    }
    /Requests\/sec:/ { rps = $2 }
    $1 == "50%" { p50 = ms($2) }
    $1 == "99%" { p99 = ms($2) }
    /Socket errors:/ { gsub(/,/, ""); err += $4 + $6 + $8 + $10 }
    /Non-2xx or 3xx responses:/ { err += $5 }
    END { printf "%s %.3f %.3f %d\n", rps, p50, p99, err + 0 }'
}
declare -A RES
measure() {  # name port
  "$WRK" -t1 -c"$CONNS" -d2s "http://127.0.0.1:$2/" >/dev/null 2>&1 || true
  for i in $(seq 1 "$RUNS"); do
    local line
    line=$("$WRK" -t1 -c"$CONNS" -d"$DURATION" --latency "http://127.0.0.1:$2/" | parse_wrk)
    echo "# $1 run $i: rps p50_ms p99_ms errors = $line" >&2
    RES[$1]+="$line;"
  done
}
medians() {  # name -> "rps p50 p99 errors"
  printf '%s' "${RES[$1]}" | tr ';' '\n' | awk '
    NF == 4 { n++; r[n] = $1; a[n] = $2; b[n] = $3; e += $4 }
    function med(x, n,   i, j, t, y) {
      for (i = 1; i <= n; i++) y[i] = x[i]
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (y[j] < y[i]) { t = y[i]; y[i] = y[j]; y[j] = t }
      return (n % 2) ? y[(n + 1) / 2] : (y[n / 2] + y[n / 2 + 1]) / 2
    }
    END { printf "%.0f %.3f %.3f %d\n", med(r, n), med(a, n), med(b, n), e }'
}

"$NGINX" -p "$WORK/backend" -c "$WORK/backend/nginx.conf" -e "$WORK/backend/error.log" &
PIDS+=($!)
wait_port "$BACKEND_PORT"
"$NGINX" -p "$WORK/proxy" -c "$WORK/proxy/nginx.conf" -e "$WORK/proxy/error.log" &
PIDS+=($!)
wait_port "$NGINX_PORT"
"$HAPROXY" -f "$WORK/haproxy.cfg" -db >"$WORK/haproxy.log" 2>&1 &
PIDS+=($!)
wait_port "$HAPROXY_PORT"
"$GPUGEEK" gateway --routes "$WORK/routes.yaml" --listen "127.0.0.1:$GATEWAY_PORT" --metrics-listen off \
  --pipeline-depth "$PIPELINE_DEPTH" >"$WORK/gateway.log" 2>&1 &
PIDS+=($!)
wait_port "$GATEWAY_PORT"
for port in $BACKEND_PORT $NGINX_PORT $HAPROXY_PORT $GATEWAY_PORT; do
  body=$(curl -fsS "http://127.0.0.1:$port/") || { echo "port $port did not answer 200" >&2; exit 3; }
  [ "${#body}" -eq "$BODY_BYTES" ] || { echo "port $port answered ${#body} bytes, not $BODY_BYTES" >&2; exit 3; }
done

measure backend_direct "$BACKEND_PORT"
measure nginx_proxy "$NGINX_PORT"
measure haproxy_proxy "$HAPROXY_PORT"
measure gpugeek_gateway "$GATEWAY_PORT"

read -r gw_rps gw_p50 gw_p99 gw_err <<<"$(medians gpugeek_gateway)"
{
  printf '%-16s %10s %9s %9s %7s %14s\n' target req/s p50_ms p99_ms errors "gateway/this"
  for t in backend_direct nginx_proxy haproxy_proxy gpugeek_gateway; do
    read -r rps p50 p99 err <<<"$(medians $t)"
    printf '%-16s %10s %9s %9s %7s %14s\n' "$t" "$rps" "$p50" "$p99" "$err" \
      "$(awk -v a="$gw_rps" -v b="$rps" 'BEGIN { printf "%.2fx", a / b }')"
  done
} >&2
{
  printf '{"bench":"gateway","date":"%s","cores":%s,"conns":%s,"duration":"%s","runs":%s,"body_bytes":%s,' \
    "$(date -u +%FT%TZ)" "$(nproc)" "$CONNS" "$DURATION" "$RUNS" "$BODY_BYTES"
  printf '"pipeline_depth":%s' "$PIPELINE_DEPTH"
  for t in backend_direct nginx_proxy haproxy_proxy gpugeek_gateway; do
    read -r rps p50 p99 err <<<"$(medians $t)"
    printf ',"%s":{"median_rps":%s,"median_p50_ms":%s,"median_p99_ms":%s,"errors":%s}' "$t" "$rps" "$p50" "$p99" "$err"
  done
  read -r ng_rps _ ng_p99 _ <<<"$(medians nginx_proxy)"
  read -r ha_rps _ _ _ <<<"$(medians haproxy_proxy)"
  awk -v g="$gw_rps" -v n="$ng_rps" -v h="$ha_rps" -v gp="$gw_p99" -v np="$ng_p99" 'BEGIN {
    printf ",\"gateway_over_nginx\":%.3f,\"gateway_over_haproxy\":%.3f,\"p99_at_most_nginx\":%s}\n", g / n, g / h,
      (gp <= np) ? "true" : "false" }'
}

#!/bin/bash
# scores two metrics, and checks that the verifier has no network: a connection to the host's loopback fails
answer=$(cat /app/answer.txt 2>/dev/null | tr -d '[:space:]')
correct=0; [ "$answer" = "42" ] && correct=1
offline=1
python3 - <<'PY' || offline=0
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(open("/tests/port").read())), timeout=2)
except OSError:
    sys.exit(0)
sys.exit(1)
PY
echo "{\"reward\": $correct, \"correctness\": $correct, \"offline\": $offline}" > /logs/verifier/reward.json
exit 3  # (Harbor ignores the exit code)

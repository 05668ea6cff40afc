#!/bin/bash
# a verifier of its own: it has the artifacts (at their destinations), none of the agent's other files
if [ "$(cat /tmp/handed-over.txt 2>/dev/null)" = "done" ] && [ "$(cat /checked/report.txt 2>/dev/null)" = "done" ] \
   && [ ! -e /app/agent-only.txt ] && [ "$PWD" = "/check" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi

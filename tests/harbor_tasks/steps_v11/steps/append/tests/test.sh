#!/bin/bash
if [ "$(cat /workspace/notes.txt)" = "$(printf 'first\nsecond')" ] && [ -f /workspace/from-setup.txt ] && [ ! -f /workspace/setup.sh ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi

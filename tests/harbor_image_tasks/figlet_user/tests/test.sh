#!/bin/bash
# Scored in the image as its user: its figlet, its Python, its ENV, its WORKDIR, its ENTRYPOINT started.
expected="$(figlet 7)"
if [ "$(cat answer.txt 2>/dev/null)" = "$expected" ] && [ "$(id -un)" = player ] && [ "$PWD" = /app ] \
   && [ "$(cat /tmp/entrypoint.txt)" = "player from-the-image" ] && [ "$HOME" = /home/player ] \
   && python3 -c 'import sys; sys.exit(sys.version_info[:3] != (3, 11, 2))'; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi

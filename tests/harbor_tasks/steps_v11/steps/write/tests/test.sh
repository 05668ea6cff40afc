#!/bin/bash
if [ "$(cat /workspace/notes.txt 2>/dev/null)" = "first" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi

#!/bin/bash
if [ "$(cat /service/answer.txt 2>/dev/null)" = "tok-5309" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi

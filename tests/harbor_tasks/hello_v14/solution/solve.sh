#!/bin/bash
tr a-z A-Z < seed.txt > "$GREETING_FILE"

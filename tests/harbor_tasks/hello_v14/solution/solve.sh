#!/bin/bash
tr a-z A-Z < "$SEED_NAME" > "$GREETING_FILE"

#!/bin/bash
figlet "$(python3 -c 'import json; print(json.load(open("/opt/config.json"))["n"])')" > answer.txt

#!/bin/bash
python /opt/tool/bin/greet.py > /opt/tool/output.txt

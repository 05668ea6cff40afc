#!/bin/bash
# the image's writes are there (a python on PATH, the profile entry, /opt and /root files), and the agent's output
. /etc/profile.d/tool.sh
if [ "$(readlink /usr/bin/python)" = "/usr/bin/python3" ] && [ "$TOOL_HOME" = "/opt/tool" ] \
   && [ "$(cat /opt/tool/VERSION)" = "v1" ] && [ -s /opt/tool/lib/libtool.so ] && [ "$(cat /root/marker)" = "built; by the image" ] \
   && python -c "import iniconfig" \
   && [ "$(cat /opt/tool/output.txt 2>/dev/null)" = "hello from the tool" ] && [ "$PWD" = "/home/user" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi

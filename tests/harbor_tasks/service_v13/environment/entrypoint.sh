#!/bin/bash
(sleep 1 && exec python -m http.server 8731 --bind 127.0.0.1 --directory /service/site) &
exec sleep infinity

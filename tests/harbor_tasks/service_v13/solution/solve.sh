#!/bin/bash
curl -sf http://127.0.0.1:8731/token.txt > /service/answer.txt

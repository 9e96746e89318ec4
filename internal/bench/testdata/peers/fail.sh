#!/bin/sh
echo "connection refused" >&2
exit 1

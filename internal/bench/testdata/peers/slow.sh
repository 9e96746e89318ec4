#!/bin/sh
# A peer that never finishes: the runner's timeout must kill it, and its
# child, whose output pipe would otherwise keep the runner waiting.
sleep 600 &
wait

#!/usr/bin/env bash
. "$(dirname "$0")/lib.sh"
skip_all "not written yet"

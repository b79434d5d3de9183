#!/usr/bin/env bash
# Integration tests against a real local Slurm (started and stopped here).
set -euo pipefail
echo "integration: none yet"

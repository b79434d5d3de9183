#!/usr/bin/env bash
set -euo pipefail
bin/gavel-slurm version

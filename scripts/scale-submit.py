#!/usr/bin/env python3
"""Submit N tagged one-GPU jobs through slurmrestd, a few requests at once.

Used by scripts/scale-test.sh: sbatch through the local Slurm's wrappers
starts a chroot per job and managed about ten jobs a second on a 2-core
machine. Arguments: N TAG. Settings come from .local/slurm/env's variables
(SLURMRESTD_URL, SLURM_JWT_FILE, SLURM_USER_NAME, SLURM_PARTITION,
SLURM_API_VERSION). Prints how many were submitted; a failed request is
tried again a few times.
"""
import json
import os
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def main():
    n, tag = int(sys.argv[1]), sys.argv[2]
    url = f"{os.environ['SLURMRESTD_URL']}/slurm/{os.environ['SLURM_API_VERSION']}/job/submit"
    token = open(os.environ["SLURM_JWT_FILE"]).read().strip()
    body = json.dumps({"job": {
        "script": "#!/bin/sh\nexec sleep 100000\n", "partition": os.environ["SLURM_PARTITION"],
        "tres_per_node": "gres/gpu:1", "comment": tag, "name": "scale", "standard_output": "/dev/null",
        "current_working_directory": "/tmp", "environment": ["PATH=/bin:/usr/bin"],
    }}).encode()
    headers = {"Content-Type": "application/json", "X-SLURM-USER-NAME": os.environ["SLURM_USER_NAME"],
               "X-SLURM-USER-TOKEN": token}

    def submit(_):
        for attempt in range(5):
            try:
                req = urllib.request.Request(url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(req, timeout=60) as rsp:
                    if not json.load(rsp).get("errors"):
                        return 1
            except Exception:  # the controller is busy: try again
                pass
            time.sleep(1 + attempt)
        return 0

    with ThreadPoolExecutor(max_workers=4) as pool:
        done = sum(pool.map(submit, range(n)))
    print(done)
    return 0 if done == n else 1


if __name__ == "__main__":
    sys.exit(main())

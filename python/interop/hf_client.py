"""Run huggingface_hub the way a user does (its own environment handling), print JSON.

Used by test_hub.py in a subprocess so HF_ENDPOINT / HF_HUB_CACHE / HF_TOKEN /
HF_TOKEN_PATH / HF_HOME / HF_HUB_OFFLINE are read by huggingface_hub itself.

    python hf_client.py snapshot REPO [--local]          -> {"path": snapshot dir}
    python hf_client.py download REPO FILE... [--local]  -> {"paths": [...]}
"""

import json
import sys

from huggingface_hub import hf_hub_download, snapshot_download


def main(argv):
    local = "--local" in argv
    args = [a for a in argv if a != "--local"]
    cmd, repo, files = args[0], args[1], args[2:]
    if cmd == "snapshot":
        out = {"path": snapshot_download(repo, repo_type="dataset", local_files_only=local)}
    elif cmd == "download":
        out = {"paths": [hf_hub_download(repo, f, repo_type="dataset", local_files_only=local) for f in files]}
    else:
        raise SystemExit(f"unknown command {cmd!r}")
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])

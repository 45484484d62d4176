"""Where a run came from: its code version and its environment, recorded once at `holter.init`.

"A result you cannot reproduce is not a result" (shared chapter, *Reproducibility and
determinism*): two runs that should be identical can only be told apart, and a regression only
bisected, when each run says which code it ran. Recorded, standard library only:

* **code**: the git commit checked out where the training script lives (else the working
  directory), its branch, whether the working tree differs from it and a sha256 of that
  difference (`git diff HEAD --binary` plus the names of untracked files), so that two runs of
  one commit with other local edits are told apart; outside a repository, the script's own hash;
* **environment**: Python, the platform, the hostname, torch with its CUDA and cuDNN versions and
  the GPUs (read from torch only when the job imported it already: nothing is imported here), and
  the versions of the packages that shape training, from the installed distributions' metadata.

Each git call has a deadline (`GIT_TIMEOUT`) and a diff larger than `MAX_DIFF_BYTES` is hashed
only that far (said by `diff_truncated`): a huge repository costs a start-up of at most a few
seconds, never a hang. `HOLTER_PROVENANCE=0` (or `holter.init(provenance=False)`) records nothing.
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

GIT_TIMEOUT = 3.0
MAX_DIFF_BYTES = 64 * 1024 * 1024
# Distributions whose version changes what training computes, or how fast.
PACKAGES = (
    "torch",
    "numpy",
    "transformers",
    "accelerate",
    "datasets",
    "tokenizers",
    "safetensors",
    "lightning",
    "pytorch-lightning",
    "deepspeed",
    "flash-attn",
    "xformers",
    "triton",
    "trl",
    "peft",
    "vllm",
    "verl",
    "openrlhf",
    "megatron-core",
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "tensorflow",
    "holter",
)


def _git(folder: Path, *args: str) -> bytes | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            timeout=GIT_TIMEOUT,
            check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},  # read only: no index refresh lock
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _script() -> Path | None:
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv and sys.argv[0] else None)
    if not path:
        return None
    found = Path(path)
    return found.resolve() if found.is_file() else None


def _sha256_of_file(path: Path) -> str | None:
    try:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return None


def code_version(folder: Path | None = None) -> dict[str, Any] | None:
    """The commit checked out in `folder` (default: the script's folder, else the working
    directory), its branch, whether the tree is dirty and the hash of the difference; outside a
    repository (or without git), the script's path and hash. None when neither can be read."""
    script = _script()
    where = folder or (script.parent if script else Path.cwd())
    found: dict[str, Any] = {}
    if script is not None:
        found["script"] = str(script)
        hashed = _sha256_of_file(script)
        if hashed:
            found["script_hash"] = hashed
    commit = _git(where, "rev-parse", "HEAD")
    if commit is None:
        return found or None
    found["commit"] = commit.decode().strip()
    branch = _git(where, "rev-parse", "--abbrev-ref", "HEAD")
    if branch and branch.strip() != b"HEAD":
        found["branch"] = branch.decode(errors="replace").strip()
    status = _git(where, "status", "--porcelain", "--untracked-files=all")
    diff = _git(where, "diff", "HEAD", "--binary")
    if status is None or diff is None:
        return found
    changed = [line for line in status.decode(errors="replace").splitlines() if line.strip()]
    found["dirty"] = bool(changed)
    found["changed_files"] = len(changed)
    if changed:
        digest = hashlib.sha256(diff[:MAX_DIFF_BYTES])
        for line in sorted(line for line in changed if line.startswith("??")):
            digest.update(line.encode())  # an untracked file by name: its content is not read
        found["diff_hash"] = digest.hexdigest()
        if len(diff) > MAX_DIFF_BYTES:
            found["diff_truncated"] = True
    return found


def environment() -> dict[str, Any]:
    """Python, platform, hostname, torch/CUDA/cuDNN/GPUs (when torch is imported already) and the
    versions of `PACKAGES` that are installed."""
    found: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
    }
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception:  # noqa: BLE001 - a broken distribution's metadata must not stop a run
            continue
    found["packages"] = packages
    torch = sys.modules.get("torch")
    if torch is not None:
        found.update(_torch(torch))
    return {k: v for k, v in found.items() if v is not None}


def _torch(torch: Any) -> dict[str, Any]:
    """torch's version, its CUDA and cuDNN, and the GPUs when the job started CUDA already."""
    found: dict[str, Any] = {"torch": str(getattr(torch, "__version__", ""))[:64] or None}
    version = getattr(torch, "version", None)
    if getattr(version, "cuda", None):
        found["cuda"] = str(version.cuda)
    try:
        cudnn = torch.backends.cudnn.version()
        if cudnn:
            found["cudnn"] = str(cudnn)
        if torch.cuda.is_initialized():  # asking an idle driver would start it: only when the job did
            found["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - a half-installed CUDA must not stop a run: what was read stands
        return found
    return found


def provenance() -> dict[str, Any]:
    """The code version and environment, as `holter.init` sends them with the run."""
    found: dict[str, Any] = {"environment": environment()}
    code = code_version()
    if code:
        found["code"] = code
    return found

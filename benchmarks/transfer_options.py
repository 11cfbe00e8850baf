"""How a child's GPU output can reach the trusted side: the options, tried inside the sandbox.

A child started the way rooftop starts evaluation children (bubblewrap with every namespace
unshared, when bwrap is there) makes a tensor of N bytes on the GPU; each option then moves it to
this process, which checks the bytes and reports the time:

- file: the child writes the bytes to a file in its scratch folder and this side reads them back
  (the old way, bounded by the child's file-size limit and by two host copies);
- legacy CUDA IPC: torch's `cudaIpcGetMemHandle` sharing of the child's own allocation;
- VMM fd: this side makes a `cuMemCreate` allocation, sends its file descriptor over a Unix
  socket, and the child copies its output into it (what rooftop uses).

    python benchmarks/transfer_options.py [--gib 6] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from rooftop.check import vmm
from rooftop.integrity.sandbox import plan
from rooftop.pipeline.trusted.spawn import PACKAGE

CHILD = r"""
import os, pickle, socket, sys, time, torch
from rooftop.check import vmm
nbytes, sock_fd, option = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sock = socket.socket(fileno=sock_fd)
g = torch.Generator(device="cuda").manual_seed(7)
out = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device="cuda", generator=g)
torch.cuda.synchronize()
reply = {"checksum": int(out[:: max(1, nbytes // 4096)].sum())}
started = time.perf_counter()
try:
    if option == "file":
        with open("out.bin", "wb") as f:
            f.write(out.cpu().numpy().tobytes())
    elif option == "ipc":
        from torch.multiprocessing.reductions import reduce_tensor
        reply["ipc"] = pickle.dumps(reduce_tensor(out)[1])
    elif option == "vmm":
        _, fds, _, _ = socket.recv_fds(sock, 16, 1)
        mapped = vmm.import_fd(fds[0], nbytes, 0)
        os.close(fds[0])
        mapped.bytes[:nbytes].copy_(out)
        torch.cuda.synchronize()
        mapped.close()
    reply["child_seconds"] = time.perf_counter() - started
except Exception as exc:
    reply["error"] = f"{type(exc).__name__}: {exc}"
sock.sendall(pickle.dumps(reply))
sock.shutdown(socket.SHUT_WR)
sock.recv(1)  # wait until the parent has read what it needs (ipc: the memory must stay alive)
"""


def run_option(option: str, nbytes: int) -> dict:
    scratch = Path(tempfile.mkdtemp(prefix="rooftop-transfer-"))
    sandbox = plan("auto", scratch=scratch, writable=[], readable=[PACKAGE], device="cuda",
                   extra_env={"PYTHONPATH": str(PACKAGE.parent), "PYTHONUNBUFFERED": "1"})
    ours, theirs = socket.socketpair()
    result: dict = {"option": option, "sandbox": sandbox.kind.value, "gib": nbytes / 2**30}
    started = time.perf_counter()
    proc = subprocess.Popen([*sandbox.prefix, sys.executable, "-c", CHILD, str(nbytes), str(theirs.fileno()), option],
                            pass_fds=(theirs.fileno(),), env=sandbox.env, cwd=scratch)
    theirs.close()
    landing = None
    if option == "vmm":
        landing = vmm.allocate(nbytes, 0, vmm.PROT_READ)
        fd = landing.export()
        socket.send_fds(ours, [b"x"], [fd])
        os.close(fd)
    data = b""
    while chunk := ours.recv(1 << 20):
        data += chunk
    reply = pickle.loads(data)
    result.update({k: v for k, v in reply.items() if k in ("error", "child_seconds")})
    received = None
    if "error" not in reply:
        t0 = time.perf_counter()
        try:
            if option == "file":
                raw = bytearray((scratch / "out.bin").read_bytes())
                received = torch.frombuffer(raw, dtype=torch.uint8).cuda()
            elif option == "ipc":
                from torch.multiprocessing.reductions import rebuild_cuda_tensor
                received = rebuild_cuda_tensor(*pickle.loads(reply["ipc"])).clone()
            elif option == "vmm":
                assert landing is not None
                received = landing.bytes[:nbytes].clone()
            torch.cuda.synchronize()
            result["receive_seconds"] = time.perf_counter() - t0
            result["bytes_match"] = int(received[:: max(1, nbytes // 4096)].sum()) == reply["checksum"]
        except Exception as exc:
            result["error"] = f"{type(exc).__name__}: {exc}"
    ours.sendall(b"x")
    proc.wait(timeout=120)
    if landing is not None:
        landing.close()
    result["total_seconds"] = time.perf_counter() - started
    del received
    torch.cuda.empty_cache()
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=6.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    nbytes = int(args.gib * 2**30)
    rows = [run_option(option, nbytes) for option in ("vmm", "ipc", "file")]
    for row in rows:
        print(json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

"""The static gate's rules for native source (CUDA C++ in load_inline strings, .cu and .cpp files),
read as text: an AST of it is not at hand, and what is refused there is a handful of names."""

from __future__ import annotations

import re

from rooftop.problem.spec import Policy

# native (CUDA/C++) constructs that create streams or threads behind the harness's back
NATIVE_RULES = (
    ("stream", re.compile(r"\b(cudaStreamCreate\w*|cuStreamCreate\w*|getStreamFromPool|getStreamFromExternal)\b")),
    ("thread", re.compile(r"\b(std::thread|std::async|pthread_create|std::jthread)\b")),
)

# library compute reached from native code, refused where the problem forbids torch compute
# (allow_torch_ops: false, as kernel-to-kernel tasks do): vendor libraries, ATen's ops by name, and
# tensor methods that compute; allocation (at::empty, torch::zeros, ...) stays allowed
NATIVE_LIBRARIES = re.compile(r"\b(cublas\w*|cudnn\w*|cutlass::|cute::|cub::Device\w*|thrust::\w+|cusparse\w*|"
                              r"cufft\w*)")
NATIVE_TORCH_CALL = re.compile(r"\b(?:at|torch)::(\w+)\s*\(")
NATIVE_TORCH_ALLOWED = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
                        "full_like", "from_blob", "arange", "TensorOptions", "device", "dtype", "Device",
                        "Scalar", "IntArrayRef", "check"}
NATIVE_TENSOR_COMPUTE = re.compile(r"\.(mm|matmul|bmm|addmm|baddbmm|conv\w*|softmax|log_softmax|sum|mean|cumsum|"
                                   r"cumprod|topk|sort|layer_norm|relu|gelu|sigmoid|tanh|exp|max|min|argmax|norm)\s*\(")


def check_native(source: str, policy: Policy | None = None) -> list[tuple[str, int, str]]:
    """Stream or thread creation in CUDA/C++ text (load_inline strings and .cu/.cpp files), and library
    compute where the policy forbids torch compute."""
    hits = []
    own_kernels_only = policy is not None and not policy.allow_torch_ops
    for number, line in enumerate(source.splitlines(), 1):
        code = line.split("//", 1)[0]
        for rule, pattern in NATIVE_RULES:
            match = pattern.search(code)
            if match:
                hits.append((rule, number, f"'{match.group(1)}' creates a {rule}; all work must run on the "
                             "caller's current stream, inside the call"))
        if own_kernels_only:
            found = NATIVE_LIBRARIES.search(code) or NATIVE_TENSOR_COMPUTE.search(code) or next(
                (m for m in NATIVE_TORCH_CALL.finditer(code) if m.group(1) not in NATIVE_TORCH_ALLOWED), None)
            if found:
                hits.append(("library", number, f"'{found.group(0).strip()}' calls library compute; this problem "
                             "takes only the solution's own kernels"))
    return hits

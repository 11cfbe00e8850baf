"""Language backends (build/backends/): each built-in one is registered and found by name, a
solution's languages are the backends that recognise it, and a new language is one registration."""

from pathlib import Path

import pytest
from conftest import FIXTURES

from rooftop.build.backends import BACKENDS, Backend, BuildRequest, SourceScan, ordered, recognise
from rooftop.plugins import UnknownName
from rooftop.solution.loader import InlineSources, Language, detect, load_solution, needs_build


def test_every_built_in_language_has_a_backend_under_its_name():
    assert set(BACKENDS.names()) >= {language.value for language in Language}
    for language in Language:
        assert BACKENDS[language.value].name == language.value
    with pytest.raises(UnknownName, match="cuda_nvcc"):
        BACKENDS["fortran"]


@pytest.mark.parametrize(("solution", "languages"), [
    ("good.py", ["pytorch"]),
    ("triton_scale.py", ["triton"]),
    ("cuda_inline_ok.py", ["cuda_inline"]),
    ("cuda_ctypes_scale", ["cuda_nvcc"]),
])
def test_a_solution_is_recognised_by_its_backend(solution, languages):
    assert load_solution(FIXTURES / "solutions" / solution).languages == languages


def test_languages_come_in_rank_order_and_an_unreadable_file_is_the_fallbacks():
    source = "import triton\nfrom torch.utils.cpp_extension import load_inline\nm = load_inline('m', cpp_sources='')\n"
    assert detect(source, [Path("solution.py"), Path("k.cu")])[0] == ["triton", "cpp_inline", "cuda_nvcc"]
    assert detect("def broken(:\n", [Path("solution.py")])[0] == ["pytorch"]
    assert recognise(None) == [b.name for b in ordered() if b.fallback] == ["pytorch"]


def test_what_a_language_needs_is_the_backends_say():
    assert needs_build(["cuda_inline"]) and needs_build(["cpp_inline"]) and not needs_build(["triton", "pytorch"])
    assert BACKENDS["cuda_nvcc"].needs_gpu and not BACKENDS["cpp_inline"].needs_gpu
    assert load_solution(FIXTURES / "solutions/triton_scale.py").runtime_modules == ["triton"]


class Toy(Backend):
    """A language recognised by a file of its own kind, built before the import."""

    name, rank, compiled, needs_gpu = "toy", 50, True, False
    runtime_modules, source_suffixes = ("toy_runtime",), frozenset({".toy"})

    def recognise(self, scan: SourceScan) -> bool:
        return any(f.suffix == ".toy" for f in scan.files)

    def build(self, request: BuildRequest) -> bool | None:
        (request.folder / "toy.built").write_text("ok")
        return False


@pytest.fixture
def toy():
    BACKENDS.add(Toy.name, Toy())
    yield BACKENDS[Toy.name]
    BACKENDS.remove(Toy.name)


def test_a_new_language_is_one_registered_backend(toy, tmp_path):
    folder = tmp_path / "sol"
    folder.mkdir()
    (folder / "solution.py").write_text("import torch\n")
    (folder / "kernel.toy").write_text("toy kernel\n")
    solution = load_solution(folder)
    assert solution.languages == ["toy"] and needs_build(solution.languages)
    assert solution.runtime_modules == ["toy_runtime"] and not solution.needs_cuda
    request = BuildRequest(files=solution.files, inline=InlineSources(), folder=tmp_path, capability=None,
                           device="cpu", timeout=10)
    assert [backend.build(request) for backend in ordered(solution.languages)] == [False]
    assert (tmp_path / "toy.built").is_file()

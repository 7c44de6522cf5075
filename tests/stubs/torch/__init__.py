"""Test stand-in for the torch package (torch is not installed on the CPU test machines): with
tests/stubs on sys.path, `torch.utils.cpp_extension.include_paths()` names tests/stubs, the folder
of the stand-in <torch/extension.h>, as real torch names its own include folders."""

"""CUDA source kept in a Python string (`kernel.py` for load_inline, NVRTC or CuPy), instrumented
through the CUDA route and written back into its literal (docs/kernelpy.md)."""

"""CUDA source kept in a Python string (`kernel.py` for load_inline, NVRTC or CuPy): the CUDA
backend's route for a `.py` source, in the order it runs (docs/kernelpy.md, docs/launches.md).

- apply: locate.py finds the string, rewrite.py instruments its value with the CUDA rewriter
  (../rewrite.py) and literal.py writes the insertions back into its literal, every other byte of
  the file as it was;
- capture: hooks/ patches the Python launch APIs in the program's processes, so each launch of the
  kernel runs as its instrumented copy under a capture.LaunchCapture, which binds the buffer and
  writes the launch's files (or is counted as not captured, with why);
- validate: checks.py notes the launches the hooks could not capture and reads a `.py` source's id.

It builds on the .cu route (the rewriter and the recorder in cuda/; align.py and linemap.py in
atrex_inject/), which never imports it: within cuda/ only the backend (../backend.py) hands it a
`.py` source and a capture's environment. Nothing is imported here, so the hooks' start-up stays
as light as they need.
"""

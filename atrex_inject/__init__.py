"""atrex-inject: a source-to-source instrumentation compiler for intra-kernel GPU timelines."""
__version__ = "0.1.0"

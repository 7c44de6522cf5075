"""The device recorder header (installed as atrex_inject.runtime); see `atrex-inject include-dir`."""

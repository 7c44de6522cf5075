"""Lark grammars shipped with atrex-inject (installed as atrex_inject.grammars)."""

"""The command line, the roof of the bank: argv grammar -> job spec and options, and the printing of results.

Entry points (``scripts/*.py``) import it; nothing else in the bank does (import-linter checks it,
see ``.importlinter``). Adapters declare their flags as data (:mod:`taobank.jobspec`); this package
builds the argparse grammar from those declarations.
"""

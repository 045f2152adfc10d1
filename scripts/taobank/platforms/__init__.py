"""The platforms, one package each: its ``INFO`` (who it is) in ``__init__`` and its ``adapter`` module's
``PLATFORM`` (the contract's hooks). :mod:`taobank.registry` has a line per platform."""

"""Reading the Hydra configs, below every package that needs one: :mod:`.compose` (a runner's
config as its command line builds it, the resolvers it needs), :mod:`.values` (a value by key,
checked, errors naming the key), :mod:`.services` (a backbone's or the embedder's node as the
typed config :mod:`memsys` takes) and :mod:`.print_value` (one value, for the Makefile). A run's
own settings and identity are :mod:`benchmarks.pipeline.settings`'."""

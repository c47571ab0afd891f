"""AutoSplit: a model that Forge cannot run whole, divided into device and
CPU sub-models that run one after another. `api` holds `split_model`,
`convert` and `run_split`; the other modules, one step each."""

"""The plan: `graph_infos.json`'s records and its folder, the floor that the
P-device writer (`targets/devices/`) and AutoSplit's split (`split/`) share."""

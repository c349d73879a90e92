"""The replay engines: a recorded interval as input, the reference engine, the population engine and its shards, seeded noise in the control loop, FrankaTwin's sim CSV."""
